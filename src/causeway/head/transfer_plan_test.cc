#include "causeway/head/transfer_plan.h"

#include <set>
#include <vector>

#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {

using transport::ReceiveSpec;
using transport::SendSpec;
using transport::Topology;
namespace transfer_plan_test {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

hlo::Sharding Sharding(const char* text) {
  auto sharding = hlo::ParseSharding(text);
  CW_CHECK(sharding.ok()) << sharding.status();
  return *sharding;
}

hlo::Shape F32(std::vector<int64_t> dims) {
  return hlo::Shape(hlo::PrimitiveType::kF32, std::move(dims));
}

// Two hosts of two devices: devices 0, 1 on host 0 and 2, 3 on host 1.
class PlanTransferTest : public ::testing::Test {
 protected:
  PlanTransferTest() : topology_(*Topology::Uniform(1, 2, 2, 1 << 20)) {}

  TransferPlan Plan(const ArrayPlacement& from, const ArrayPlacement& to) {
    uint64_t next_id = 1;
    auto plan = PlanTransfer(ArrayHandle(1), from, ArrayHandle(2), to,
                             topology_, &next_id);
    CW_CHECK(plan.ok()) << plan.status();
    return *plan;
  }

  Topology topology_;
};

TEST_F(PlanTransferTest, MovingAWholeShardToAnotherHostIsOneZeroCopyPiece) {
  TransferPlan plan = Plan(
      {F32({4}), Sharding("{devices=[2]<=[2]}"), {DeviceId(0), DeviceId(1)}},
      {F32({4}), Sharding("{devices=[2]<=[2]}"), {DeviceId(2), DeviceId(3)}});
  ASSERT_EQ(plan.receives.size(), 2u);
  ASSERT_EQ(plan.sends.size(), 2u);
  EXPECT_EQ(plan.receives[1].first, HostId(1));
  EXPECT_TRUE(plan.receives[1].second.whole);
  const SendSpec& send = plan.sends[1].second;
  EXPECT_TRUE(send.whole);
  EXPECT_EQ(send.device, DeviceId(1));
  EXPECT_EQ(send.destination_device, DeviceId(3));
  EXPECT_EQ(plan.bytes, 16);
}

TEST_F(PlanTransferTest, RowsToColumnsTakesTheOverlapOfEverySourceTile) {
  TransferPlan plan = Plan({F32({4, 2}),
                            Sharding("{devices=[2,1]<=[2]}"),
                            {DeviceId(0), DeviceId(1)}},
                           {F32({4, 2}),
                            Sharding("{devices=[1,2]<=[2]}"),
                            {DeviceId(2), DeviceId(3)}});
  ASSERT_EQ(plan.receives.size(), 2u);
  const ReceiveSpec& column1 = plan.receives[1].second;
  EXPECT_EQ(column1.shape.dims(), (std::vector<int64_t>{4, 1}));
  ASSERT_EQ(column1.pieces.size(), 2u);
  EXPECT_FALSE(column1.whole);
  // Column 1 of rows 2..3 comes from device 1 and lands at row 2.
  std::vector<const SendSpec*> into_column1;
  for (const auto& [host, send] : plan.sends) {
    if (send.destination.shard == 1) into_column1.push_back(&send);
  }
  ASSERT_EQ(into_column1.size(), 2u);
  const SendSpec& lower = *into_column1[1];
  EXPECT_EQ(lower.device, DeviceId(1));
  EXPECT_THAT(lower.region.offsets, ElementsAre(0, 1));
  EXPECT_THAT(lower.region.dims, ElementsAre(2, 1));
  EXPECT_THAT(lower.destination_offsets, ElementsAre(2, 0));
}

TEST_F(PlanTransferTest, EveryPieceNamesTheTransferThatSendsIt) {
  TransferPlan plan = Plan({F32({4, 2}),
                            Sharding("{devices=[2,1]<=[2]}"),
                            {DeviceId(0), DeviceId(1)}},
                           {F32({4, 2}),
                            Sharding("{devices=[1,2]<=[2]}"),
                            {DeviceId(2), DeviceId(3)}});
  std::set<uint64_t> sent;
  for (const auto& [host, send] : plan.sends) {
    EXPECT_NE(send.transfer_id, 0u);
    EXPECT_TRUE(sent.insert(send.transfer_id).second);  // Unique.
  }
  std::set<uint64_t> expected;
  for (const auto& [host, receive] : plan.receives) {
    for (const auto& origin : receive.pieces) {
      EXPECT_TRUE(expected.insert(origin.transfer_id).second);
    }
  }
  EXPECT_EQ(sent, expected);
}

TEST_F(PlanTransferTest, AReplicatedSourceIsReadFromTheClosestReplica) {
  TransferPlan plan = Plan(
      {F32({4}), Sharding("{replicated}"),
       {DeviceId(0), DeviceId(1), DeviceId(2), DeviceId(3)}},
      {F32({4}), Sharding("{devices=[2]<=[2]}"), {DeviceId(3), DeviceId(1)}});
  ASSERT_EQ(plan.sends.size(), 2u);
  // Each destination shard reads the replica on its own device.
  EXPECT_EQ(plan.sends[0].second.device, DeviceId(3));
  EXPECT_EQ(plan.sends[0].first, HostId(1));
  EXPECT_EQ(plan.sends[1].second.device, DeviceId(1));
  EXPECT_THAT(plan.sends[1].second.region.offsets, ElementsAre(2));
}

TEST_F(PlanTransferTest, AnUnevenDestinationShardZeroFillsItsPadding) {
  TransferPlan plan = Plan(
      {F32({3}), Sharding("{replicated}"), {DeviceId(0), DeviceId(1)}},
      {F32({3}), Sharding("{devices=[2]<=[2]}"), {DeviceId(2), DeviceId(3)}});
  const ReceiveSpec& last = plan.receives[1].second;
  EXPECT_EQ(last.shape.dims(), (std::vector<int64_t>{2}));
  ASSERT_EQ(last.pieces.size(), 1u);
  ASSERT_EQ(last.zero_fill.size(), 1u);
  EXPECT_THAT(last.zero_fill[0].offsets, ElementsAre(1));
  EXPECT_THAT(last.zero_fill[0].dims, ElementsAre(1));
  EXPECT_THAT(plan.receives[0].second.zero_fill, IsEmpty());
}

TEST_F(PlanTransferTest, MismatchedGlobalShapesAreRefused) {
  uint64_t next_id = 1;
  auto plan = PlanTransfer(
      ArrayHandle(1), {F32({4}), Sharding("{replicated}"), {DeviceId(0)}},
      ArrayHandle(2), {F32({5}), Sharding("{replicated}"), {DeviceId(1)}},
      topology_, &next_id);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SamePlacementTest, EqualRegionsOnTheSameDevicesAreTheSamePlacement) {
  const std::vector<DeviceId> devices = {DeviceId(0), DeviceId(1)};
  auto same = SamePlacement({F32({4}), Sharding("{devices=[2]<=[2]}"), devices},
                            {F32({4}), Sharding("{devices=[2]0,1}"), devices});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(*same);
  auto swapped =
      SamePlacement({F32({4}), Sharding("{devices=[2]<=[2]}"), devices},
                    {F32({4}), Sharding("{devices=[2]1,0}"), devices});
  ASSERT_TRUE(swapped.ok());
  EXPECT_FALSE(*swapped);
}

}  // namespace transfer_plan_test
}  // namespace causeway::head
