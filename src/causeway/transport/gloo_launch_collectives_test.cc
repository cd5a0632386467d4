#include "causeway/transport/gloo_launch_collectives.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "causeway/exec/collective_test_util.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace gloo_launch_collectives_test {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

// Two "processes": the first holds devices 0 and 1, the second 2 and 3.
class GlooLaunchCollectivesTest : public ::testing::Test {
 protected:
  GlooLaunchCollectivesTest() {
    for (int p = 0; p < 2; ++p) {
      auto collectives = GlooLaunchCollectives::Create(
          {.store = &store_,
           .local_devices = {DeviceId(2 * p), DeviceId(2 * p + 1)},
           .timeout = absl::Seconds(20)});
      CW_CHECK(collectives.ok()) << collectives.status();
      processes_.push_back(*std::move(collectives));
    }
  }

  GlooLaunchCollectives& ProcessOf(DeviceId device) {
    return *processes_[device.value() / 2];
  }

  static LaunchMember Member(uint64_t seq, std::vector<DeviceId> devices,
                             int64_t partition) {
    return LaunchMember{.island = IslandId(0),
                        .epoch = 1,
                        .seq = seq,
                        .partition = partition,
                        .devices = std::move(devices)};
  }

  // Every partition of launch `seq` on `devices` sums (partition + 1).
  std::vector<absl::StatusOr<Literal>> Sum(uint64_t seq,
                                           std::vector<DeviceId> devices) {
    const int64_t n = static_cast<int64_t>(devices.size());
    std::vector<absl::StatusOr<Literal>> results(n);
    std::vector<std::thread> threads;
    for (int64_t p = 0; p < n; ++p) {
      threads.emplace_back([&, p] {
        const LaunchMember member = Member(seq, devices, p);
        GlooLaunchCollectives& process = ProcessOf(devices[p]);
        exec::Collectives* collectives = process.Join(member);
        results[p] = collectives->AllReduce(
            exec::testutil::OpFor(ar_, p, n, 1, 0, seq),
            {F32({1}, {float(p + 1)})});
        process.Leave(member);
      });
    }
    for (auto& thread : threads) thread.join();
    return results;
  }

  InProcessKeyValueStore store_;
  std::vector<std::unique_ptr<GlooLaunchCollectives>> processes_;
  exec::testutil::CollectiveBuilder builder_;
  Instruction* ar_ = builder_.Collective(Opcode::kAllReduce);
};

TEST_F(GlooLaunchCollectivesTest, ALaunchOfOneProcessMeetsInMemory) {
  const std::vector<DeviceId> devices = {DeviceId(0), DeviceId(1)};
  exec::Collectives* first = processes_[0]->Join(Member(1, devices, 0));
  exec::Collectives* second = processes_[0]->Join(Member(1, devices, 1));
  EXPECT_EQ(first, second);  // One in-process rendezvous.
  processes_[0]->Leave(Member(1, devices, 0));
  processes_[0]->Leave(Member(1, devices, 1));
  EXPECT_EQ(processes_[0]->NumLive(), 0);
  EXPECT_EQ(processes_[0]->communicators().NumContexts(), 0);
}

TEST_F(GlooLaunchCollectivesTest, ALaunchAcrossProcessesRunsThroughGloo) {
  const std::vector<DeviceId> devices = {DeviceId(1), DeviceId(2),
                                         DeviceId(3)};
  for (auto& result : Sum(1, devices)) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(6.0f));
  }
  EXPECT_EQ(processes_[0]->NumLive() + processes_[1]->NumLive(), 0);
  EXPECT_EQ(processes_[0]->communicators().NumContexts(), 1);
  EXPECT_EQ(processes_[1]->communicators().NumContexts(), 2);
}

TEST_F(GlooLaunchCollectivesTest,
       AGroupWithinOneProcessOfASpanningLaunchMeetsInMemory) {
  // [2,2]<=[4]: groups {0,1} (process 0) and {2,3} (process 1), as the
  // model-parallel all-reduces of a 2 x 2 mesh whose rows are hosts.
  ar_->replica_groups.iota = hlo::ReplicaGroups::Iota{
      .num_groups = 2, .group_size = 2, .reshape_dims = {4}, .transpose_perm = {}};
  const std::vector<absl::StatusOr<Literal>> results =
      Sum(1, {DeviceId(0), DeviceId(1), DeviceId(2), DeviceId(3)});
  for (int p = 0; p < 4; ++p) {
    ASSERT_TRUE(results[p].ok()) << results[p].status();
    EXPECT_THAT(Values(*results[p]), ElementsAre(p < 2 ? 3.0f : 7.0f));
  }
  EXPECT_EQ(processes_[0]->communicators().NumContexts(), 0);
  EXPECT_EQ(processes_[1]->communicators().NumContexts(), 0);
  EXPECT_EQ(processes_[0]->NumLive() + processes_[1]->NumLive(), 0);
}

TEST_F(GlooLaunchCollectivesTest,
       APartitionCancelledBeforeItsLocalPeerJoinsFailsItsGroupInMemory) {
  ar_->replica_groups.iota = hlo::ReplicaGroups::Iota{
      .num_groups = 1, .group_size = 2, .reshape_dims = {2}, .transpose_perm = {}};
  const std::vector<DeviceId> devices = {DeviceId(0), DeviceId(1),
                                         DeviceId(2)};
  processes_[0]->Cancel(Member(1, devices, 1),
                        absl::FailedPreconditionError("input 1 failed"));
  const LaunchMember member = Member(1, devices, 0);
  exec::Collectives* collectives = processes_[0]->Join(member);
  auto result = collectives->AllReduce(
      exec::testutil::OpFor(ar_, 0, 3, 1, 0, 1), {F32({1}, {1.0f})});
  processes_[0]->Leave(member);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("input 1 failed"));
  EXPECT_EQ(processes_[0]->NumLive(), 0);
}

TEST_F(GlooLaunchCollectivesTest, ACancelledPartitionFailsItsPeersInTheOtherProcess) {
  const std::vector<DeviceId> devices = {DeviceId(1), DeviceId(2)};
  // Partition 0 will not run (its inputs failed).
  processes_[0]->Cancel(Member(1, devices, 0),
                        absl::FailedPreconditionError("input 0 failed"));
  const LaunchMember member = Member(1, devices, 1);
  exec::Collectives* collectives = processes_[1]->Join(member);
  auto result = collectives->AllReduce(
      exec::testutil::OpFor(ar_, 1, 2, 1, 0, 1), {F32({1}, {1.0f})});
  processes_[1]->Leave(member);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("input 0 failed"));
}

TEST_F(GlooLaunchCollectivesTest, AnAbortBeforeTheJoinCancelsTheLaunch) {
  const std::vector<DeviceId> devices = {DeviceId(1), DeviceId(2)};
  const LaunchMember member = Member(1, devices, 0);
  processes_[0]->Abort(member, absl::DataLossError("host 1 was lost"));
  exec::Collectives* collectives = processes_[0]->Join(member);
  auto result = collectives->AllReduce(
      exec::testutil::OpFor(ar_, 0, 2, 1, 0, 1), {F32({1}, {1.0f})});
  processes_[0]->Leave(member);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("host 1 was lost"));
}

TEST_F(GlooLaunchCollectivesTest, ALaterEpochRetiresTheContextsOfEarlierOnes) {
  const std::vector<DeviceId> devices = {DeviceId(1), DeviceId(2)};
  for (auto& result : Sum(1, devices)) ASSERT_TRUE(result.ok());
  std::vector<absl::StatusOr<Literal>> results(2);
  std::vector<std::thread> threads;
  for (int64_t p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      LaunchMember member = Member(2, devices, p);
      member.epoch = 2;
      GlooLaunchCollectives& process = ProcessOf(devices[p]);
      results[p] = process.Join(member)->AllReduce(
          exec::testutil::OpFor(ar_, p, 2, 1, 0, 2), {F32({1}, {2.0f})});
      process.Leave(member);
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(4.0f));
  }
  EXPECT_EQ(processes_[0]->communicators().NumContexts(), 1);
  EXPECT_EQ(processes_[1]->communicators().NumContexts(), 1);
}

// Released out of order around an epoch bump: the devices already retired
// the older epoch's communicators, so the launch fails at once.
TEST_F(GlooLaunchCollectivesTest, ALaunchOfAnEpochTheDeviceLeftIsAborted) {
  const std::vector<DeviceId> devices = {DeviceId(1), DeviceId(2)};
  LaunchMember newer = Member(1, devices, 0);
  newer.epoch = 3;
  processes_[0]->Join(newer);
  processes_[0]->Leave(newer);
  LaunchMember older = Member(2, devices, 0);
  older.epoch = 2;
  exec::Collectives* collectives = processes_[0]->Join(older);
  auto result = collectives->AllReduce(
      exec::testutil::OpFor(ar_, 0, 2, 1, 0, 2), {F32({1}, {1.0f})});
  processes_[0]->Leave(older);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(result.status().message(), HasSubstr("already runs epoch 3"));
}

}  // namespace gloo_launch_collectives_test
}  // namespace causeway::transport
