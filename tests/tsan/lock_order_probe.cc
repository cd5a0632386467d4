// Shows that the ThreadSanitizer build sees absl::Mutex
// (absl_sync_annotations.cc): run with one argument, it does one thing that
// TSan must report, or one that it must not.
//   inversion  two mutexes locked in both orders (one thread, never an
//              actual deadlock): TSan reports a lock-order-inversion.
//   race       two threads write a field without a lock: a data race.
//   guarded    the same writes under a Mutex, handed over through a
//              CondVar, an Await, a Notification and a BlockingCounter:
//              nothing to report (without the annotations TSan would call
//              every one a race).
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

void LockBothOrders() {
  // As the head does (Head::Create): abseil's own detector is off, so the
  // report can only come from TSan.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::Mutex a, b;
  {
    absl::MutexLock hold_a(&a);
    absl::MutexLock hold_b(&b);
  }
  {
    absl::MutexLock hold_b(&b);
    absl::MutexLock hold_a(&a);
  }
}

void Race() {
  int value = 0;
  std::thread writer([&value] { value = 1; });
  value = 2;
  writer.join();
  std::printf("%d\n", value);
}

void Guarded() {
  absl::Mutex mu;
  absl::CondVar changed;
  int value = 0;  // Guarded by mu.
  int step = 0;   // Guarded by mu.
  int after_notify = 0;
  int after_count = 0;
  absl::Notification notified;
  absl::BlockingCounter counted(1);
  std::thread peer([&] {
    {
      absl::MutexLock lock(&mu);
      value = 1;
      step = 1;
      changed.SignalAll();
    }
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](int* s) { return *s == 2; }, &step));
      value = 3;
    }
    after_notify = 1;
    notified.Notify();
    after_count = 1;
    counted.DecrementCount();
  });
  {
    absl::MutexLock lock(&mu);
    while (step != 1) changed.Wait(&mu);
    value = 2;
    step = 2;
  }
  notified.WaitForNotification();
  after_notify = 2;
  counted.Wait();
  after_count = 2;
  peer.join();
  absl::MutexLock lock(&mu);
  std::printf("%d %d %d\n", value, after_notify, after_count);
}

}  // namespace

int main(int argc, char** argv) {
  const char* what = argc == 2 ? argv[1] : "";
  if (std::strcmp(what, "inversion") == 0) {
    LockBothOrders();
  } else if (std::strcmp(what, "race") == 0) {
    Race();
  } else if (std::strcmp(what, "guarded") == 0) {
    Guarded();
  } else {
    std::fprintf(stderr, "usage: %s inversion|race|guarded\n", argv[0]);
    return 2;
  }
  return 0;
}
