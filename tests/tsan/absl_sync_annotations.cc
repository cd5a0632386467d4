// ThreadSanitizer annotations for Debian's abseil, linked into every binary
// of a CAUSEWAY_TSAN build (CMakeLists.txt).
//
// libabsl_synchronization is not built with TSan, so TSan sees none of the
// happens-before edges absl::Mutex, CondVar, Notification and
// BlockingCounter create: every guarded field would look racy. This file
// defines those classes' out-of-line members in the executable, where they
// take precedence over the shared library's: each tells TSan what the call
// does with the same mutex annotations abseil makes when it is built with
// TSan itself (__tsan_mutex_pre_lock ... post_unlock, around the real call,
// looked up with dlsym(RTLD_NEXT)). TSan then also sees which mutexes every
// thread holds, so its lock-order-inversion detector checks the lock order
// of every absl::Mutex in the runtime (tests/tsan/lock_order_probe.cc shows
// that it does).
//
// Between a pre and a post annotation TSan ignores the thread's memory
// accesses, as abseil's own TSan build does: the real call evaluates other
// threads' Conditions (pure reads of guarded fields) while handing the lock
// over. Reader locks are annotated as such; a CondVar wait or an Await is
// annotated as an exclusive unlock and relock (Causeway takes no reader
// locks). Notification::HasBeenNotified is inline and reads an atomic the
// uninstrumented Notify wrote, so it is not annotated: use
// WaitForNotification*, which are.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

#define CW_STRINGIFY_INNER(x) #x
#define CW_STRINGIFY(x) CW_STRINGIFY_INNER(x)

// The library's symbol for `suffix`, an Itanium-mangled member name after
// the namespace ("5Mutex4LockEv"); `prefix` is "_ZN" or "_ZNK" (const).
void* RealSymbol(const char* prefix, const char* suffix) {
  const std::string inline_namespace =
      CW_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(prefix) + "4absl" +
                           std::to_string(inline_namespace.size()) +
                           inline_namespace + suffix;
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "absl_sync_annotations: %s not found\n",
                 name.c_str());
    std::abort();
  }
  return symbol;
}

template <typename Fn>
Fn Real(const char* prefix, const char* suffix) {
  return reinterpret_cast<Fn>(RealSymbol(prefix, suffix));
}

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;
constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;

// The library calls its own members too (AwaitWithTimeout calls
// AwaitWithDeadline, Notify locks a Mutex), and with -rdynamic those calls
// land here as well: only the outermost call of a thread is annotated.
thread_local int nesting = 0;
struct Outermost {
  Outermost() : outermost(nesting++ == 0) {}
  ~Outermost() { --nesting; }
  const bool outermost;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// --- Mutex. ---

Mutex::~Mutex() {
  static auto real = Real<void (*)(Mutex*)>("_ZN", "5MutexD2Ev");
  const Outermost scope;
  if (scope.outermost) __tsan_mutex_destroy(this, 0);
  real(this);
}

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex4LockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex10ReaderLockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_lock(this, kRead);
  real(this);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_ZN", "5Mutex7TryLockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_lock(this, kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>("_ZN", "5Mutex13ReaderTryLockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_lock(this, kRead | kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kRead | kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex6UnlockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex12ReaderUnlockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN", "5Mutex8LockWhenERKNS0_9ConditionE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN", "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond);
  __tsan_mutex_pre_lock(this, kRead);
  real(this, cond);
  __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_ZN", "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond,
                                      Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_ZN",
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, timeout);
  __tsan_mutex_pre_lock(this, kRead);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, kRead, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_ZN", "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_ZN", "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, deadline);
  __tsan_mutex_pre_lock(this, kRead);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, kRead, 0);
  return met;
}

// Await releases the mutex while it waits and holds it again on return.
void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN", "5Mutex5AwaitERKNS0_9ConditionE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond);
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_ZN", "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, timeout);
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_ZN", "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost scope;
  if (!scope.outermost) return real(this, cond, deadline);
  __tsan_mutex_pre_unlock(this, 0);
  __tsan_mutex_post_unlock(this, 0);
  __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

// --- CondVar: a wait releases `mu` and holds it again on return. ---

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>("_ZN", "7CondVar4WaitEPNS0_5MutexE");
  const Outermost scope;
  if (!scope.outermost) return real(this, mu);
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  real(this, mu);
  __tsan_mutex_post_lock(mu, 0, 0);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "_ZN", "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  const Outermost scope;
  if (!scope.outermost) return real(this, mu, timeout);
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  const bool timed_out = real(this, mu, timeout);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "_ZN", "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  const Outermost scope;
  if (!scope.outermost) return real(this, mu, deadline);
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  const bool timed_out = real(this, mu, deadline);
  __tsan_mutex_post_lock(mu, 0, 0);
  return timed_out;
}

// --- Notification, BlockingCounter, Barrier: release before, acquire
// after. ---

void Notification::Notify() {
  static auto real =
      Real<void (*)(Notification*)>("_ZN", "12Notification6NotifyEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real = Real<void (*)(const Notification*)>(
      "_ZNK", "12Notification19WaitForNotificationEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, Duration)>(
      "_ZNK", "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const Outermost scope;
  if (!scope.outermost) return real(this, timeout);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static auto real = Real<bool (*)(const Notification*, Time)>(
      "_ZNK", "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const Outermost scope;
  if (!scope.outermost) return real(this, deadline);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static auto real =
      Real<bool (*)(BlockingCounter*)>("_ZN", "15BlockingCounter14DecrementCountEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  static auto real =
      Real<void (*)(BlockingCounter*)>("_ZN", "15BlockingCounter4WaitEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  real(this);
  __tsan_acquire(this);
}

bool Barrier::Block() {
  static auto real = Real<bool (*)(Barrier*)>("_ZN", "7Barrier5BlockEv");
  const Outermost scope;
  if (!scope.outermost) return real(this);
  __tsan_release(this);
  const bool last = real(this);
  __tsan_acquire(this);
  return last;
}

ABSL_NAMESPACE_END
}  // namespace absl
