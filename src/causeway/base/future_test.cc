#include "causeway/base/future.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway {
namespace future_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Executor& Inline() { return InlineExecutor::Instance(); }

// Runs tasks only when asked, on the thread that asks: lets a test hold a
// continuation back and check what happened before it ran.
class ManualExecutor final : public Executor {
 public:
  void Execute(absl::AnyInvocable<void()> task) override {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  int RunAll() {
    std::vector<absl::AnyInvocable<void()>> tasks;
    {
      absl::MutexLock lock(&mu_);
      tasks.swap(tasks_);
    }
    for (auto& task : tasks) task();
    return static_cast<int>(tasks.size());
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

TEST(FutureTest, SetThenAwaitReturnsTheValue) {
  auto [promise, future] = MakePromise<int>();
  EXPECT_FALSE(future.IsReady());
  promise.Set(42);
  EXPECT_TRUE(future.IsReady());
  ASSERT_TRUE(future.Await().ok());
  EXPECT_EQ(*future.Await(), 42);
}

TEST(FutureTest, AwaitThenSetFromAnotherThreadWakesTheWaiter) {
  auto [promise, future] = MakePromise<std::string>();
  absl::StatusOr<std::string> seen;
  absl::Notification waiter_started;
  std::thread waiter([&, future = future] {
    waiter_started.Notify();
    seen = future.Await();
  });
  waiter_started.WaitForNotification();
  promise.Set(std::string("hello"));
  waiter.join();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(*seen, "hello");
}

TEST(FutureTest, ErrorIsCarriedToEveryCopy) {
  auto [promise, future] = MakePromise<int>();
  Future<int> copy = future;
  promise.Set(absl::InvalidArgumentError("bad shape"));
  EXPECT_EQ(future.Await().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(copy.Await().status().message(), "bad shape");
}

TEST(FutureTest, VoidFutureCarriesAStatus) {
  auto [promise, future] = MakePromise<>();
  promise.Set(absl::UnavailableError("host down"));
  EXPECT_EQ(future.Await().code(), absl::StatusCode::kUnavailable);

  auto [ok_promise, ok_future] = MakePromise<>();
  ok_promise.Set();
  EXPECT_TRUE(ok_future.Await().ok());
}

TEST(FutureTest, DroppedPromiseResolvesTheFutureWithCancelled) {
  Future<int> future;
  {
    PromiseAndFuture<int> pair = MakePromise<int>();
    future = pair.future;
  }
  ASSERT_TRUE(future.IsReady());
  EXPECT_EQ(future.Await().status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(future.Await().status().message(), HasSubstr("promise dropped"));
}

TEST(FutureTest, MovedFromPromiseDoesNotResolveTheFuture) {
  auto [promise, future] = MakePromise<int>();
  {
    Promise<int> moved_from = std::move(promise);
    Promise<int> owner = std::move(moved_from);
    owner.Set(7);
  }
  EXPECT_EQ(*future.Await(), 7);
}

TEST(FutureDeathTest, SettingAPromiseTwiceDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto [promise, future] = MakePromise<int>();
  promise.Set(1);
  EXPECT_DEATH(promise.Set(2), "Promise set twice");
}

TEST(FutureDeathTest, AwaitingAnInvalidFutureDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Future<int> invalid;
  EXPECT_FALSE(invalid.IsValid());
  EXPECT_DEATH(invalid.Await(), "invalid");
}

TEST(FutureTest, ReadyFuturesAreReadyAtOnce) {
  Future<int> value = MakeReadyFuture(3);
  Future<int> from_status_or = MakeReadyFuture(absl::StatusOr<int>(4));
  Future<> ok = MakeReadyFuture();
  Future<double> error = MakeErrorFuture<double>(absl::NotFoundError("x"));
  EXPECT_EQ(*value.Await(), 3);
  EXPECT_EQ(*from_status_or.Await(), 4);
  EXPECT_TRUE(ok.Await().ok());
  EXPECT_EQ(error.Await().status().code(), absl::StatusCode::kNotFound);
}

TEST(FutureTest, AwaitOnATemporaryReturnsACopy) {
  absl::StatusOr<std::vector<int>> result =
      MakeReadyFuture(std::vector<int>{1, 2}).Await();
  ASSERT_TRUE(result.ok());
  EXPECT_THAT(*result, ElementsAre(1, 2));
}

TEST(FutureTest, AwaitForTimesOutWithDeadlineExceeded) {
  auto [promise, future] = MakePromise<int>();
  absl::StatusOr<int> result = future.AwaitFor(absl::Milliseconds(5));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(future.IsReady());
  promise.Set(1);  // Still settable after a timed-out wait.
  EXPECT_EQ(*future.AwaitFor(absl::Milliseconds(5)), 1);
}

TEST(FutureTest, AwaitUntilAPastDeadlineReturnsAReadyResult) {
  Future<> future = MakeReadyFuture(absl::AbortedError("gave up"));
  EXPECT_EQ(future.AwaitUntil(absl::InfinitePast()).code(),
            absl::StatusCode::kAborted);
}

TEST(FutureTest, OnReadyRunsOnTheGivenExecutorsThread) {
  ThreadPool pool("on-ready", 1);
  auto [id_promise, pool_thread] = MakePromise<std::thread::id>();
  pool.Execute([p = std::move(id_promise)]() mutable {
    p.Set(std::this_thread::get_id());
  });

  auto [promise, future] = MakePromise<int>();
  auto [ran_promise, ran_on] = MakePromise<std::thread::id>();
  future.OnReady(pool, [p = std::move(ran_promise)](
                           const absl::StatusOr<int>& result) mutable {
    EXPECT_EQ(*result, 5);
    p.Set(std::this_thread::get_id());
  });
  promise.Set(5);
  EXPECT_EQ(*ran_on.Await(), *pool_thread.Await());
  EXPECT_NE(*ran_on.Await(), std::this_thread::get_id());
}

TEST(FutureTest, InlineCallbackRunsOnTheSettingThread) {
  auto [promise, future] = MakePromise<int>();
  std::thread::id ran_on;
  future.OnReady(Inline(), [&](const absl::StatusOr<int>&) {
    ran_on = std::this_thread::get_id();
  });
  std::thread::id setter_id;
  std::thread setter([&, p = std::move(promise)]() mutable {
    setter_id = std::this_thread::get_id();
    p.Set(1);
  });
  setter.join();
  EXPECT_EQ(ran_on, setter_id);
}

TEST(FutureTest, CallbackRegisteredAfterReadyRunsImmediatelyInline) {
  Future<int> future = MakeReadyFuture(9);
  int seen = 0;
  future.OnReady(Inline(),
                 [&](const absl::StatusOr<int>& result) { seen = *result; });
  EXPECT_EQ(seen, 9);
}

TEST(FutureTest, CallbackMayUseTheFutureThatCalledIt) {
  auto [promise, future] = MakePromise<int>();
  int nested_seen = 0;
  future.OnReady(Inline(), [&, future = future](const absl::StatusOr<int>&) {
    // Would deadlock if callbacks ran under the future's lock.
    EXPECT_TRUE(future.IsReady());
    future.OnReady(Inline(), [&](const absl::StatusOr<int>& result) {
      nested_seen = *result;
    });
  });
  promise.Set(11);
  EXPECT_EQ(nested_seen, 11);
}

TEST(FutureTest, EveryCallbackRunsExactlyOnce) {
  auto [promise, future] = MakePromise<>();
  int calls = 0;
  for (int i = 0; i < 5; ++i) {
    future.OnReady(Inline(), [&](const absl::Status&) { ++calls; });
  }
  promise.Set();
  future.OnReady(Inline(), [&](const absl::Status&) { ++calls; });
  EXPECT_EQ(calls, 6);
}

TEST(FutureTest, CallbackOnAnExecutorMayOutliveEveryHandle) {
  ManualExecutor executor;
  int seen = 0;
  {
    auto [promise, future] = MakePromise<int>();
    future.OnReady(executor,
                   [&](const absl::StatusOr<int>& result) { seen = *result; });
    promise.Set(8);
  }
  EXPECT_EQ(seen, 0);
  EXPECT_EQ(executor.RunAll(), 1);
  EXPECT_EQ(seen, 8);
}

TEST(FutureTest, MapChainsValuesThroughFunctions) {
  Future<std::string> result =
      MakeReadyFuture(2)
          .Map(Inline(), [](const int& x) { return x * 3; })
          .Map(Inline(), [](int x) { return std::to_string(x); });
  EXPECT_EQ(*result.Await(), "6");
}

TEST(FutureTest, MapRunsTheFunctionOnTheGivenExecutor) {
  ManualExecutor executor;
  auto [promise, future] = MakePromise<int>();
  Future<int> doubled = future.Map(executor, [](int x) { return 2 * x; });
  promise.Set(21);
  EXPECT_FALSE(doubled.IsReady());
  EXPECT_EQ(executor.RunAll(), 1);
  EXPECT_EQ(*doubled.Await(), 42);
}

TEST(FutureTest, MapSkipsTheFunctionOnAnError) {
  bool called = false;
  Future<int> result = MakeErrorFuture<int>(absl::DataLossError("shard lost"))
                           .Map(Inline(), [&](int x) {
                             called = true;
                             return x;
                           });
  EXPECT_FALSE(called);
  EXPECT_EQ(result.Await().status().code(), absl::StatusCode::kDataLoss);
}

TEST(FutureTest, MapFunctionReturningAnErrorFailsTheResult) {
  Future<int> result =
      MakeReadyFuture(-1).Map(Inline(), [](int x) -> absl::StatusOr<int> {
        if (x < 0) return absl::OutOfRangeError("negative");
        return x;
      });
  EXPECT_EQ(result.Await().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(FutureTest, MapOnAVoidFutureProducesAValueOrAStatus) {
  Future<int> value = MakeReadyFuture().Map(Inline(), [] { return 5; });
  Future<> status = MakeReadyFuture().Map(
      Inline(), [] { return absl::ResourceExhaustedError("out of memory"); });
  int side_effect = 0;
  Future<> done =
      MakeReadyFuture(1).Map(Inline(), [&](int x) { side_effect = x; });
  EXPECT_EQ(*value.Await(), 5);
  EXPECT_EQ(status.Await().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(done.Await().ok());
  EXPECT_EQ(side_effect, 1);
}

TEST(FutureTest, MapOnADroppedExecutorTaskResolvesWithCancelled) {
  Future<int> result;
  {
    ManualExecutor executor;  // Destroyed with the task still queued.
    result = MakeReadyFuture(1).Map(executor, [](int x) { return x; });
  }
  EXPECT_EQ(result.Await().status().code(), absl::StatusCode::kCancelled);
}

TEST(FutureTest, AndThenWaitsForTheInnerFuture) {
  auto [inner_promise, inner] = MakePromise<int>();
  Future<int> result =
      MakeReadyFuture(std::string("abc"))
          .AndThen(Inline(),
                   [inner = inner](const std::string&) { return inner; });
  EXPECT_FALSE(result.IsReady());
  inner_promise.Set(3);
  EXPECT_EQ(*result.Await(), 3);
}

TEST(FutureTest, AndThenChainsVoidStepsAndStopsAtTheFirstError) {
  std::vector<int> ran;
  auto step = [&](int id, absl::Status outcome) {
    return [&ran, id, outcome] {
      ran.push_back(id);
      return MakeReadyFuture(outcome);
    };
  };
  Future<> result =
      MakeReadyFuture()
          .AndThen(Inline(), step(1, absl::OkStatus()))
          .AndThen(Inline(), step(2, absl::InternalError("step 2 failed")))
          .AndThen(Inline(), step(3, absl::OkStatus()));
  EXPECT_THAT(ran, ElementsAre(1, 2));
  EXPECT_EQ(result.Await().message(), "step 2 failed");
}

TEST(FutureTest, JoinCollectsValuesInInputOrder) {
  std::vector<Promise<int>> promises;
  std::vector<Future<int>> futures;
  for (int i = 0; i < 4; ++i) {
    auto pair = MakePromise<int>();
    promises.push_back(std::move(pair.promise));
    futures.push_back(pair.future);
  }
  Future<std::vector<int>> joined = JoinFutures(futures);
  for (int i = 3; i >= 0; --i) {
    EXPECT_FALSE(joined.IsReady());
    promises[i].Set(i * 10);
  }
  EXPECT_THAT(*joined.Await(), ElementsAre(0, 10, 20, 30));
}

TEST(FutureTest, JoinWaitsForAllInputsAndReturnsTheFirstErrorInOrder) {
  auto [p0, f0] = MakePromise<int>();
  auto [p1, f1] = MakePromise<int>();
  auto [p2, f2] = MakePromise<int>();
  Future<std::vector<int>> joined = JoinFutures<int>({f0, f1, f2});
  p2.Set(absl::InternalError("second error"));
  p1.Set(absl::NotFoundError("first error"));
  EXPECT_FALSE(joined.IsReady());  // p0 is still pending.
  p0.Set(0);
  EXPECT_EQ(joined.Await().status().message(), "first error");
}

TEST(FutureTest, JoinOfVoidFuturesIsOkOnlyWhenAllAreOk) {
  Future<> all_ok = JoinFutures({MakeReadyFuture(), MakeReadyFuture()});
  Future<> one_bad = JoinFutures(
      {MakeReadyFuture(), MakeReadyFuture(absl::UnknownError("bad"))});
  EXPECT_TRUE(all_ok.Await().ok());
  EXPECT_EQ(one_bad.Await().code(), absl::StatusCode::kUnknown);
}

TEST(FutureTest, JoinOfNothingIsReadyAndEmpty) {
  EXPECT_TRUE(JoinFutures(std::vector<Future<>>{}).Await().ok());
  Future<std::vector<int>> empty = JoinFutures(std::vector<Future<int>>{});
  ASSERT_TRUE(empty.IsReady());
  EXPECT_TRUE(empty.Await()->empty());
}

// Many threads set many promises while many others await them and register
// callbacks: every waiter wakes, every callback runs once, no value is lost.
TEST(FutureStressTest, ConcurrentSettersAndWaitersLoseNoWakeups) {
  constexpr int kFutures = 10000;
  constexpr int kSetters = 4;
  constexpr int kWaiters = 4;
  std::vector<Promise<int>> promises;
  std::vector<Future<int>> futures;
  for (int i = 0; i < kFutures; ++i) {
    auto pair = MakePromise<int>();
    promises.push_back(std::move(pair.promise));
    futures.push_back(std::move(pair.future));
  }
  std::atomic<int64_t> callback_sum{0};
  std::atomic<int> wrong_values{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWaiters; ++w) {
    threads.emplace_back([&, w] {
      // Each waiter walks all futures from a different start.
      for (int k = 0; k < kFutures; ++k) {
        int i = (k + w * kFutures / kWaiters) % kFutures;
        if (w % 2 == 0) {
          if (*futures[i].Await() != i) wrong_values.fetch_add(1);
        } else {
          futures[i].OnReady(Inline(), [&](const absl::StatusOr<int>& r) {
            callback_sum.fetch_add(*r);
          });
        }
      }
    });
  }
  for (int s = 0; s < kSetters; ++s) {
    threads.emplace_back([&, s] {
      for (int i = s; i < kFutures; i += kSetters) promises[i].Set(i);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong_values.load(), 0);
  const int64_t sum_of_indices = int64_t{kFutures} * (kFutures - 1) / 2;
  EXPECT_EQ(callback_sum.load(), sum_of_indices * (kWaiters / 2));
}

TEST(FutureStressTest, JoinOverAThreadPoolSeesEveryValue) {
  constexpr int kFutures = 2000;
  ThreadPool pool("join-stress", 4);
  std::vector<Future<int>> futures;
  for (int i = 0; i < kFutures; ++i) {
    auto [promise, future] = MakePromise<int>();
    pool.Execute([p = std::move(promise), i]() mutable { p.Set(i); });
    futures.push_back(future.Map(pool, [](int x) { return x + 1; }));
  }
  absl::StatusOr<std::vector<int>> joined = JoinFutures(futures).Await();
  ASSERT_TRUE(joined.ok());
  ASSERT_EQ(joined->size(), kFutures);
  for (int i = 0; i < kFutures; ++i) EXPECT_EQ((*joined)[i], i + 1);
}

}  // namespace future_test
}  // namespace causeway
