#include "causeway/base/executor.h"

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway {
namespace executor_test {

TEST(InlineExecutorTest, RunsTheTaskBeforeExecuteReturnsOnTheCallingThread) {
  std::thread::id ran_on;
  InlineExecutor::Instance().Execute(
      [&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ThreadPoolTest, RunsEveryTaskBeforeTheDestructorReturns) {
  constexpr int kTasks = 1000;
  std::atomic<int> ran{0};
  {
    ThreadPool pool("all-tasks", 4);
    EXPECT_EQ(pool.num_threads(), 4);
    for (int i = 0; i < kTasks; ++i) pool.Execute([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), kTasks);
}

TEST(ThreadPoolTest, SingleThreadRunsTasksInFifoOrder) {
  std::vector<int> order;  // Only the pool's one thread writes it.
  {
    ThreadPool pool("fifo", 1);
    for (int i = 0; i < 100; ++i)
      pool.Execute([&order, i] { order.push_back(i); });
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(ThreadPoolTest, TasksRunOnThePoolsThreadsNotTheCaller) {
  absl::Mutex mu;
  std::set<std::thread::id> thread_ids;
  std::atomic<int> in_pool{0};
  {
    ThreadPool pool("ids", 3);
    for (int i = 0; i < 300; ++i) {
      pool.Execute([&] {
        if (pool.IsPoolThread()) in_pool.fetch_add(1);
        absl::MutexLock lock(&mu);
        thread_ids.insert(std::this_thread::get_id());
      });
    }
    EXPECT_FALSE(pool.IsPoolThread());
  }
  EXPECT_EQ(in_pool.load(), 300);
  EXPECT_LE(thread_ids.size(), 3u);
  EXPECT_EQ(thread_ids.count(std::this_thread::get_id()), 0u);
}

TEST(ThreadPoolTest, TasksQueuedByRunningTasksRunBeforeDestructionEnds) {
  std::atomic<int> ran{0};
  absl::Notification release;
  std::thread releaser;
  {
    ThreadPool pool("drain", 2);
    pool.Execute([&] {
      release.WaitForNotification();
      for (int i = 0; i < 10; ++i) {
        pool.Execute([&] { ran.fetch_add(1); });
      }
    });
    // Usually the destructor is already draining when the first task is
    // released, so its nested Execute calls happen during shutdown.
    releaser = std::thread([&] { release.Notify(); });
  }
  releaser.join();
  EXPECT_EQ(ran.load(), 10);
}

TEST(ThreadPoolTest, TasksRunConcurrentlyOnSeveralThreads) {
  // Two tasks that each wait for the other can only finish if the pool runs
  // them at the same time.
  absl::Notification first_started, second_started;
  std::atomic<int> finished{0};
  {
    ThreadPool pool("concurrent", 2);
    pool.Execute([&] {
      first_started.Notify();
      second_started.WaitForNotification();
      finished.fetch_add(1);
    });
    pool.Execute([&] {
      second_started.Notify();
      first_started.WaitForNotification();
      finished.fetch_add(1);
    });
  }
  EXPECT_EQ(finished.load(), 2);
}

TEST(ThreadPoolDeathTest, ZeroThreadsDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(ThreadPool("empty", 0), "at least one thread");
}

}  // namespace executor_test
}  // namespace causeway
