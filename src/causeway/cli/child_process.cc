#include "causeway/cli/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::cli {
namespace {

int RemainingMillis(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    std::vector<std::string> argv, bool merge_stderr, bool stdin_pipe) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to start");
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  int stdin_fds[2] = {-1, -1};
  if (stdin_pipe && pipe2(stdin_fds, O_CLOEXEC) != 0) {
    const int error = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(error)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    for (int fd : {pipe_fds[0], pipe_fds[1], stdin_fds[0], stdin_fds[1]}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // The parent died already.
    dup2(pipe_fds[1], STDOUT_FILENO);
    if (merge_stderr) dup2(pipe_fds[1], STDERR_FILENO);
    if (stdin_pipe) dup2(stdin_fds[0], STDIN_FILENO);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  if (stdin_pipe) close(stdin_fds[0]);
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, pipe_fds[0], stdin_fds[1]));
}

ChildProcess::~ChildProcess() {
  if (!reaped()) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  close(stdout_fd_);
  if (stdin_fd_ >= 0) close(stdin_fd_);
}

absl::Status ChildProcess::WriteToStdin(std::string_view text) {
  if (stdin_fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pid ", pid_, " was started without a stdin pipe"));
  }
  while (!text.empty()) {
    const ssize_t written = write(stdin_fd_, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      return absl::UnavailableError(absl::StrCat(
          "writing to the stdin of pid ", pid_, ": ", std::strerror(errno)));
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

std::string ChildProcess::DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

absl::StatusOr<std::string> ChildProcess::ReadLineStartingWith(
    const std::string& prefix, absl::Duration timeout, bool echo) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    while (!lines_.empty()) {
      std::string line = std::move(lines_.front());
      lines_.erase(lines_.begin());
      if (line.rfind(prefix, 0) == 0) return line;
      if (echo) RelayChildLine(pid_, line);
    }
    pollfd fd{stdout_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, RemainingMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "pid ", pid_, " printed no line starting with '", prefix,
          "' within ", absl::FormatDuration(timeout)));
    }
    if (!ReadOnce().ok()) {
      absl::StatusOr<int> status = Wait(absl::Seconds(5));
      return absl::UnavailableError(absl::StrCat(
          "pid ", pid_, " closed its output before printing '", prefix, "'",
          status.ok() ? absl::StrCat(": it ", DescribeWaitStatus(*status))
                      : ""));
    }
  }
}

absl::Status ChildProcess::ReadOnce() {
  char chunk[4096];
  ssize_t n = 0;
  do {
    n = read(stdout_fd_, chunk, sizeof(chunk));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return absl::UnavailableError("the child's output ended");
  buffer_.append(chunk, n);
  size_t newline;
  while ((newline = buffer_.find('\n')) != std::string::npos) {
    lines_.push_back(buffer_.substr(0, newline));
    buffer_.erase(0, newline + 1);
  }
  return absl::OkStatus();
}

absl::Status ChildProcess::Drain() {
  while (true) {
    for (const std::string& line : lines_) {
      RelayChildLine(pid_, line);
    }
    lines_.clear();
    pollfd fd{stdout_fd_, POLLIN, 0};
    if (poll(&fd, 1, 0) <= 0) return absl::OkStatus();
    if (absl::Status read = ReadOnce(); !read.ok()) return read;
  }
}

void ChildProcess::Signal(int signal) {
  if (!TryReap()) kill(pid_, signal);
}

absl::Status ChildProcess::AwaitStopped() {
  if (reaped()) {
    return absl::FailedPreconditionError(
        absl::StrCat("process ", pid_, " ", DescribeWaitStatus(*status_)));
  }
  while (true) {
    int status = 0;
    // Blocks until every thread of it has stopped, or it exits.
    const pid_t done = waitpid(pid_, &status, WUNTRACED);
    if (done == -1 && errno == EINTR) continue;
    if (done == -1) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (WIFSTOPPED(status)) return absl::OkStatus();
    status_ = status;
    return absl::FailedPreconditionError(absl::StrCat(
        "process ", pid_, " ", DescribeWaitStatus(status), " before it stopped"));
  }
}

bool ChildProcess::TryReap() {
  if (reaped()) return true;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) status_ = status;
  return reaped();
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (TryReap()) return *status_;
  // A pidfd becomes readable when the process exits: a wait with a
  // deadline and no polling loop.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd < 0) {
    return absl::InternalError(
        absl::StrCat("pidfd_open: ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    pollfd fd{pidfd, POLLIN, 0};
    const int ready = poll(&fd, 1, RemainingMillis(deadline));
    if (ready < 0 && errno == EINTR) continue;
    break;
  }
  close(pidfd);
  if (TryReap()) return *status_;
  return absl::DeadlineExceededError(absl::StrCat(
      "pid ", pid_, " did not exit within ", absl::FormatDuration(timeout)));
}

absl::Status AwaitProcessExit(pid_t pid, absl::Duration timeout) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("pidfd_open: ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  int ready = 0;
  do {
    pollfd fd{pidfd, POLLIN, 0};
    ready = poll(&fd, 1, RemainingMillis(deadline));
  } while (ready < 0 && errno == EINTR);
  close(pidfd);
  if (ready > 0) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "pid ", pid, " did not exit within ", absl::FormatDuration(timeout)));
}

int ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  absl::StatusOr<int> status = Wait(grace);
  if (status.ok()) return *status;
  Signal(SIGKILL);
  status = Wait(absl::Seconds(30));
  return status.ok() ? *status : -1;
}

}  // namespace causeway::cli
