#include "causeway/head/launch_plan.h"

#include <memory>
#include <string>
#include <vector>

#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace launch_plan_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using transport::ArraySpec;
using transport::Topology;

// y = x * 2 on f32[2] shards of an f32[4] tiled over two devices.
constexpr char kDouble[] = R"(
HloModule double, num_partitions=2
ENTRY main {
  x = f32[2] parameter(0), sharding={devices=[2]<=[2]}
  c = f32[] constant(2)
  cb = f32[2] broadcast(c), dimensions={}
  ROOT y = f32[2] multiply(x, cb), sharding={devices=[2]<=[2]}
}
)";

const SessionId kSession(1);
const SliceHandle kSlice(1);

hlo::Sharding Sharding(const char* text) { return *hlo::ParseSharding(text); }

// Two hosts of two devices; the program runs on devices 1 and 2 (one on
// each host).
class LaunchPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = *BindProgram(*cache_.GetOrCompile(kDouble), 2);
    context_ = PlanContext{
        kSession,   "alice",  IslandId(0),       {DeviceId(1), DeviceId(2)},
        &topology_, &arrays_, &next_transfer_id_};
  }

  // An f32[dims] array of the session on `devices` with `sharding`.
  ArrayHandle Array(uint64_t handle, std::vector<DeviceId> devices,
                    const char* sharding, std::vector<int64_t> dims = {4}) {
    auto record = std::make_shared<ArrayRecord>();
    record->session = kSession;
    record->handle = ArrayHandle(handle);
    record->internal = arrays_.NewInternalHandle();
    record->placement =
        ArrayPlacement{hlo::Shape(hlo::PrimitiveType::kF32, std::move(dims)),
                       Sharding(sharding), std::move(devices)};
    record->producer = std::make_shared<const std::string>("uploaded");
    record->buffers =
        NewArrayBuffers(record->internal, record->placement, topology_);
    arrays_.Add(record);
    return record->handle;
  }

  ArraySpec Output(uint64_t handle,
                   const char* sharding = "{devices=[2]<=[2]}") {
    return ArraySpec{ArrayHandle(handle),
                     hlo::Shape(hlo::PrimitiveType::kF32, {4}),
                     Sharding(sharding), kSlice};
  }

  absl::StatusOr<LaunchPlan> Plan(std::vector<ArrayHandle> arguments,
                                  std::vector<ArraySpec> outputs) {
    transport::ExecuteOp op;
    op.arguments = std::move(arguments);
    op.outputs = std::move(outputs);
    return PlanExecute(context_, program_, kSlice, op);
  }

  Topology topology_ = *Topology::Uniform(1, 2, 2, 1 << 20);
  CompileCache cache_;
  ArrayTable arrays_;
  uint64_t next_transfer_id_ = 1;
  BoundProgram program_;
  PlanContext context_;
};

TEST_F(LaunchPlanTest, AnArgumentAlreadyInPlaceIsReadDirectly) {
  ArrayHandle x = Array(7, {DeviceId(1), DeviceId(2)}, "{devices=[2]<=[2]}");
  absl::StatusOr<LaunchPlan> plan = Plan({x}, {Output(8)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PreparedLaunch& launch = *plan->launch;
  ASSERT_EQ(launch.ops.size(), 2u);
  EXPECT_TRUE(launch.source_sends.empty());
  EXPECT_TRUE(launch.ops[0].second.staging.empty());
  EXPECT_FALSE(launch.ops[0].second.inputs[0].release_after_use);
  EXPECT_EQ(launch.ops[1].second.inputs[0].buffer.shard, 1);
  EXPECT_EQ(transport::DescribeInputSource(launch.ops[1].second, 0),
            "array 7 (uploaded) on this device");
}

TEST_F(LaunchPlanTest, EveryDeviceGetsOneOpWritingTheNewOutputs) {
  ArrayHandle x = Array(7, {DeviceId(1), DeviceId(2)}, "{devices=[2]<=[2]}");
  absl::StatusOr<LaunchPlan> plan = Plan({x}, {Output(8)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PreparedLaunch& launch = *plan->launch;
  EXPECT_EQ(launch.ops[0].first, HostId(0));
  EXPECT_EQ(launch.ops[1].first, HostId(1));
  EXPECT_THAT(launch.ops[1].second.participant_hosts,
              ElementsAre(HostId(0), HostId(1)));
  EXPECT_EQ(launch.ops[1].second.partition, 1);
  ASSERT_EQ(plan->outputs.size(), 1u);
  EXPECT_EQ(plan->outputs[0]->handle, ArrayHandle(8));
  EXPECT_EQ(launch.ops[1].second.outputs[0].buffer,
            (BufferId{plan->outputs[0]->internal, 1}));
  EXPECT_EQ(plan->outputs[0]->buffers->buffers[1].first, HostId(1));
}

TEST_F(LaunchPlanTest, AnArgumentElsewhereIsStagedThroughATransfer) {
  ArrayHandle x = Array(7, {DeviceId(0)}, "{replicated}");
  absl::StatusOr<LaunchPlan> plan = Plan({x}, {Output(8)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const transport::LaunchOp& op = plan->launch->ops[1].second;
  ASSERT_EQ(op.staging.size(), 1u);
  EXPECT_TRUE(op.inputs[0].release_after_use);
  EXPECT_EQ(transport::DescribeInputSource(op, 0),
            "transfer of array 7 (uploaded) from device 0 (host 0)");
  ASSERT_EQ(plan->launch->source_sends.size(), 1u);
  EXPECT_EQ(plan->launch->source_sends[0].second.size(), 2u);
  EXPECT_EQ(next_transfer_id_, 3u);
}

TEST_F(LaunchPlanTest, AnUnknownArgumentIsNotFoundNamingIt) {
  absl::StatusOr<LaunchPlan> plan = Plan({ArrayHandle(99)}, {Output(8)});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("argument 0 of program 'double': unknown array "
                        "handle 99"));
  EXPECT_EQ(arrays_.size(), 0);
}

TEST_F(LaunchPlanTest, CountsAndShapesThatDoNotFitAreInvalidArgument) {
  ArrayHandle x = Array(7, {DeviceId(1), DeviceId(2)}, "{devices=[2]<=[2]}");
  EXPECT_THAT(Plan({}, {Output(8)}).status().message(),
              HasSubstr("takes 1 argument(s); Execute passed 0"));
  EXPECT_THAT(Plan({x}, {}).status().message(),
              HasSubstr("has 1 output(s); Execute named 0"));
  EXPECT_THAT(Plan({x}, {Output(8, "{replicated}")}).status().message(),
              HasSubstr("output 0 of program 'double' is f32[2] per device"));
}

TEST_F(LaunchPlanTest, WhatCanNeverFitInMemoryIsResourceExhausted) {
  topology_ = *Topology::Uniform(1, 2, 2, 12);
  ArrayHandle x = Array(7, {DeviceId(1), DeviceId(2)}, "{devices=[2]<=[2]}");
  absl::StatusOr<LaunchPlan> plan = Plan({x}, {Output(8)});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("needs 16 bytes per device for its inputs and "
                        "outputs, but device 1 has a memory budget of 12"));
}

TEST_F(LaunchPlanTest, ACopyPlansATransferIntoANewArray) {
  ArrayHandle x = Array(7, {DeviceId(0)}, "{replicated}");
  transport::CopyOp op{x, Output(9), {}};
  absl::StatusOr<CopyPlan> plan = PlanCopy(context_, op);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->transfers.size(), 1u);
  EXPECT_EQ(plan->transfers[0].first.receives.size(), 2u);
  EXPECT_EQ(plan->destination->handle, ArrayHandle(9));
  EXPECT_THAT(*plan->destination->producer, HasSubstr("copy of array 7"));
  EXPECT_EQ(plan->destination->placement.devices,
            (std::vector<DeviceId>{DeviceId(1), DeviceId(2)}));
}

TEST_F(LaunchPlanTest, AnAssemblyMovesEachPieceWholeToItsShardWorkerToWorker) {
  // Shard 1 of a tiled array (on device 3) and a single-device array (on
  // device 0) become shards 0 and 1 of a new array on devices 1 and 2.
  ArrayHandle tiled = Array(7, {DeviceId(0), DeviceId(3)}, "{devices=[2]<=[2]}");
  ArrayHandle single = Array(8, {DeviceId(0)}, "{replicated}", {2});
  transport::CopyOp op;
  op.destination = Output(9);
  op.pieces = {{tiled, 1}, {single, 0}};
  absl::StatusOr<CopyPlan> plan = PlanCopy(context_, op);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->transfers.size(), 2u);  // One per source array.
  std::vector<transport::SendSpec> sends;
  std::vector<transport::ReceiveSpec> receives;
  for (const auto& [transfer, source] : plan->transfers) {
    for (const auto& [host, send] : transfer.sends) {
      EXPECT_EQ(host, topology_.HostOf(send.device));
      sends.push_back(send);
    }
    for (const auto& [host, receive] : transfer.receives) receives.push_back(receive);
  }
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(receives.size(), 2u);
  const ArrayHandle internal = plan->destination->internal;
  for (const transport::SendSpec& send : sends) {
    EXPECT_TRUE(send.whole);
    if (send.destination.shard == 0) {
      EXPECT_EQ(send.device, DeviceId(3));
      EXPECT_EQ(send.source.shard, 1);
      EXPECT_EQ(send.destination_device, DeviceId(1));
    } else {
      EXPECT_EQ(send.device, DeviceId(0));
      EXPECT_EQ(send.source.shard, 0);
      EXPECT_EQ(send.destination_device, DeviceId(2));
    }
    EXPECT_EQ(send.destination.array, internal);
  }
  for (const transport::ReceiveSpec& receive : receives) {
    EXPECT_EQ(receive.shape, hlo::Shape(hlo::PrimitiveType::kF32, {2}));
    EXPECT_EQ(receive.device,
              receive.buffer.shard == 0 ? DeviceId(1) : DeviceId(2));
  }
  EXPECT_THAT(*plan->destination->producer, HasSubstr("assembled from 2 arrays"));
}

TEST_F(LaunchPlanTest, AnAssemblyOfPiecesThatDoNotFitTheShardsIsRefused) {
  ArrayHandle whole = Array(7, {DeviceId(0)}, "{replicated}");
  transport::CopyOp op;
  op.destination = Output(9);
  op.pieces = {{whole, 0}, {whole, 0}};
  EXPECT_THAT(PlanCopy(context_, op).status().message(),
              HasSubstr("piece 0 holds f32[4]; shard 0 of the assembled array is f32[2]"));
  op.pieces = {{whole, 0}};
  EXPECT_THAT(PlanCopy(context_, op).status().message(),
              HasSubstr("an assembly of 1 piece(s) into an array of 2 shards"));
  op.pieces = {{whole, 0}, {whole, 1}};
  EXPECT_THAT(PlanCopy(context_, op).status().message(),
              HasSubstr("Assemble: piece 1: array 7 has no shard 1 (it has 1)"));
  op.pieces = {{whole, 0}, {ArrayHandle(99), 0}};
  EXPECT_EQ(PlanCopy(context_, op).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace launch_plan_test
}  // namespace causeway::head
