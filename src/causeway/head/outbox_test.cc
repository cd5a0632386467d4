#include "causeway/head/outbox.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace outbox_test {

using ::testing::ElementsAre;

TEST(OutboxTest, RunsNothingUntilDrainedThenEverythingInPostOrder) {
  Outbox outbox;
  std::vector<int> ran;
  for (int i = 0; i < 3; ++i) outbox.Post([&ran, i] { ran.push_back(i); });
  EXPECT_TRUE(ran.empty());
  EXPECT_EQ(outbox.pending(), 3);
  outbox.Drain();
  EXPECT_THAT(ran, ElementsAre(0, 1, 2));
  EXPECT_EQ(outbox.pending(), 0);
}

TEST(OutboxTest, AnActionThatPostsAndDrainsRunsTheNewActionAfterItself) {
  Outbox outbox;
  std::vector<int> ran;
  outbox.Post([&] {
    outbox.Post([&] { ran.push_back(2); });
    outbox.Drain();  // Returns at once: this drain is already running.
    ran.push_back(1);
  });
  outbox.Post([&] { ran.push_back(3); });
  outbox.Drain();
  // The nested post lands behind what was already queued.
  EXPECT_THAT(ran, ElementsAre(1, 3, 2));
}

TEST(OutboxTest, AFlushScopeDrainsAfterTheLockDeclaredInsideItIsReleased) {
  Outbox outbox;
  absl::Mutex mu;
  bool held_while_running = true;
  {
    Outbox::Flush flush(outbox);
    absl::MutexLock lock(&mu);
    outbox.Post([&] {
      held_while_running = !mu.TryLock();
      if (!held_while_running) mu.Unlock();
    });
  }
  EXPECT_FALSE(held_while_running);
}

TEST(OutboxTest, ADrainOnAnotherThreadRunsWhatIsPostedMeanwhileInOrder) {
  Outbox outbox;
  absl::Notification first_running;
  absl::Notification release_first;
  std::vector<int> ran;
  outbox.Post([&] {
    first_running.Notify();
    release_first.WaitForNotification();
    ran.push_back(1);
  });
  std::thread drainer([&] { outbox.Drain(); });
  first_running.WaitForNotification();
  outbox.Post([&] { ran.push_back(2); });
  outbox.Drain();  // The drainer is busy: this returns without running.
  EXPECT_TRUE(ran.empty());
  release_first.Notify();
  drainer.join();
  EXPECT_THAT(ran, ElementsAre(1, 2));
}

TEST(OutboxTest, DestroyingItRunsWhatIsLeft) {
  int ran = 0;
  {
    Outbox outbox;
    outbox.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran, 1);
}

}  // namespace outbox_test
}  // namespace causeway::head
