// Future<T> / Promise<T>: a value that will exist, or an error.
//
// The contract (see docs/async.md):
//
// * One type. `Future<T>` resolves to `absl::StatusOr<T>`; `Future<>` (that is,
//   `Future<void>`) resolves to `absl::Status`. Errors are ordinary results:
//   they flow through `Map`, `AndThen` and `JoinFutures` to everything computed
//   from them, and the functions given to those are not called.
//
// * Made in pairs: `auto [promise, future] = MakePromise<T>();`. The promise is
//   move-only and is set exactly once; setting it twice is a programmer error
//   (CHECK). A promise destroyed before it was set resolves its future with
//   `absl::StatusCode::kCancelled` ("promise dropped ..."), so a consumer never
//   waits forever on a producer that gave up.
//
// * Futures are copyable handles to one shared result (like
//   std::shared_future). The result is immutable once set and read as
//   `const&`. Any thread may use any copy at any time: the const methods
//   are safe to call concurrently, even on one object (assigning to one
//   Future object while others read it is a race, as for any value).
//
// * Callbacks always name their executor: `OnReady(executor, cb)`,
//   `Map(executor, fn)`, `AndThen(executor, fn)`. The callback runs once, via
//   `executor.Execute(...)`, which is called on the thread that sets the
//   promise, or on the registering thread if the future is already ready.
//   With `InlineExecutor` that is where the callback itself runs. No callback
//   and no `Execute` call ever runs while a future's internal lock is held, so
//   callbacks may freely use futures (including the one that called them).
//
// * Blocking: `Await()` waits without limit; `AwaitFor(timeout)` and
//   `AwaitUntil(deadline)` return `kDeadlineExceeded` if the future is not
//   ready in time. Never block inside an InlineExecutor callback or on a
//   thread the awaited producer needs.
#ifndef CAUSEWAY_BASE_FUTURE_H_
#define CAUSEWAY_BASE_FUTURE_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/base/logging.h"

namespace causeway {

template <typename T = void>
class Future;
template <typename T = void>
class Promise;

template <typename T = void>
struct PromiseAndFuture {
  Promise<T> promise;
  Future<T> future;
};

template <typename T = void>
PromiseAndFuture<T> MakePromise();

namespace internal {

// What a Future<T> resolves to.
template <typename T>
using FutureResult =
    std::conditional_t<std::is_void_v<T>, absl::Status, absl::StatusOr<T>>;

inline const absl::Status& StatusOf(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<absl::StatusOr<T>> : std::true_type {};

template <typename T>
struct IsFuture : std::false_type {};
template <typename T>
struct IsFuture<Future<T>> : std::true_type {};

// The value type of a future made from a continuation that returns R:
// StatusOr<U> and U give U; Status and void give void (a Future<>).
template <typename R>
struct ContinuationValue {
  using type = R;
};
template <typename U>
struct ContinuationValue<absl::StatusOr<U>> {
  using type = U;
};
template <>
struct ContinuationValue<absl::Status> {
  using type = void;
};

// What `fn` returns when called with the value of an OK Future<T>.
template <typename T, typename F>
struct ContinuationReturn {
  using type = std::remove_cvref_t<std::invoke_result_t<F&, const T&>>;
};
template <typename F>
struct ContinuationReturn<void, F> {
  using type = std::remove_cvref_t<std::invoke_result_t<F&>>;
};

// Calls `fn` with the value of an OK result (no argument for Future<>).
template <typename T, typename F>
decltype(auto) CallWithValue(F& fn, const FutureResult<T>& result) {
  if constexpr (std::is_void_v<T>) {
    return fn();
  } else {
    return fn(*result);
  }
}

// The error a dropped promise leaves in its future (kCancelled).
absl::Status DroppedPromiseError();
// The error AwaitUntil returns when `deadline` passed first.
absl::Status NotReadyByDeadlineError(absl::Time deadline);

// The shared state behind one promise and its futures. Thread-safe.
// `result_` is written once, under `mu_`, before `ready_` becomes true, and
// never changes afterwards; it is read without the lock only after `ready_`
// has been seen true (acquire).
template <typename R>
class FutureState : public std::enable_shared_from_this<FutureState<R>> {
 public:
  using Callback = absl::AnyInvocable<void(const R&) &&>;

  void Set(R result) {
    std::vector<std::pair<Executor*, Callback>> callbacks;
    {
      absl::MutexLock lock(&mu_);
      CW_CHECK(!ready_.load(std::memory_order_relaxed))
          << "Promise set twice (previous result: " << StatusOf(*result_)
          << ")";
      result_.emplace(std::move(result));
      ready_.store(true, std::memory_order_release);
      callbacks.swap(callbacks_);
      became_ready_.SignalAll();
    }
    for (auto& [executor, callback] : callbacks) {
      Dispatch(*executor, std::move(callback));
    }
  }

  bool IsReady() const { return ready_.load(std::memory_order_acquire); }

  const R& Await() const {
    if (!IsReady()) {
      absl::MutexLock lock(&mu_);
      while (!ready_.load(std::memory_order_relaxed)) became_ready_.Wait(&mu_);
    }
    return *result_;
  }

  // Returns true if the result is ready, false if `deadline` passed first.
  bool WaitUntil(absl::Time deadline) const {
    if (IsReady()) return true;
    absl::MutexLock lock(&mu_);
    while (!ready_.load(std::memory_order_relaxed)) {
      if (became_ready_.WaitWithDeadline(&mu_, deadline)) break;  // Timed out.
    }
    return ready_.load(std::memory_order_relaxed);
  }

  void OnReady(Executor& executor, Callback callback) {
    {
      absl::MutexLock lock(&mu_);
      if (!ready_.load(std::memory_order_relaxed)) {
        callbacks_.emplace_back(&executor, std::move(callback));
        return;
      }
    }
    Dispatch(executor, std::move(callback));
  }

 private:
  // Hands `callback` to `executor`. The task keeps this state alive, so it may
  // run after every promise and future handle is gone.
  void Dispatch(Executor& executor, Callback callback) {
    executor.Execute([self = this->shared_from_this(),
                      callback = std::move(callback)]() mutable {
      std::move(callback)(*self->result_);
    });
  }

  mutable absl::Mutex mu_;
  mutable absl::CondVar became_ready_;
  std::atomic<bool> ready_{false};
  std::optional<R> result_;
  std::vector<std::pair<Executor*, Callback>> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

// The read side. Copyable; every copy sees the same result. Thread-safe.
// A default-constructed Future is invalid: only IsValid() and assignment may
// be used on it (anything else is a CHECK failure).
template <typename T>
class Future {
 public:
  using ValueType = T;
  // absl::StatusOr<T>, or absl::Status for Future<>.
  using ResultType = internal::FutureResult<T>;

  Future() = default;

  bool IsValid() const { return state_ != nullptr; }

  // True once the result is set. Never blocks.
  bool IsReady() const { return state().IsReady(); }

  // Blocks until the result is set and returns it. The reference stays valid
  // while any copy of this future is alive; on a temporary future the result
  // is returned by copy instead.
  const ResultType& Await() const& { return state().Await(); }
  ResultType Await() && { return state().Await(); }

  // Like Await, but returns a kDeadlineExceeded error if the result is not
  // set by `deadline` (or within `timeout`). Copies the result. IsReady()
  // tells a timeout apart from a future that holds kDeadlineExceeded itself.
  ResultType AwaitUntil(absl::Time deadline) const {
    if (!state().WaitUntil(deadline)) {
      return internal::NotReadyByDeadlineError(deadline);
    }
    return state().Await();
  }
  ResultType AwaitFor(absl::Duration timeout) const {
    return AwaitUntil(absl::Now() + timeout);
  }

  // Runs `callback(result)` once, through `executor`, when the result is set
  // (see the header comment for which thread calls `executor.Execute`).
  void OnReady(Executor& executor,
               absl::AnyInvocable<void(const ResultType&) &&> callback) const {
    state().OnReady(executor, std::move(callback));
  }

  // Returns a future of `fn(value)` (of `fn()` for Future<>), called through
  // `executor` once this future is ready and OK. If this future holds an error,
  // `fn` is not called and the returned future holds the same error.
  // `fn` may return U (giving Future<U>), absl::StatusOr<U> (Future<U>),
  // absl::Status or void (Future<>). For a function that itself returns a
  // Future, use AndThen.
  template <typename F>
  auto Map(Executor& executor, F fn) const {
    using Return = typename internal::ContinuationReturn<T, F>::type;
    static_assert(!internal::IsFuture<Return>::value,
                  "Map's function returns a Future: use AndThen instead");
    using U = typename internal::ContinuationValue<Return>::type;
    PromiseAndFuture<U> next = MakePromise<U>();
    OnReady(executor, [promise = std::move(next.promise),
                       fn = std::move(fn)](const ResultType& result) mutable {
      if (!result.ok()) {
        promise.Set(internal::StatusOf(result));
      } else if constexpr (std::is_void_v<Return>) {
        internal::CallWithValue<T>(fn, result);
        promise.Set(absl::OkStatus());
      } else {
        promise.Set(internal::CallWithValue<T>(fn, result));
      }
    });
    return std::move(next.future);
  }

  // Chains an asynchronous step: `fn(value)` (or `fn()` for Future<>) returns
  // a Future<U>, and the returned Future<U> resolves when that one does.
  // `fn` runs through `executor` once this future is ready and OK; on an
  // error it is not called and the error is passed on.
  template <typename F>
  auto AndThen(Executor& executor, F fn) const {
    using Return = typename internal::ContinuationReturn<T, F>::type;
    static_assert(internal::IsFuture<Return>::value,
                  "AndThen's function must return a Future: use Map instead");
    using U = typename Return::ValueType;
    PromiseAndFuture<U> next = MakePromise<U>();
    OnReady(executor, [promise = std::move(next.promise),
                       fn = std::move(fn)](const ResultType& result) mutable {
      if (!result.ok()) {
        promise.Set(internal::StatusOf(result));
        return;
      }
      Return inner = internal::CallWithValue<T>(fn, result);
      inner.OnReady(
          InlineExecutor::Instance(),
          [promise = std::move(promise)](
              const typename Return::ResultType& inner_result) mutable {
            promise.Set(inner_result);
          });
    });
    return std::move(next.future);
  }

 private:
  friend class Promise<T>;
  using State = internal::FutureState<ResultType>;

  explicit Future(std::shared_ptr<State> state) : state_(std::move(state)) {}

  State& state() const {
    CW_CHECK(state_ != nullptr) << "use of an invalid (default-constructed) "
                                   "or moved-from Future";
    return *state_;
  }

  std::shared_ptr<State> state_;
};

// The write side. Move-only; owned by one producer at a time (not
// thread-safe itself; the future side is). See the header comment for the
// set-once and dropped-promise rules.
template <typename T>
class Promise {
 public:
  using ResultType = internal::FutureResult<T>;

  // An invalid promise; use MakePromise to get a real one.
  Promise() = default;
  Promise(Promise&&) = default;
  Promise& operator=(Promise&& other) {
    if (this != &other) {
      ResolveIfDropped();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~Promise() { ResolveIfDropped(); }

  // Sets the result and runs the registered callbacks' executors on this
  // thread. CHECK-fails if the result was already set.
  void Set(ResultType result) { state().Set(std::move(result)); }
  // For Promise<>: sets an OK status.
  void Set() requires std::is_void_v<T> { Set(absl::OkStatus()); }

  bool IsValid() const { return state_ != nullptr; }

  // Another future for the same result.
  Future<T> GetFuture() const { return Future<T>(state_); }

 private:
  template <typename U>
  friend PromiseAndFuture<U> MakePromise();
  using State = internal::FutureState<ResultType>;

  explicit Promise(std::shared_ptr<State> state) : state_(std::move(state)) {}

  State& state() const {
    CW_CHECK(state_ != nullptr) << "use of an invalid or moved-from Promise";
    return *state_;
  }

  void ResolveIfDropped() {
    if (state_ != nullptr && !state_->IsReady()) {
      state_->Set(internal::DroppedPromiseError());
    }
  }

  std::shared_ptr<State> state_;
};

template <typename T>
PromiseAndFuture<T> MakePromise() {
  auto state =
      std::make_shared<internal::FutureState<internal::FutureResult<T>>>();
  Promise<T> promise(std::move(state));
  Future<T> future = promise.GetFuture();
  return PromiseAndFuture<T>{std::move(promise), std::move(future)};
}

// A Future<> that is already ready with `status` (OK by default).
Future<> MakeReadyFuture(absl::Status status = absl::OkStatus());

// A Future<T> that is already ready with `result`.
template <typename T>
Future<T> MakeReadyFuture(absl::StatusOr<T> result) {
  PromiseAndFuture<T> pair = MakePromise<T>();
  pair.promise.Set(std::move(result));
  return std::move(pair.future);
}

// A Future<T> that is already ready with `value`.
template <typename T>
requires(!internal::IsStatusOr<std::remove_cvref_t<T>>::value &&
         !std::is_same_v<std::remove_cvref_t<T>, absl::Status>)
    Future<std::remove_cvref_t<T>> MakeReadyFuture(T&& value) {
  using U = std::remove_cvref_t<T>;
  PromiseAndFuture<U> pair = MakePromise<U>();
  pair.promise.Set(absl::StatusOr<U>(std::forward<T>(value)));
  return std::move(pair.future);
}

// A Future<T> that is already ready with the error `status` (CHECK: not OK).
template <typename T = void>
Future<T> MakeErrorFuture(absl::Status status) {
  CW_CHECK(!status.ok()) << "MakeErrorFuture needs an error status";
  PromiseAndFuture<T> pair = MakePromise<T>();
  pair.promise.Set(std::move(status));
  return std::move(pair.future);
}

namespace internal {

// Resolves once every input has resolved: with the first error in input order
// if any input failed, otherwise with `collect()` of the inputs.
template <typename T, typename Out>
class JoinState {
 public:
  JoinState(std::vector<Future<T>> inputs, Promise<Out> promise)
      : inputs_(std::move(inputs)),
        remaining_(inputs_.size()),
        promise_(std::move(promise)) {}

  // Called once per input as it resolves; the last call sets the promise.
  void InputResolved() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (const Future<T>& input : inputs_) {
      const FutureResult<T>& result = input.Await();  // Ready: no wait.
      if (!result.ok()) {
        promise_.Set(StatusOf(result));
        return;
      }
    }
    if constexpr (std::is_void_v<T>) {
      promise_.Set();
    } else {
      std::vector<T> values;
      values.reserve(inputs_.size());
      for (const Future<T>& input : inputs_) values.push_back(*input.Await());
      promise_.Set(std::move(values));
    }
  }

  const std::vector<Future<T>>& inputs() const { return inputs_; }

 private:
  const std::vector<Future<T>> inputs_;
  std::atomic<size_t> remaining_;
  Promise<Out> promise_;  // Touched only by the last InputResolved call.
};

template <typename T, typename Out>
Future<Out> Join(std::vector<Future<T>> futures) {
  PromiseAndFuture<Out> pair = MakePromise<Out>();
  Future<Out> joined = std::move(pair.future);
  if (futures.empty()) {
    if constexpr (std::is_void_v<T>) {
      pair.promise.Set();
    } else {
      pair.promise.Set(Out());
    }
    return joined;
  }
  auto join = std::make_shared<JoinState<T, Out>>(std::move(futures),
                                                  std::move(pair.promise));
  for (const Future<T>& input : join->inputs()) {
    input.OnReady(InlineExecutor::Instance(),
                  [join](const FutureResult<T>&) { join->InputResolved(); });
  }
  return joined;
}

}  // namespace internal

// Resolves when every input has resolved (never earlier, even after an
// error): with the values in input order, or with the error of the first
// failed input in input order. An empty input gives an empty vector. The
// values are copied out of the inputs.
template <typename T>
requires(!std::is_void_v<T>) Future<std::vector<T>> JoinFutures(
    std::vector<Future<T>> futures) {
  return internal::Join<T, std::vector<T>>(std::move(futures));
}

// Resolves when every input has resolved: OK, or the error of the first
// failed input in input order.
Future<> JoinFutures(std::vector<Future<>> futures);

}  // namespace causeway

#endif  // CAUSEWAY_BASE_FUTURE_H_
