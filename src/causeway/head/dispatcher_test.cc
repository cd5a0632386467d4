#include "causeway/head/dispatcher.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace dispatcher_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using transport::FakeControlChannel;
using transport::HostSpec;
using transport::LaunchOp;

// Two alive hosts of two devices each on island 0 (devices 0, 1 on host 0;
// 2, 3 on host 1), each behind a fake channel.
class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(64); }

  void Build(int64_t max_inflight) {
    dispatcher_.reset();
    dispatcher_ = std::make_unique<Dispatcher>(
        Dispatcher::Options{.max_inflight_launches_per_island = max_inflight,
                            .events = &trace::NullEventSink(),
                            .epoch_retired =
                                [this](IslandId island, uint64_t epoch) {
                                  retired_.push_back(epoch);
                                }},
        &membership_, &outbox_);
    if (!hosts_.empty()) return;
    for (int h = 0; h < 2; ++h) {
      absl::StatusOr<HostAssignment> host = membership_.Register(
          {IslandId(0), HostSpec{2}, absl::StrCat("w", h), ""});
      ASSERT_TRUE(host.ok()) << host.status();
      auto channel = std::make_shared<FakeControlChannel>();
      ASSERT_TRUE(membership_.Activate(host->host, channel).ok());
      hosts_.push_back(channel);
    }
  }

  // A launch of `session` on `devices`, reading `used`, filling `outputs`.
  std::shared_ptr<PreparedLaunch> Launch(
      std::vector<int64_t> devices, int64_t session = 1,
      std::vector<std::shared_ptr<ArrayBuffers>> used = {},
      std::vector<std::shared_ptr<ArrayBuffers>> outputs = {}) {
    auto launch = std::make_shared<PreparedLaunch>();
    launch->island = IslandId(0);
    launch->session = SessionId(session);
    launch->program = "p";
    const auto topology = membership_.topology();
    for (int64_t d : devices) {
      const DeviceId device(d);
      launch->devices.push_back(device);
      const HostId host = topology->HostOf(device);
      launch->hosts.insert(host);
      LaunchOp op;
      op.device = device;
      op.island = IslandId(0);
      op.session = SessionId(session);
      launch->ops.emplace_back(host, std::move(op));
    }
    launch->used = std::move(used);
    launch->outputs = std::move(outputs);
    return launch;
  }

  // Buffers of a new array with one shard on each of `devices`.
  std::shared_ptr<ArrayBuffers> Array(std::vector<int64_t> devices) {
    ArrayPlacement placement;
    for (int64_t d : devices) placement.devices.push_back(DeviceId(d));
    return NewArrayBuffers(ArrayHandle(next_array_++), placement,
                           *membership_.topology());
  }

  // The sequence numbers of the launches host `h` was sent, in order.
  std::vector<uint64_t> SeqsSentTo(int h) {
    std::vector<uint64_t> seqs;
    for (const auto& batch : hosts_[h]->batches()) {
      for (const LaunchOp& op : batch.launches) seqs.push_back(op.seq);
    }
    return seqs;
  }

  void Done(uint64_t seq, std::vector<int64_t> devices,
            absl::Status status = absl::OkStatus()) {
    for (int64_t d : devices) {
      const DeviceId device(d);
      dispatcher_->OnOpDone(
          transport::OpDone{membership_.topology()->HostOf(device), device,
                            IslandId(0), seq, status});
    }
    outbox_.Drain();
  }
  uint64_t Epoch() { return membership_.topology()->epoch(IslandId(0)); }

  Outbox outbox_;
  Membership membership_;
  std::vector<std::shared_ptr<FakeControlChannel>> hosts_;
  std::unique_ptr<Dispatcher> dispatcher_;
  uint64_t next_array_ = 1;
  std::vector<uint64_t> retired_;  // Drained on the test's thread.
};

TEST_F(DispatcherTest, NothingLeavesUntilTheOutboxIsDrained) {
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
  EXPECT_TRUE(hosts_[0]->calls().empty());
  outbox_.Drain();
  EXPECT_THAT(hosts_[0]->calls(), ElementsAre("Dispatch"));
  EXPECT_THAT(hosts_[1]->calls(), ElementsAre("Dispatch"));
  EXPECT_EQ(hosts_[1]->batches()[0].launches[0].device, DeviceId(2));
}

TEST_F(DispatcherTest, EveryLaunchCarriesItsIslandsMembershipEpoch) {
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
  outbox_.Drain();
  EXPECT_EQ(hosts_[0]->batches()[0].launches[0].epoch,
            membership_.topology()->epoch(IslandId(0)));
}

TEST_F(DispatcherTest, LaunchesReleasedInOneBatchShareOneMessagePerWorker) {
  {
    Dispatcher::Batch batch(*dispatcher_);
    ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
    ASSERT_TRUE(dispatcher_->Schedule(Launch({1, 3}, 2)).ok());
  }
  outbox_.Drain();
  ASSERT_EQ(hosts_[0]->batches().size(), 1u);
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(0, 1));
  EXPECT_THAT(SeqsSentTo(1), ElementsAre(0, 1));
}

TEST_F(DispatcherTest, EveryWorkerGetsTheLaunchesItSharesInGangOrder) {
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2}, 1)).ok());
  ASSERT_TRUE(dispatcher_->Schedule(Launch({2}, 2)).ok());
  ASSERT_TRUE(dispatcher_->Schedule(Launch({1, 3}, 3)).ok());
  outbox_.Drain();
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(0, 2));
  EXPECT_THAT(SeqsSentTo(1), ElementsAre(0, 1, 2));
}

TEST_F(DispatcherTest, TheWindowHoldsLaunchesUntilEveryDeviceIsDone) {
  Build(1);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
  outbox_.Drain();
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(0));
  Done(0, {0});
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(0));  // Device 2 still runs it.
  Done(0, {2});
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(0, 1));
  EXPECT_EQ(dispatcher_->InFlight(), 1);
}

TEST_F(DispatcherTest, ALaunchNeedingADeadHostGoesAbandonedToItsSurvivors) {
  membership_.MarkDead(HostId(1), "killed");
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
  outbox_.Drain();
  ASSERT_EQ(hosts_[0]->batches().size(), 1u);
  const absl::Status abandoned = hosts_[0]->batches()[0].launches[0].abandoned;
  EXPECT_EQ(abandoned.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(abandoned.message(), HasSubstr("needs host 1, which was lost"));
  EXPECT_TRUE(hosts_[1]->calls().empty());
}

TEST_F(DispatcherTest, SurvivorsHearOfALostHostAfterTheOpenBatch) {
  Build(1);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({2})).ok());
  {
    Dispatcher::Batch batch(*dispatcher_);
    ASSERT_TRUE(dispatcher_->Schedule(Launch({1, 3})).ok());  // Waits.
    membership_.MarkDead(HostId(1), "killed");
    dispatcher_->HostLost(HostId(1), absl::DataLossError("gone"));
  }
  outbox_.Drain();
  // Losing host 1 finished launch 0, which released launch 1 (abandoned:
  // it needs host 1) into the open batch: it leaves before the news.
  EXPECT_THAT(hosts_[0]->calls(), ElementsAre("Dispatch", "PeerLost 1"));
  EXPECT_THAT(SeqsSentTo(0), ElementsAre(1));
  EXPECT_FALSE(hosts_[0]->batches()[0].launches[0].abandoned.ok());
  EXPECT_TRUE(hosts_[1]->calls().empty());  // Dead before anything left.
}

TEST_F(DispatcherTest, ACallGoesAheadOfTheOpenBatchThatMayNeedIt) {
  {
    Dispatcher::Batch batch(*dispatcher_);
    ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
    dispatcher_->Call(HostId(0), [](transport::ControlChannel* worker) {
      transport::LoadProgramRequest request;
      request.program = transport::ProgramId(7);
      worker->LoadProgram(std::move(request));
    });
    dispatcher_->AfterSent(
        [this] { hosts_[0]->UnloadProgram(transport::ProgramId(7)); });
  }
  outbox_.Drain();
  EXPECT_THAT(hosts_[0]->calls(),
              ElementsAre("LoadProgram 7", "Dispatch", "UnloadProgram 7"));
}

TEST_F(DispatcherTest, ADeletedArrayGoesBackAfterTheLaunchesThatReadIt) {
  Build(1);
  std::shared_ptr<ArrayBuffers> x = Array({0});
  dispatcher_->MarkPlaced(*x);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0}, 1, {x})).ok());  // Waits.
  dispatcher_->Delete(x);
  outbox_.Drain();
  EXPECT_TRUE(hosts_[0]->batches()[0].releases.empty());
  Done(0, {0});
  const transport::WorkerBatch second = hosts_[0]->batches().back();
  ASSERT_EQ(second.launches.size(), 1u);
  ASSERT_EQ(second.releases.size(), 1u);
  EXPECT_EQ(second.releases[0].buffer, x->buffers[0].second.buffer);
}

TEST_F(DispatcherTest, WaitersHearOfAnOutputOnceTheMessageCreatingItLeft) {
  Build(1);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
  std::shared_ptr<ArrayBuffers> y = Array({0});
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0}, 1, {}, {y})).ok());
  std::vector<std::string> order;
  dispatcher_->WhenPlaced(y, [&](absl::Status placed) {
    order.push_back(absl::StrCat("placed ", placed.ToString(), " after ",
                                 hosts_[0]->batches().size()));
  });
  outbox_.Drain();
  EXPECT_TRUE(order.empty());
  Done(0, {0});
  EXPECT_THAT(order, ElementsAre("placed OK after 2"));
}

TEST_F(DispatcherTest, AnEndedSessionsQueuedLaunchesFailTheirWaiters) {
  Build(1);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0}, 1)).ok());
  std::shared_ptr<ArrayBuffers> y = Array({0});
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0}, 2, {}, {y})).ok());
  absl::Status heard;
  dispatcher_->WhenPlaced(y, [&](absl::Status placed) { heard = placed; });
  dispatcher_->EndSession(SessionId(2), absl::CancelledError("closed"));
  outbox_.Drain();
  EXPECT_EQ(heard.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(heard.message(), HasSubstr("was never run"));
  EXPECT_THAT(hosts_[0]->calls(), ElementsAre("Dispatch", "CancelSession 2"));
}

TEST_F(DispatcherTest, AFailedLaunchAcrossHostsMovesItsIslandToANewEpoch) {
  const uint64_t before = Epoch();
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
  outbox_.Drain();
  Done(0, {0}, absl::InternalError("boom"));
  EXPECT_EQ(Epoch(), before + 1);
  Done(0, {2}, absl::CancelledError("its peer failed"));
  EXPECT_EQ(Epoch(), before + 1);  // Once per failed launch.
  ASSERT_TRUE(dispatcher_->Schedule(Launch({1, 3})).ok());
  outbox_.Drain();
  EXPECT_EQ(hosts_[1]->batches().back().launches[0].epoch, before + 1);
  ASSERT_FALSE(hosts_[1]->memberships().empty());
  EXPECT_EQ(hosts_[1]->memberships().back().island_epochs[0], before + 1);
}

// Cancelling a running launch across hosts closes its communicators: the
// island's next launch, released before the cancelled one's ops report
// back, must already use a new epoch.
TEST_F(DispatcherTest, EndingASessionWithALaunchAcrossHostsRunningMovesItsIslandToANewEpoch) {
  const uint64_t before = Epoch();
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2}, /*session=*/1)).ok());
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 1}, /*session=*/3)).ok());
  outbox_.Drain();
  dispatcher_->EndSession(SessionId(3), absl::CancelledError("closed"));
  EXPECT_EQ(Epoch(), before);  // Its launch ran on one host only.
  dispatcher_->EndSession(SessionId(1), absl::CancelledError("closed"));
  EXPECT_EQ(Epoch(), before + 1);
  ASSERT_TRUE(dispatcher_->Schedule(Launch({1, 3}, /*session=*/2)).ok());
  outbox_.Drain();
  EXPECT_EQ(hosts_[1]->batches().back().launches[0].epoch, before + 1);
  Done(0, {0}, absl::CancelledError("session closed"));
  Done(0, {2}, absl::CancelledError("session closed"));
  EXPECT_EQ(Epoch(), before + 1);  // Once per cancelled launch.
}

TEST_F(DispatcherTest, AFailedLaunchOnOneHostKeepsTheEpoch) {
  const uint64_t before = Epoch();
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 1})).ok());
  outbox_.Drain();
  Done(0, {0, 1}, absl::InternalError("boom"));
  EXPECT_EQ(Epoch(), before);
}

TEST_F(DispatcherTest, AnEpochIsRetiredOnceNoLaunchOfItIsInFlight) {
  const uint64_t old = Epoch();
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0, 2})).ok());
  outbox_.Drain();
  membership_.BumpEpoch(IslandId(0));
  dispatcher_->MembershipChanged();
  outbox_.Drain();
  EXPECT_TRUE(retired_.empty());  // Its launch still runs.
  Done(0, {0, 2});
  EXPECT_THAT(retired_, ElementsAre(old));
  membership_.BumpEpoch(IslandId(0));
  dispatcher_->MembershipChanged();
  outbox_.Drain();
  EXPECT_THAT(retired_, ElementsAre(old));  // No launch used the next one.
}

TEST_F(DispatcherTest, AChannelMayCallBackIntoTheDispatcherWhileItSends) {
  // A network channel may block, or answer at once on the same thread: the
  // dispatcher must hold no lock while it calls one.
  std::vector<std::thread> threads;
  bool reentered = false;
  hosts_[0]->set_on_call([&](const std::string& call) {
    if (call != "Dispatch" || reentered) return;
    absl::Notification done;
    threads.emplace_back([&] {
      dispatcher_->OnOpDone(transport::OpDone{
          HostId(0), DeviceId(0), IslandId(0), 0, absl::OkStatus()});
      done.Notify();
    });
    reentered = done.WaitForNotificationWithTimeout(absl::Seconds(10));
  });
  ASSERT_TRUE(dispatcher_->Schedule(Launch({0})).ok());
  outbox_.Drain();
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(reentered);
  EXPECT_EQ(dispatcher_->InFlight(), 0);
}

}  // namespace dispatcher_test
}  // namespace causeway::head
