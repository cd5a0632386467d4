#include "causeway/head/island_scheduler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace island_scheduler_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<DeviceId> Ids(std::vector<int64_t> ids) {
  std::vector<DeviceId> out;
  for (int64_t id : ids) out.push_back(DeviceId(id));
  return out;
}

IslandScheduler::Options Window(int64_t max_in_flight,
                                int64_t per_device = 0) {
  IslandScheduler::Options options;
  options.max_in_flight = max_in_flight;
  options.max_in_flight_per_device = per_device;
  options.name = "island 0";
  return options;
}

// Records which launch (by tag) was released with which sequence number,
// and which launches were dropped.
class IslandSchedulerTest : public ::testing::Test {
 protected:
  struct Released {
    uint64_t seq;
    int tag;
    int64_t session;
  };

  Launch MakeLaunch(int64_t session, std::vector<int64_t> devices, int tag,
                    double cost = 1) {
    Launch launch;
    launch.session = SessionId(session);
    launch.devices = Ids(std::move(devices));
    launch.cost = cost;
    launch.release = [this, tag, session](uint64_t seq) {
      absl::MutexLock lock(&mu_);
      released_.push_back({seq, tag, session});
    };
    launch.on_drop = [this, tag](absl::Status status) {
      absl::MutexLock lock(&mu_);
      dropped_.emplace_back(tag, std::move(status));
    };
    return launch;
  }

  void Submit(IslandScheduler& scheduler, int64_t session,
              std::vector<int64_t> devices, int tag, double cost = 1) {
    ASSERT_TRUE(
        scheduler.Submit(MakeLaunch(session, std::move(devices), tag, cost))
            .ok());
  }

  std::vector<int> ReleasedTags() {
    absl::MutexLock lock(&mu_);
    std::vector<int> tags;
    for (const Released& r : released_) tags.push_back(r.tag);
    return tags;
  }
  std::vector<Released> ReleasedLaunches() {
    absl::MutexLock lock(&mu_);
    return released_;
  }

  // Completes the oldest launch in flight, `times` times.
  void CompleteOldest(IslandScheduler& scheduler, int times) {
    for (int i = 0; i < times; ++i) {
      ASSERT_TRUE(scheduler.OnLaunchComplete(next_to_complete_++).ok());
    }
  }

  absl::Mutex mu_;
  std::vector<Released> released_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, absl::Status>> dropped_ ABSL_GUARDED_BY(mu_);
  uint64_t next_to_complete_ = 0;
};

// --- Order and window --------------------------------------------------------

TEST_F(IslandSchedulerTest, ReleasesAtOnceWhileTheWindowHasRoom) {
  IslandScheduler scheduler(Window(4));
  Submit(scheduler, 1, {0, 1}, 7);
  std::vector<Released> released = ReleasedLaunches();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].seq, 0u);
  EXPECT_EQ(released[0].tag, 7);
}

TEST_F(IslandSchedulerTest, NumbersReleasesDenselyFromZero) {
  IslandScheduler scheduler(Window(8));
  for (int i = 0; i < 5; ++i) Submit(scheduler, i % 2, {i % 3}, i);
  std::vector<uint64_t> seqs;
  for (const Released& r : ReleasedLaunches()) seqs.push_back(r.seq);
  EXPECT_THAT(seqs, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(scheduler.Stats().next_seq, 5u);
}

TEST_F(IslandSchedulerTest, KeepsAtMostMaxInFlightReleased) {
  IslandScheduler scheduler(Window(2));
  for (int i = 0; i < 5; ++i) Submit(scheduler, 1, {0}, i);
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 1));
  IslandSchedulingStats stats = scheduler.Stats();
  EXPECT_EQ(stats.in_flight, 2);
  EXPECT_EQ(stats.queued, 3);
  ASSERT_TRUE(scheduler.OnLaunchComplete(1).ok());
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 1, 2));
  ASSERT_TRUE(scheduler.OnLaunchComplete(0).ok());
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 1, 2, 3));
}

TEST_F(IslandSchedulerTest, CompletingAnUnknownLaunchIsNotFound) {
  IslandScheduler scheduler(Window(2));
  Submit(scheduler, 1, {0}, 0);
  ASSERT_TRUE(scheduler.OnLaunchComplete(0).ok());
  absl::Status again = scheduler.OnLaunchComplete(0);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr("already completed"));
  EXPECT_THAT(scheduler.OnLaunchComplete(9).message(),
              HasSubstr("never released"));
}

TEST_F(IslandSchedulerTest, ReleasesEachSessionsLaunchesInSubmissionOrder) {
  IslandScheduler scheduler(Window(1));
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    // Session 1 has cheap and dear launches mixed; order must not change.
    Submit(scheduler, 1 + i % 2, {0}, i, 1 + rng() % 5);
  }
  CompleteOldest(scheduler, 39);
  std::vector<int> session_1;
  std::vector<int> session_2;
  for (const Released& r : ReleasedLaunches()) {
    (r.session == 1 ? session_1 : session_2).push_back(r.tag);
  }
  ASSERT_EQ(session_1.size(), 20u);
  ASSERT_EQ(session_2.size(), 20u);
  EXPECT_TRUE(std::is_sorted(session_1.begin(), session_1.end()));
  EXPECT_TRUE(std::is_sorted(session_2.begin(), session_2.end()));
}

// --- Fair share --------------------------------------------------------------

TEST_F(IslandSchedulerTest, SharesASaturatedWindowByWeight) {
  IslandScheduler scheduler(Window(4));
  const double weights[] = {1, 2, 4, 8};
  for (int s = 0; s < 4; ++s) {
    ASSERT_TRUE(scheduler.SetWeight(SessionId(s), weights[s]).ok());
  }
  for (int i = 0; i < 4000; ++i) {
    for (int s = 0; s < 4; ++s) Submit(scheduler, s, {0, 1, 2, 3}, i);
  }
  CompleteOldest(scheduler, 6000);
  IslandSchedulingStats stats = scheduler.Stats();
  ASSERT_EQ(stats.sessions.size(), 4u);
  int64_t total = 0;
  for (const auto& s : stats.sessions) total += s.launches_released;
  EXPECT_EQ(total, 6004);
  for (int s = 0; s < 4; ++s) {
    EXPECT_GT(stats.sessions[s].queued, 0) << "session " << s << " ran dry";
    const double expected = total * weights[s] / 15.0;
    EXPECT_NEAR(stats.sessions[s].launches_released, expected, 0.02 * expected)
        << "session " << s;
  }
}

TEST_F(IslandSchedulerTest, SharesByCostNotByLaunchCount) {
  IslandScheduler scheduler(Window(1));
  for (int i = 0; i < 500; ++i) {
    Submit(scheduler, 1, {0}, i, /*cost=*/3);
    Submit(scheduler, 2, {0}, i, /*cost=*/1);
  }
  CompleteOldest(scheduler, 400);
  IslandSchedulingStats stats = scheduler.Stats();
  const SessionSchedulingStats& dear = stats.sessions[0];
  const SessionSchedulingStats& cheap = stats.sessions[1];
  EXPECT_NEAR(cheap.launches_released, 3 * dear.launches_released, 4);
  EXPECT_NEAR(cheap.cost_released, dear.cost_released, 3);
}

TEST_F(IslandSchedulerTest, AnIdleSessionEarnsNoCredit) {
  IslandScheduler scheduler(Window(1));
  for (int i = 0; i < 300; ++i) Submit(scheduler, 1, {0}, i);
  CompleteOldest(scheduler, 100);  // Session 1 ran alone for 101 launches.
  for (int i = 0; i < 300; ++i) Submit(scheduler, 2, {0}, 1000 + i);
  CompleteOldest(scheduler, 100);
  int64_t late_session = 0;
  std::vector<Released> released = ReleasedLaunches();
  for (size_t i = 101; i < released.size(); ++i) {
    if (released[i].session == 2) ++late_session;
  }
  // Equal shares from its arrival on, not a catch-up burst.
  EXPECT_NEAR(late_session, 50, 2);
}

TEST_F(IslandSchedulerTest, SetWeightRefusesWeightsOutOfRange) {
  IslandScheduler scheduler(Window(1));
  EXPECT_EQ(scheduler.SetWeight(SessionId(1), 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.SetWeight(SessionId(1), -2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      scheduler
          .SetWeight(SessionId(1), std::numeric_limits<double>::quiet_NaN())
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.SetWeight(SessionId(), 1).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(scheduler.SetWeight(SessionId(1), 2.5).ok());
  EXPECT_EQ(scheduler.Stats().sessions[0].weight, 2.5);
}

// --- Sessions and refusals ---------------------------------------------------

TEST_F(IslandSchedulerTest, RemoveSessionDropsItsQueuedLaunches) {
  IslandScheduler scheduler(Window(1));
  for (int i = 0; i < 3; ++i) Submit(scheduler, 1, {0}, i);
  Submit(scheduler, 2, {0}, 10);
  EXPECT_EQ(scheduler.RemoveSession(SessionId(1)), 2);
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(dropped_.size(), 2u);
    EXPECT_EQ(dropped_[0].first, 1);
    EXPECT_EQ(dropped_[0].second.code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(dropped_[0].second.message(),
                HasSubstr("session 1 was removed"));
  }
  // Its launch in flight still completes; then session 2 goes.
  CompleteOldest(scheduler, 1);
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 10));
  EXPECT_EQ(scheduler.Stats().sessions.size(), 1u);
  EXPECT_EQ(scheduler.RemoveSession(SessionId(7)), 0);
}

TEST_F(IslandSchedulerTest, RejectsMalformedLaunches) {
  IslandScheduler scheduler(Window(4));
  Launch no_release = MakeLaunch(1, {0}, 0);
  no_release.release = nullptr;
  EXPECT_THAT(scheduler.Submit(std::move(no_release)).message(),
              HasSubstr("no release callback"));
  EXPECT_THAT(scheduler.Submit(MakeLaunch(1, {}, 0)).message(),
              HasSubstr("no devices"));
  EXPECT_THAT(scheduler.Submit(MakeLaunch(1, {2, 0, 2}, 0)).message(),
              HasSubstr("device 2 twice"));
  EXPECT_EQ(scheduler.Submit(MakeLaunch(1, {0}, 0, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler
                .Submit(MakeLaunch(1, {0}, 0,
                                   std::numeric_limits<double>::infinity()))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scheduler.Submit(MakeLaunch(-1, {0}, 0)).message(),
              HasSubstr("no session"));
  EXPECT_TRUE(ReleasedTags().empty());
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(dropped_.empty());
}

TEST_F(IslandSchedulerTest, RefusesLaunchesBeyondTheSessionQueueLimit) {
  IslandScheduler::Options options = Window(1);
  options.max_queued_per_session = 2;
  IslandScheduler scheduler(options);
  Submit(scheduler, 1, {0}, 0);  // Released at once.
  Submit(scheduler, 1, {0}, 1);
  Submit(scheduler, 1, {0}, 2);
  absl::Status full = scheduler.Submit(MakeLaunch(1, {0}, 3));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("2 launches waiting"));
  Submit(scheduler, 2, {0}, 4);  // Other sessions are not affected.
}

TEST_F(IslandSchedulerTest, DestructionDropsQueuedLaunches) {
  {
    IslandScheduler scheduler(Window(1));
    Submit(scheduler, 1, {0}, 0);
    Submit(scheduler, 1, {0}, 1);
    Submit(scheduler, 2, {0}, 2);
  }
  EXPECT_THAT(ReleasedTags(), ElementsAre(0));
  absl::MutexLock lock(&mu_);
  ASSERT_EQ(dropped_.size(), 2u);
  EXPECT_EQ(dropped_[0].second.code(), absl::StatusCode::kCancelled);
}

// --- Per-device window -------------------------------------------------------

TEST_F(IslandSchedulerTest, PerDeviceWindowLetsDisjointLaunchesThrough) {
  IslandScheduler scheduler(Window(8, /*per_device=*/1));
  Submit(scheduler, 1, {0}, 0);
  Submit(scheduler, 1, {0}, 1);
  Submit(scheduler, 2, {1}, 2);
  Submit(scheduler, 2, {1}, 3);
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 2));
  ASSERT_TRUE(scheduler.OnLaunchComplete(0).ok());
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 2, 1));
}

TEST_F(IslandSchedulerTest, LaunchWaitingForADeviceKeepsItsOtherDevices) {
  IslandScheduler scheduler(Window(8, /*per_device=*/1));
  Submit(scheduler, 1, {0}, 0);     // In flight on device 0.
  Submit(scheduler, 2, {0, 1}, 1);  // Waits for device 0.
  Submit(scheduler, 3, {1}, 2);     // Later in fair order: must not take 1.
  EXPECT_THAT(ReleasedTags(), ElementsAre(0));
  ASSERT_TRUE(scheduler.OnLaunchComplete(0).ok());
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 1));
  ASSERT_TRUE(scheduler.OnLaunchComplete(1).ok());
  EXPECT_THAT(ReleasedTags(), ElementsAre(0, 1, 2));
}

// --- Threads -----------------------------------------------------------------

TEST_F(IslandSchedulerTest, ReleaseCallbacksMayCallBackIntoTheScheduler) {
  IslandScheduler scheduler(Window(1));
  std::vector<uint64_t> order;
  Launch first;
  first.session = SessionId(1);
  first.devices = Ids({0});
  first.release = [&](uint64_t seq) {
    order.push_back(seq);
    Launch second;
    second.session = SessionId(1);
    second.devices = Ids({0});
    second.release = [&](uint64_t seq) { order.push_back(seq); };
    ASSERT_TRUE(scheduler.Submit(std::move(second)).ok());
    // Not released yet: the window is full and releases never nest.
    EXPECT_EQ(order.size(), 1u);
    ASSERT_TRUE(scheduler.OnLaunchComplete(seq).ok());
  };
  ASSERT_TRUE(scheduler.Submit(std::move(first)).ok());
  EXPECT_THAT(order, ElementsAre(0, 1));
}

// Several threads submit launches of two sessions on overlapping device sets
// while another completes them in random order. Every device must receive
// its launches in increasing sequence order, releases must never overlap,
// and each thread's launches must keep their submission order.
TEST_F(IslandSchedulerTest, GangOrderHoldsWithManySubmittingThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1500;
  constexpr int kDevices = 6;
  IslandScheduler scheduler(Window(16));
  absl::Mutex mu;
  absl::CondVar has_work;
  std::vector<std::vector<uint64_t>> device_log(kDevices);
  std::vector<std::vector<std::pair<uint64_t, int>>> thread_log(kThreads);
  std::vector<uint64_t> to_complete;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kPerThread; ++i) {
        Launch launch;
        launch.session = SessionId(t % 2);
        std::vector<int64_t> devices;
        for (int d = 0; d < kDevices; ++d) {
          if (rng() % 2 == 0) devices.push_back(d);
        }
        if (devices.empty()) devices.push_back(rng() % kDevices);
        launch.devices = Ids(devices);
        launch.release = [&, t, i, devices](uint64_t seq) {
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          // One device at a time, yielding in between, as a dispatcher
          // sending to several workers would: overlapping releases would
          // interleave here.
          for (int64_t d : devices) {
            {
              absl::MutexLock lock(&mu);
              device_log[d].push_back(seq);
            }
            std::this_thread::yield();
          }
          {
            absl::MutexLock lock(&mu);
            thread_log[t].emplace_back(seq, i);
            to_complete.push_back(seq);
            has_work.Signal();
          }
          inside.fetch_sub(1);
        };
        ASSERT_TRUE(scheduler.Submit(std::move(launch)).ok());
      }
    });
  }
  std::thread completer([&] {
    std::mt19937 rng(7);
    for (int done = 0; done < kThreads * kPerThread; ++done) {
      uint64_t seq;
      {
        absl::MutexLock lock(&mu);
        const absl::Time deadline = absl::Now() + absl::Seconds(30);
        while (to_complete.empty()) {
          if (has_work.WaitWithDeadline(&mu, deadline)) break;
        }
        ASSERT_FALSE(to_complete.empty()) << "no launch released in 30 s";
        const size_t k = rng() % to_complete.size();
        seq = to_complete[k];
        to_complete.erase(to_complete.begin() + k);
      }
      ASSERT_TRUE(scheduler.OnLaunchComplete(seq).ok());
    }
  });
  for (std::thread& thread : threads) thread.join();
  completer.join();

  EXPECT_EQ(overlaps.load(), 0);
  absl::MutexLock lock(&mu);
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_TRUE(std::is_sorted(device_log[d].begin(), device_log[d].end()))
        << "device " << d;
  }
  std::vector<bool> seen(kThreads * kPerThread, false);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(thread_log[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) {
      EXPECT_EQ(thread_log[t][i].second, i) << "thread " << t;
      seen[thread_log[t][i].first] = true;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), false), 0);
  EXPECT_EQ(scheduler.Stats().in_flight, 0);
}

// Device threads run each launch as a collective: every device of the
// launch must reach it before any may leave. Devices that received launches
// in different orders would wait for each other forever; the test finds
// that as a cycle in the wait-for graph (a waiting device waits for each
// participant of its launch that has not arrived and waits elsewhere), and
// a lost launch as every device idle with launches unfinished. No clock
// decides anything.
TEST_F(IslandSchedulerTest, CollectivesOnOverlappingDevicesNeverDeadlock) {
  constexpr int kDevices = 4;
  constexpr int kSubmitters = 4;
  constexpr int kPerSubmitter = 400;
  constexpr int kTotal = kSubmitters * kPerSubmitter;
  IslandScheduler scheduler(Window(8));
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(scheduler.SetWeight(SessionId(s), 1 + s).ok());
  }

  struct Collective {
    uint64_t seq = 0;
    std::vector<int64_t> devices;
    std::vector<bool> arrived_from = std::vector<bool>(kDevices, false);
    int arrived = 0;
    int left = 0;
  };
  absl::Mutex mu;
  absl::CondVar changed;
  std::vector<std::deque<std::shared_ptr<Collective>>> queues(kDevices);
  // The launch each device waits in, if any.
  std::vector<std::shared_ptr<Collective>> waiting_in(kDevices);
  int idle = 0;        // Devices waiting for an empty queue.
  int completing = 0;  // Launches being completed outside the lock.
  int completed = 0;
  bool deadlocked = false;
  bool stop = false;

  // Whether the waiting devices wait for each other in a cycle. Called
  // with `mu` held.
  auto wait_cycle = [&]() {
    std::vector<int> state(kDevices, 0);  // 1 on the path, 2 done.
    std::function<bool(int64_t)> visit = [&](int64_t d) {
      state[d] = 1;
      const std::shared_ptr<Collective>& op = waiting_in[d];
      for (int64_t e : op->devices) {
        if (op->arrived_from[e] || waiting_in[e] == nullptr) continue;
        if (state[e] == 1 || (state[e] == 0 && visit(e))) return true;
      }
      state[d] = 2;
      return false;
    };
    for (int64_t d = 0; d < kDevices; ++d) {
      if (waiting_in[d] != nullptr && state[d] == 0 && visit(d)) return true;
    }
    return false;
  };

  auto device_loop = [&](int device) {
    while (true) {
      std::shared_ptr<Collective> op;
      {
        absl::MutexLock lock(&mu);
        while (queues[device].empty() && !stop) {
          ++idle;
          changed.SignalAll();
          changed.Wait(&mu);
          --idle;
        }
        if (queues[device].empty()) return;
        op = queues[device].front();
        queues[device].pop_front();
        ++op->arrived;
        op->arrived_from[device] = true;
        waiting_in[device] = op;
        changed.SignalAll();
        while (op->arrived < static_cast<int>(op->devices.size()) &&
               !deadlocked) {
          if (wait_cycle()) {
            deadlocked = true;
            break;
          }
          changed.Wait(&mu);
        }
        waiting_in[device] = nullptr;
        if (deadlocked) {
          changed.SignalAll();
          return;
        }
        if (++op->left < static_cast<int>(op->devices.size())) continue;
        ++completing;
      }
      // The last device to leave completes the launch (outside our lock:
      // completing may release more launches onto the queues).
      EXPECT_TRUE(scheduler.OnLaunchComplete(op->seq).ok());
      absl::MutexLock lock(&mu);
      --completing;
      ++completed;
      changed.SignalAll();
    }
  };
  std::vector<std::thread> devices;
  for (int d = 0; d < kDevices; ++d) devices.emplace_back(device_loop, d);

  std::vector<std::thread> submitters;
  for (int t = 0; t < kSubmitters; ++t) {
    submitters.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kPerSubmitter; ++i) {
        std::vector<int64_t> ids;
        for (int d = 0; d < kDevices; ++d) {
          if (rng() % 3 != 0) ids.push_back(d);
        }
        if (ids.size() < 2) ids = {0, kDevices - 1};
        Launch launch;
        launch.session = SessionId(t % 2);
        launch.devices = Ids(ids);
        launch.release = [&, ids](uint64_t seq) {
          auto op = std::make_shared<Collective>();
          op->seq = seq;
          op->devices = ids;
          for (int64_t d : ids) {
            {
              absl::MutexLock lock(&mu);
              queues[d].push_back(op);
              changed.SignalAll();
            }
            std::this_thread::yield();
          }
        };
        EXPECT_TRUE(scheduler.Submit(std::move(launch)).ok());
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  {
    // Every launch is submitted: from here only completions release more.
    // Nothing can happen any more once every device is idle and nothing is
    // being completed.
    absl::MutexLock lock(&mu);
    auto settled = [&]() {
      const bool queued =
          std::any_of(queues.begin(), queues.end(),
                      [](const auto& queue) { return !queue.empty(); });
      return completed == kTotal || deadlocked ||
             (idle == kDevices && completing == 0 && !queued);
    };
    while (!settled()) changed.Wait(&mu);
    EXPECT_FALSE(deadlocked) << "devices wait for each other in a cycle";
    EXPECT_EQ(completed, kTotal) << "every device is idle with launches "
                                    "unfinished: the scheduler lost some";
    stop = true;
    changed.SignalAll();
  }
  for (std::thread& d : devices) d.join();
  EXPECT_EQ(scheduler.Stats().next_seq, static_cast<uint64_t>(kTotal));
}

TEST_F(IslandSchedulerTest, DebugStringShowsWindowAndSessions) {
  IslandScheduler scheduler(Window(1));
  ASSERT_TRUE(scheduler.SetWeight(SessionId(3), 2).ok());
  Submit(scheduler, 3, {0}, 0);
  Submit(scheduler, 3, {0}, 1);
  EXPECT_EQ(scheduler.DebugString(),
            "island 0 scheduler: 1 released, 1/1 in flight, 1 queued\n"
            "  session 3 weight 2: 1 queued, 1 in flight, 1 released (cost 1)");
}

}  // namespace island_scheduler_test
}  // namespace causeway::head
