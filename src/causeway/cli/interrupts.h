// Stopping a command cleanly on SIGINT or SIGTERM. While an Interrupts
// object lives, the first such signal is reported to its callback (on a
// thread of its own, never in the signal handler), so the command can stop
// its work and exit with a message; a second one exits the process at once
// (status 130), for a command that does not stop.
//
// One object at a time per process. Not copyable.
#ifndef CAUSEWAY_CLI_INTERRUPTS_H_
#define CAUSEWAY_CLI_INTERRUPTS_H_

#include <functional>
#include <thread>

namespace causeway::cli {

class Interrupts {
 public:
  // `on_interrupt(signal)` runs once, on the watcher thread.
  explicit Interrupts(std::function<void(int signal)> on_interrupt);
  ~Interrupts();  // Restores the previous handlers; joins the watcher.

  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

 private:
  void Watch();

  std::function<void(int)> on_interrupt_;
  int pipe_[2] = {-1, -1};  // The handler writes the signal number.
  std::thread watcher_;
};

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_INTERRUPTS_H_
