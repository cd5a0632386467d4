// A child process of ours (a head or a worker started by `causeway
// cluster`, or by a test): started with its stdout on a pipe we read lines
// from, stopped with a signal, waited for with a deadline. A child dies
// with us: it gets SIGTERM when this process dies (PR_SET_PDEATHSIG), so a
// killed parent leaves no orphans.
//
// Readiness is a line the child prints (`head listening on ...`): waiting
// for it is a read of the pipe with a deadline, never a sleep.
//
// Not thread-safe: one owner.
#ifndef CAUSEWAY_CLI_CHILD_PROCESS_H_
#define CAUSEWAY_CLI_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace causeway::cli {

class ChildProcess {
 public:
  // Starts `argv` (argv[0] is the program's path). Its stdout (and its
  // stderr too with `merge_stderr`; otherwise that is ours) comes to
  // ReadLineStartingWith. With `stdin_pipe` its stdin is a pipe that
  // WriteToStdin writes; otherwise it is ours. The signals blocked in this
  // thread are unblocked in the child.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      std::vector<std::string> argv, bool merge_stderr = false,
      bool stdin_pipe = false);
  // Kills it (SIGKILL) and reaps it unless it was reaped already.
  ~ChildProcess();

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads the child's stdout until a line starting with `prefix` (which is
  // returned, without its newline). Lines before it are passed to stderr
  // when `echo`. DeadlineExceeded if none came in time; Unavailable (with
  // the exit status) if the child exited or closed its stdout first.
  absl::StatusOr<std::string> ReadLineStartingWith(const std::string& prefix,
                                                   absl::Duration timeout,
                                                   bool echo = true);
  // Reads what the child has written so far without waiting, passing
  // complete lines to stderr. Unavailable once its stdout is closed (it
  // exited, as a rule).
  absl::Status Drain();

  // Writes `text` to the child's stdin (Start's `stdin_pipe`): all of it,
  // or an error naming why not.
  absl::Status WriteToStdin(std::string_view text);

  // Sends `signal` (no-op once reaped).
  void Signal(int signal);
  // After Signal(SIGSTOP): waits until the child has stopped, every thread
  // of it (FailedPrecondition if it exited instead). A signal is delivered
  // after kill() returns, so a stopped child is seen stopped only here.
  absl::Status AwaitStopped();
  // Waits until it exits; its wait status, or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // SIGTERM, a wait of `grace`, then SIGKILL. Its wait status.
  int Stop(absl::Duration grace);

  // The stdout pipe's read end, for a caller that polls several children.
  int stdout_fd() const { return stdout_fd_; }
  bool reaped() const { return status_.has_value(); }
  // "exited with status 1", "killed by signal 9".
  static std::string DescribeWaitStatus(int status);

 private:
  ChildProcess(pid_t pid, int stdout_fd, int stdin_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stdin_fd_(stdin_fd) {}
  // Reaps without blocking; true once reaped.
  bool TryReap();
  // One read of the pipe into lines_: OK, or Unavailable at its end.
  absl::Status ReadOnce();

  pid_t pid_;
  int stdout_fd_;
  int stdin_fd_;  // -1 without `stdin_pipe`.
  std::string buffer_;  // Read, not yet split into lines.
  std::vector<std::string> lines_;
  std::optional<int> status_;  // Once reaped.
};

// Waits until process `pid` (any process, not only a child) has exited;
// DeadlineExceeded if it has not within `timeout`. OK at once if there is
// no such process.
absl::Status AwaitProcessExit(pid_t pid, absl::Duration timeout);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_CHILD_PROCESS_H_
