// OpDoneBatcher: a launch's reports from this host's devices leave in one
// OnOpsDone once the last has ended; errors and unexpected launches go on
// at once.
#include "causeway/worker/op_done_batcher.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {
namespace {

using transport::OpDone;

// What reached the transport: one entry per call, the devices it named.
class Recorder final : public transport::WorkerListener {
 public:
  void OnOpDone(const OpDone& done) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({done.device.value()});
  }
  void OnOpsDone(const std::vector<OpDone>& done) override {
    absl::MutexLock lock(&mu_);
    calls_.emplace_back();
    for (const OpDone& one : done) calls_.back().push_back(one.device.value());
  }
  void OnPushFailed(const transport::UndeliveredPiece&) override {}
  void OnWorkerDisconnected(HostId, absl::Status) override {}
  void OnTraceEvents(HostId, std::vector<trace::EventRecord>,
                     absl::Duration) override {}

  std::vector<std::vector<int64_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<int64_t>> calls_;
};

OpDone Done(int64_t device, uint64_t seq, absl::Status status = absl::OkStatus()) {
  return OpDone{.host = HostId(0),
                .device = DeviceId(device),
                .island = IslandId(0),
                .seq = seq,
                .status = std::move(status)};
}

TEST(OpDoneBatcherTest, ALaunchsReportsLeaveTogetherWhenTheLastEnds) {
  Recorder next;
  OpDoneBatcher batcher(&next);
  batcher.Expect(IslandId(0), 7, 4);
  for (int64_t device : {2, 0, 3}) batcher.OnOpDone(Done(device, 7));
  EXPECT_TRUE(next.calls().empty());
  batcher.OnOpDone(Done(1, 7));
  EXPECT_THAT(next.calls(), ::testing::ElementsAre(
                                ::testing::ElementsAre(2, 0, 3, 1)));
  EXPECT_EQ(batcher.pending(), 0u);
}

TEST(OpDoneBatcherTest, AnErrorGoesOnAtOnceWithWhatWasHeldAndTheRestFollow) {
  Recorder next;
  OpDoneBatcher batcher(&next);
  batcher.Expect(IslandId(0), 8, 3);
  batcher.OnOpDone(Done(0, 8));
  batcher.OnOpDone(Done(1, 8, absl::DataLossError("host 2 lost")));
  EXPECT_THAT(next.calls(), ::testing::ElementsAre(
                                ::testing::ElementsAre(0, 1)));
  batcher.OnOpDone(Done(2, 8, absl::CancelledError("after its peer")));
  EXPECT_THAT(next.calls(), ::testing::ElementsAre(
                                ::testing::ElementsAre(0, 1),
                                ::testing::ElementsAre(2)));
  EXPECT_EQ(batcher.pending(), 0u);
}

TEST(OpDoneBatcherTest, LaunchesNotExpectedAndSingleOpsGoOnAtOnce) {
  Recorder next;
  OpDoneBatcher batcher(&next);
  batcher.OnOpDone(Done(0, 1));  // Never expected.
  batcher.Expect(IslandId(0), 2, 1);
  batcher.OnOpDone(Done(1, 2));
  // Launches are kept apart: 3 is held while 4 goes.
  batcher.Expect(IslandId(0), 3, 2);
  batcher.Expect(IslandId(0), 4, 1);
  batcher.OnOpDone(Done(0, 3));
  batcher.OnOpDone(Done(2, 4));
  EXPECT_THAT(next.calls(), ::testing::ElementsAre(::testing::ElementsAre(0),
                                                   ::testing::ElementsAre(1),
                                                   ::testing::ElementsAre(2)));
  EXPECT_EQ(batcher.pending(), 1u);
  batcher.OnOpDone(Done(1, 3));
  EXPECT_EQ(next.calls().back(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(batcher.pending(), 0u);
}

// Devices report on their own threads: every report arrives exactly once.
TEST(OpDoneBatcherTest, ReportsFromManyThreadsArriveOnceEach) {
  Recorder next;
  OpDoneBatcher batcher(&next);
  constexpr int kDevices = 8;
  constexpr uint64_t kLaunches = 200;
  for (uint64_t seq = 0; seq < kLaunches; ++seq) {
    batcher.Expect(IslandId(0), seq, kDevices);
  }
  std::vector<std::thread> devices;
  for (int d = 0; d < kDevices; ++d) {
    devices.emplace_back([&, d] {
      for (uint64_t seq = 0; seq < kLaunches; ++seq) batcher.OnOpDone(Done(d, seq));
    });
  }
  for (std::thread& device : devices) device.join();
  size_t reports = 0;
  for (const auto& call : next.calls()) {
    EXPECT_EQ(call.size(), static_cast<size_t>(kDevices));
    reports += call.size();
  }
  EXPECT_EQ(reports, kLaunches * kDevices);
  EXPECT_EQ(batcher.pending(), 0u);
}

}  // namespace
}  // namespace causeway::worker
