#include "causeway/cli/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/logging.h"

namespace causeway::cli {
namespace {

absl::Mutex mu(absl::kConstInit);
bool installed ABSL_GUARDED_BY(mu) = false;
int received ABSL_GUARDED_BY(mu) = 0;
std::function<void()>* handler ABSL_GUARDED_BY(mu) = nullptr;

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void WaitLoop() {
  sigset_t set = StopSet();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  std::function<void()> run;
  {
    absl::MutexLock lock(&mu);
    received = signal;
    if (handler != nullptr) run = *handler;
  }
  if (run) run();
}

}  // namespace

StopSignals& StopSignals::Install() {
  static StopSignals* signals = new StopSignals();
  absl::MutexLock lock(&mu);
  CW_CHECK(!installed) << "StopSignals::Install called twice";
  installed = true;
  sigset_t set = StopSet();
  CW_CHECK(pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0);
  std::thread(WaitLoop).detach();
  return *signals;
}

void StopSignals::SetHandler(std::function<void()> next) {
  bool run_now = false;
  {
    absl::MutexLock lock(&mu);
    delete handler;
    handler = new std::function<void()>(next);
    run_now = received != 0;
  }
  if (run_now && next) next();
}

bool StopSignals::stopped() const {
  absl::MutexLock lock(&mu);
  return received != 0;
}

bool StopSignals::WaitFor(absl::Duration timeout) const {
  absl::MutexLock lock(&mu);
  auto came = []() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return received != 0; };
  return mu.AwaitWithTimeout(absl::Condition(&came), timeout);
}

int StopSignals::Wait() const {
  absl::MutexLock lock(&mu);
  auto came = []() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return received != 0; };
  mu.Await(absl::Condition(&came));
  return received;
}

}  // namespace causeway::cli
