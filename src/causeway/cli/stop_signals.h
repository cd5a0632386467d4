// SIGINT and SIGTERM as a clean stop for the long-running commands (head,
// worker, cluster): the signals are blocked in every thread and one thread
// of ours waits for them, so a stop runs ordinary code (never a signal
// handler) and nothing races with gRPC's threads.
#ifndef CAUSEWAY_CLI_STOP_SIGNALS_H_
#define CAUSEWAY_CLI_STOP_SIGNALS_H_

#include <functional>

#include "absl/time/time.h"

namespace causeway::cli {

class StopSignals {
 public:
  // Blocks the signals and starts the waiting thread. Call first, before
  // any other thread exists (they inherit the blocked mask). Once only.
  static StopSignals& Install();

  // Runs `handler` on the waiting thread when a signal comes (at once if
  // one came already). One handler; a later call replaces it.
  void SetHandler(std::function<void()> handler);

  // True once a signal came.
  bool stopped() const;
  // Waits up to `timeout` for a signal; true if one came.
  bool WaitFor(absl::Duration timeout) const;
  // Waits for a signal; returns its number.
  int Wait() const;

 private:
  StopSignals() = default;
};

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_STOP_SIGNALS_H_
