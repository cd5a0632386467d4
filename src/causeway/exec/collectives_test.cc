#include "causeway/exec/collectives.h"

#include <cmath>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

// Builds collective instructions and runs one call per device on its own
// thread.
class CollectivesTest : public ::testing::Test {
 protected:
  CollectivesTest() {
    add_ = MakeReducer("add", Opcode::kAdd, PrimitiveType::kF32);
  }

  hlo::Computation* MakeReducer(std::string name, Opcode opcode,
                                PrimitiveType type) {
    auto computation = std::make_unique<hlo::Computation>(std::move(name));
    Instruction* params[2];
    for (int i = 0; i < 2; ++i) {
      auto p = std::make_unique<Instruction>();
      p->name = "p" + std::to_string(i);
      p->opcode = Opcode::kParameter;
      p->parameter_number = i;
      p->shape = Shape::Scalar(type);
      params[i] = computation->AddInstruction(std::move(p));
    }
    auto root = std::make_unique<Instruction>();
    root->name = "root";
    root->opcode = opcode;
    root->shape = Shape::Scalar(type);
    root->operands = {params[0], params[1]};
    root->is_root = true;
    computation->AddInstruction(std::move(root));
    computations_.push_back(std::move(computation));
    return computations_.back().get();
  }

  Instruction* MakeCollective(Opcode opcode) {
    auto instruction = std::make_unique<Instruction>();
    instruction->name = std::string(hlo::OpcodeName(opcode)) + ".1";
    instruction->opcode = opcode;
    instruction->line = 7;
    instruction->unique_id = static_cast<int64_t>(instructions_.size());
    instruction->channel_id = 1;
    if (opcode == Opcode::kAllReduce || opcode == Opcode::kReduceScatter) {
      instruction->called_computations = {add_};
    }
    if (opcode == Opcode::kAllReduce || opcode == Opcode::kAllGather ||
        opcode == Opcode::kReduceScatter) {
      instruction->use_global_device_ids = true;
    }
    instructions_.push_back(std::move(instruction));
    return instructions_.back().get();
  }

  CollectiveOp OpFor(const Instruction* instruction, int64_t device,
                     int64_t num_partitions, int64_t replica_count = 1,
                     int64_t execution = 0) {
    CollectiveOp op;
    op.instruction = instruction;
    op.partition_id = device % num_partitions;
    op.replica_id = device / num_partitions;
    op.num_partitions = num_partitions;
    op.replica_count = replica_count;
    op.key = {.run_id = 1,
              .instruction_id = instruction->unique_id,
              .execution_count = execution};
    return op;
  }

  // Runs `call(device)` for every device on its own thread.
  std::vector<absl::StatusOr<Literal>> RunOnDevices(
      int64_t devices,
      const std::function<absl::StatusOr<Literal>(int64_t)>& call) {
    std::vector<absl::StatusOr<Literal>> results(devices);
    std::vector<std::thread> threads;
    for (int64_t d = 0; d < devices; ++d) {
      threads.emplace_back([&, d] { results[d] = call(d); });
    }
    for (auto& thread : threads) thread.join();
    return results;
  }

  InProcessCollectives collectives_;
  hlo::Computation* add_;
  std::vector<std::unique_ptr<hlo::Computation>> computations_;
  std::vector<std::unique_ptr<Instruction>> instructions_;
};

TEST_F(CollectivesTest, AllReduceSumsOverEveryPartition) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 4),
                                  {F32({2}, {float(d), 10.0f * float(d)})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(6.0f, 60.0f));
  }
}

TEST_F(CollectivesTest, AllReduceTupleFormReducesEachOperandIndependently) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.AllReduce(
        OpFor(ar, d, 2), {F32({1}, {float(d + 1)}), F32({2}, {1.0f, 2.0f})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->elements().size(), 2u);
    EXPECT_THAT(Values(result->elements()[0]), ElementsAre(3.0f));
    EXPECT_THAT(Values(result->elements()[1]), ElementsAre(2.0f, 4.0f));
  }
}

TEST_F(CollectivesTest, AllReduceWithIotaGroupsReducesWithinEachGroup) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  // [2,2]<=[2,2]T(1,0): groups {0,2} and {1,3}.
  ar->replica_groups.iota = hlo::ReplicaGroups::Iota{.num_groups = 2,
                                                     .group_size = 2,
                                                     .reshape_dims = {2, 2},
                                                     .transpose_perm = {1, 0}};
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 4), {F32({1}, {float(1 << d)})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(5.0f));   // 1 + 4
  EXPECT_THAT(Values(*results[1]), ElementsAre(10.0f));  // 2 + 8
  EXPECT_THAT(Values(*results[2]), ElementsAre(5.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(10.0f));
}

TEST_F(CollectivesTest, ChannelLessAllReduceGroupsReplicasOfOnePartition) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->channel_id.reset();
  ar->use_global_device_ids = false;
  // 2 replicas × 2 partitions: device = replica * 2 + partition.
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 2, 2),
                                  {F32({1}, {float(1 << d)})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(5.0f));   // devices 0, 2
  EXPECT_THAT(Values(*results[1]), ElementsAre(10.0f));  // devices 1, 3
  EXPECT_THAT(Values(*results[2]), ElementsAre(5.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(10.0f));
}

TEST_F(CollectivesTest, ChannelWithoutGlobalIdsSpansPartitionsOfEachReplica) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->use_global_device_ids = false;
  ar->replica_groups.groups = {{0}, {1}};  // Replica ids.
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 2, 2),
                                  {F32({1}, {float(1 << d)})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(3.0f));  // devices 0, 1
  EXPECT_THAT(Values(*results[1]), ElementsAre(3.0f));
  EXPECT_THAT(Values(*results[2]), ElementsAre(12.0f));  // devices 2, 3
  EXPECT_THAT(Values(*results[3]), ElementsAre(12.0f));
}

TEST_F(CollectivesTest, GlobalDeviceIdsAreFlattenedOverReplicasAndPartitions) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->replica_groups.groups = {{0, 3}, {1, 2}};
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 2, 2),
                                  {F32({1}, {float(1 << d)})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(9.0f));
  EXPECT_THAT(Values(*results[1]), ElementsAre(6.0f));
  EXPECT_THAT(Values(*results[2]), ElementsAre(6.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(9.0f));
}

TEST_F(CollectivesTest, MaximumReducerPropagatesNan) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->called_computations = {
      MakeReducer("max", Opcode::kMaximum, PrimitiveType::kF32)};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 2),
                                  {F32({2}, {d == 0 ? nan : 1.0f, float(d)})});
  });
  EXPECT_TRUE(std::isnan(Values(*results[1])[0]));
  EXPECT_EQ(Values(*results[1])[1], 1.0f);
}

TEST_F(CollectivesTest, IntegerAddWrapsAround) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->called_computations = {
      MakeReducer("add_s32", Opcode::kAdd, PrimitiveType::kS32)};
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.AllReduce(
        OpFor(ar, d, 2),
        {Literal::Scalar(PrimitiveType::kS32,
                         std::numeric_limits<int32_t>::max())});
  });
  EXPECT_EQ(results[0]->data<int32_t>()[0], -2);
}

TEST_F(CollectivesTest, NonstandardReducersApplyLeftToRightInGroupOrder) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->called_computations = {
      MakeReducer("sub", Opcode::kSubtract, PrimitiveType::kF32)};
  ComputationRunner runner =
      [](const hlo::Computation& computation,
         std::span<const Literal> args) -> absl::StatusOr<Literal> {
    EXPECT_EQ(computation.name(), "sub");
    return Literal::Scalar(PrimitiveType::kF32,
                           args[0].data<float>()[0] - args[1].data<float>()[0]);
  };
  auto results = RunOnDevices(3, [&](int64_t d) {
    CollectiveOp op = OpFor(ar, d, 3);
    op.run_computation = &runner;
    return collectives_.AllReduce(op, {F32({1}, {float(10 * (d + 1))})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(10.0f - 20.0f - 30.0f));
  }
}

TEST_F(CollectivesTest, AllGatherConcatenatesInGroupOrder) {
  Instruction* ag = MakeCollective(Opcode::kAllGather);
  ag->dimensions = {1};
  ag->replica_groups.groups = {{2, 0}, {1, 3}};
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.AllGather(OpFor(ag, d, 4),
                                  {F32({2, 1}, {float(d), float(10 + d)})});
  });
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->shape().dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(Values(*results[0]), ElementsAre(2, 0, 12, 10));
  EXPECT_THAT(Values(*results[3]), ElementsAre(1, 3, 11, 13));
}

TEST_F(CollectivesTest, AllGatherTupleFormGathersEachOperand) {
  Instruction* ag = MakeCollective(Opcode::kAllGather);
  ag->dimensions = {0};
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.AllGather(
        OpFor(ag, d, 2), {F32({1}, {float(d)}), F32({2}, {float(d), 5})});
  });
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  ASSERT_EQ(results[1]->elements().size(), 2u);
  EXPECT_THAT(Values(results[1]->elements()[0]), ElementsAre(0, 1));
  EXPECT_THAT(Values(results[1]->elements()[1]), ElementsAre(0, 5, 1, 5));
}

TEST_F(CollectivesTest, ChannelLessPermuteMovesValuesBetweenReplicas) {
  Instruction* cp = MakeCollective(Opcode::kCollectivePermute);
  cp->channel_id.reset();
  cp->source_target_pairs = {{0, 1}, {1, 0}};  // Replica ids.
  // 2 replicas × 2 partitions: device = replica * 2 + partition.
  auto results = RunOnDevices(4, [&](int64_t d) {
    return collectives_.CollectivePermute(OpFor(cp, d, 2, 2),
                                          F32({1}, {float(d)}));
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(2));
  EXPECT_THAT(Values(*results[1]), ElementsAre(3));
  EXPECT_THAT(Values(*results[2]), ElementsAre(0));
  EXPECT_THAT(Values(*results[3]), ElementsAre(1));
}

TEST_F(CollectivesTest, ReduceScatterKeepsTheMembersBlock) {
  Instruction* rs = MakeCollective(Opcode::kReduceScatter);
  rs->dimensions = {0};
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.ReduceScatter(OpFor(rs, d, 2),
                                      {F32({4}, {1, 2, 3, float(4 + d)})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(2, 4));
  EXPECT_THAT(Values(*results[1]), ElementsAre(6, 9));
}

TEST_F(CollectivesTest, AllToAllArrayFormSendsChunkJToMemberJ) {
  Instruction* a2a = MakeCollective(Opcode::kAllToAll);
  a2a->dimensions = {0};
  auto results = RunOnDevices(2, [&](int64_t d) {
    // Device d holds {d0, d1, d2, d3}: chunks {d0,d1} and {d2,d3}.
    float base = 10.0f * float(d);
    return collectives_.AllToAll(
        OpFor(a2a, d, 2), {F32({4}, {base, base + 1, base + 2, base + 3})});
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(0, 1, 10, 11));
  EXPECT_THAT(Values(*results[1]), ElementsAre(2, 3, 12, 13));
}

TEST_F(CollectivesTest, AllToAllTupleFormReturnsWhatEachMemberSentMe) {
  Instruction* a2a = MakeCollective(Opcode::kAllToAll);
  auto results = RunOnDevices(3, [&](int64_t d) {
    std::vector<Literal> operands;
    for (int j = 0; j < 3; ++j)
      operands.push_back(F32({1}, {float(10 * d + j)}));
    return collectives_.AllToAll(OpFor(a2a, d, 3), std::move(operands));
  });
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  ASSERT_EQ(results[1]->elements().size(), 3u);
  EXPECT_THAT(Values(results[1]->elements()[0]), ElementsAre(1));
  EXPECT_THAT(Values(results[1]->elements()[1]), ElementsAre(11));
  EXPECT_THAT(Values(results[1]->elements()[2]), ElementsAre(21));
}

TEST_F(CollectivesTest, CollectivePermuteGivesZerosToDevicesNobodySendsTo) {
  Instruction* cp = MakeCollective(Opcode::kCollectivePermute);
  cp->source_target_pairs = {{0, 1}, {1, 2}};
  auto results = RunOnDevices(3, [&](int64_t d) {
    return collectives_.CollectivePermute(OpFor(cp, d, 3),
                                          F32({2}, {float(d + 1), 7.0f}));
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(0, 0));
  EXPECT_THAT(Values(*results[1]), ElementsAre(1, 7));
  EXPECT_THAT(Values(*results[2]), ElementsAre(2, 7));
}

TEST_F(CollectivesTest, RepeatedExecutionsOfOneInstructionDoNotMix) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  auto results = RunOnDevices(2, [&](int64_t d) -> absl::StatusOr<Literal> {
    Literal value = F32({1}, {1.0f});
    for (int64_t i = 0; i < 50; ++i) {
      auto next = collectives_.AllReduce(OpFor(ar, d, 2, 1, i), {value});
      if (!next.ok()) return next.status();
      value = *std::move(next);
    }
    return value;
  });
  EXPECT_THAT(Values(*results[0]), ElementsAre(std::ldexp(1.0f, 50)));
  EXPECT_THAT(Values(*results[1]), ElementsAre(std::ldexp(1.0f, 50)));
}

TEST_F(CollectivesTest, MissingPeerEndsInDeadlineExceededNamingIt) {
  InProcessCollectives collectives(
      InProcessCollectives::Options{.timeout = absl::Milliseconds(50)});
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  auto result = collectives.AllReduce(OpFor(ar, 0, 3), {F32({1}, {1.0f})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("all-reduce.1"));
  EXPECT_THAT(result.status().message(), HasSubstr("partitions 1, 2"));
}

TEST_F(CollectivesTest, CancelWakesAWaitingParticipantWithTheError) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  absl::StatusOr<Literal> result;
  std::thread waiter([&] {
    result = collectives_.AllReduce(OpFor(ar, 0, 2), {F32({1}, {1.0f})});
  });
  // Partition 0 is blocked waiting for partition 1 before the cancel.
  EXPECT_TRUE(collectives_.AwaitWaiting(1, absl::Seconds(30)));
  collectives_.Cancel(absl::InternalError("partition 1 failed"));
  waiter.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("partition 1 failed"));
}

TEST_F(CollectivesTest, ResetClearsCancellation) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  collectives_.Cancel(absl::InternalError("boom"));
  collectives_.Reset();
  auto result = collectives_.AllReduce(OpFor(ar, 0, 1), {F32({1}, {3.0f})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(3.0f));
}

TEST_F(CollectivesTest, ShapeMismatchBetweenParticipantsIsAnError) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  auto results = RunOnDevices(2, [&](int64_t d) {
    return collectives_.AllReduce(OpFor(ar, d, 2), {F32({d + 1}, {1, 1})});
  });
  for (auto& result : results) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("different shapes"));
  }
}

TEST_F(CollectivesTest, GroupIdsOutsideTheGridAreRefused) {
  Instruction* ar = MakeCollective(Opcode::kAllReduce);
  ar->replica_groups.groups = {{0, 5}};
  auto result = collectives_.AllReduce(OpFor(ar, 0, 2), {F32({1}, {1.0f})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("id 5"));
}

TEST(CollectiveHelpersTest, BlockAlongAndConcatenateAlongAreInverse) {
  Literal value = F32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto first = BlockAlong(value, 1, 2, 0);
  auto second = BlockAlong(value, 1, 2, 1);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_THAT(Values(*first), ElementsAre(0, 1, 4, 5));
  const Literal* parts[] = {&*first, &*second};
  auto joined = ConcatenateAlong(parts, 1);
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(*joined, value);
}

}  // namespace
}  // namespace causeway::exec
