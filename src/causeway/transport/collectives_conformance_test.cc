// The collectives conformance suite: every test runs against the
// in-process implementation (threads meeting in memory) and the Gloo one
// (every device a Gloo rank over TCP on loopback), with all ranks on one
// GlooCommunicators (one "process") or spread over two. The semantics are
// XLA's (exec::GroupOf and friends); the implementations must agree on them.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "causeway/exec/collective_test_util.h"
#include "causeway/exec/collectives.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/transport/gloo_collectives.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace collectives_conformance_test {

using exec::CollectiveOp;
using exec::Collectives;
using exec::testutil::CollectiveBuilder;
using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

// One implementation, seen as the participants of one run at a time.
class Harness {
 public:
  virtual ~Harness() = default;
  // A new run (a launch) over a grid of `devices`; the previous run's
  // participants are gone.
  virtual void StartRun(int64_t devices, absl::Duration timeout) = 0;
  virtual Collectives& Participant(int64_t device) = 0;
  // What the runtime does when `device` will not run its part.
  virtual void Cancel(int64_t device, absl::Status status) = 0;
  uint64_t run_id() const { return run_id_; }

 protected:
  uint64_t run_id_ = 0;
};

class InProcessHarness final : public Harness {
 public:
  void StartRun(int64_t devices, absl::Duration timeout) override {
    collectives_ = std::make_unique<exec::InProcessCollectives>(
        exec::InProcessCollectives::Options{.timeout = timeout});
    ++run_id_;
  }
  Collectives& Participant(int64_t device) override { return *collectives_; }
  void Cancel(int64_t device, absl::Status status) override {
    collectives_->Cancel(std::move(status));
  }

 private:
  std::unique_ptr<exec::InProcessCollectives> collectives_;
};

// Grid device d is DeviceId(200 - d): Gloo ranks (sorted ids) run opposite
// to grid order, so group order and rank order always differ.
template <int kProcesses>
class GlooHarness final : public Harness {
 public:
  GlooHarness() {
    for (int p = 0; p < kProcesses; ++p) {
      auto communicators =
          GlooCommunicators::Create({.store = &store_, .hostname = "127.0.0.1"});
      CW_CHECK(communicators.ok()) << communicators.status();
      communicators_.push_back(*std::move(communicators));
    }
  }
  ~GlooHarness() override {
    participants_.clear();
    communicators_.clear();
  }

  void StartRun(int64_t devices, absl::Duration timeout) override {
    participants_.clear();
    ++run_id_;
    GlooLaunch launch{.island = IslandId(0), .epoch = 0, .seq = run_id_, .devices = {}};
    for (int64_t d = 0; d < devices; ++d) {
      launch.devices.push_back(DeviceId(200 - d));
    }
    for (int64_t d = 0; d < devices; ++d) {
      participants_.push_back(std::make_unique<GlooCollectives>(
          *communicators_[d % kProcesses], launch, d,
          GlooCollectives::Options{.timeout = timeout}));
    }
  }
  Collectives& Participant(int64_t device) override {
    return *participants_[device];
  }
  void Cancel(int64_t device, absl::Status status) override {
    participants_[device]->Cancel(std::move(status));
  }

 private:
  InProcessKeyValueStore store_;  // Outlives the communicators.
  std::vector<std::unique_ptr<GlooCommunicators>> communicators_;
  std::vector<std::unique_ptr<GlooCollectives>> participants_;
};

using GlooOneProcess = GlooHarness<1>;
using GlooTwoProcesses = GlooHarness<2>;

template <typename H>
class CollectivesConformanceTest : public ::testing::Test {
 protected:
  using Call = std::function<absl::StatusOr<Literal>(int64_t, Collectives&)>;

  // Starts a run of `devices` and calls `call(device, collectives)` for
  // every device on its own thread.
  std::vector<absl::StatusOr<Literal>> Run(
      int64_t devices, const Call& call,
      absl::Duration timeout = absl::Seconds(30)) {
    harness_.StartRun(devices, timeout);
    std::vector<absl::StatusOr<Literal>> results(devices);
    std::vector<std::thread> threads;
    for (int64_t d = 0; d < devices; ++d) {
      threads.emplace_back(
          [&, d] { results[d] = call(d, harness_.Participant(d)); });
    }
    for (auto& thread : threads) thread.join();
    return results;
  }

  CollectiveOp Op(const Instruction* instruction, int64_t device,
                  int64_t num_partitions, int64_t replica_count = 1,
                  int64_t execution = 0) {
    return exec::testutil::OpFor(instruction, device, num_partitions,
                                 replica_count, execution, harness_.run_id());
  }

  // Two participants meet in all-reduce `ar`, so that later runs over the
  // same devices find their connections open; the first error, if any.
  absl::Status OpenConnections(const Instruction* ar) {
    for (const absl::StatusOr<Literal>&result :
         Run(2, [&](int64_t d, Collectives&c) {
           return c.AllReduce(Op(ar, d, 2), {F32({1}, {1.0f})});
         })) {
      if (!result.ok()) return result.status();
    }
    return absl::OkStatus();
  }

  // In a new run of two, participant 0 calls all-reduce `ar` on a thread
  // of its own while participant `cancelled` is cancelled with `status`
  // (before or during the call): what the call returned.
  absl::StatusOr<Literal> AllReduceWhileCancelling(const Instruction* ar,
                                                   int64_t cancelled,
                                                   absl::Status status) {
    harness_.StartRun(2, absl::Seconds(20));
    absl::StatusOr<Literal> result;
    std::thread waiter([&] {
      result =
          harness_.Participant(0).AllReduce(Op(ar, 0, 2), {F32({1}, {1.0f})});
    });
    harness_.Cancel(cancelled, std::move(status));
    waiter.join();
    return result;
  }

  H harness_;
  CollectiveBuilder builder_;
};

using Implementations =
    ::testing::Types<InProcessHarness, GlooOneProcess, GlooTwoProcesses>;
class ImplementationNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, InProcessHarness>) return "InProcess";
    if (std::is_same_v<T, GlooOneProcess>) return "GlooOneProcess";
    return "GlooTwoProcesses";
  }
};
TYPED_TEST_SUITE(CollectivesConformanceTest, Implementations,
                 ImplementationNames);

TYPED_TEST(CollectivesConformanceTest, AllReduceSumsOverEveryPartition) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 4),
                       {F32({2}, {float(d), 10.0f * float(d)})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(6.0f, 60.0f));
  }
}

TYPED_TEST(CollectivesConformanceTest,
           AllReduceTupleFormReducesEachOperandIndependently) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 2),
                       {F32({1}, {float(d + 1)}), F32({2}, {1.0f, 2.0f})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->elements().size(), 2u);
    EXPECT_THAT(Values(result->elements()[0]), ElementsAre(3.0f));
    EXPECT_THAT(Values(result->elements()[1]), ElementsAre(2.0f, 4.0f));
  }
}

TYPED_TEST(CollectivesConformanceTest,
           AllReduceWithIotaGroupsReducesWithinEachGroup) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  // [2,2]<=[2,2]T(1,0): groups {0,2} and {1,3}.
  ar->replica_groups.iota = hlo::ReplicaGroups::Iota{.num_groups = 2,
                                                     .group_size = 2,
                                                     .reshape_dims = {2, 2},
                                                     .transpose_perm = {1, 0}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 4), {F32({1}, {float(1 << d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(5.0f));   // 1 + 4
  EXPECT_THAT(Values(*results[1]), ElementsAre(10.0f));  // 2 + 8
  EXPECT_THAT(Values(*results[2]), ElementsAre(5.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(10.0f));
}

TYPED_TEST(CollectivesConformanceTest,
           ChannelLessAllReduceGroupsReplicasOfOnePartition) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->channel_id.reset();
  ar->use_global_device_ids = false;
  // 2 replicas × 2 partitions: device = replica * 2 + partition.
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 2, 2), {F32({1}, {float(1 << d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(5.0f));   // devices 0, 2
  EXPECT_THAT(Values(*results[1]), ElementsAre(10.0f));  // devices 1, 3
  EXPECT_THAT(Values(*results[2]), ElementsAre(5.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(10.0f));
}

TYPED_TEST(CollectivesConformanceTest,
           ChannelWithoutGlobalIdsSpansPartitionsOfEachReplica) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->use_global_device_ids = false;
  ar->replica_groups.groups = {{0}, {1}};  // Replica ids.
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 2, 2), {F32({1}, {float(1 << d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(3.0f));  // devices 0, 1
  EXPECT_THAT(Values(*results[1]), ElementsAre(3.0f));
  EXPECT_THAT(Values(*results[2]), ElementsAre(12.0f));  // devices 2, 3
  EXPECT_THAT(Values(*results[3]), ElementsAre(12.0f));
}

TYPED_TEST(CollectivesConformanceTest,
           GlobalDeviceIdsAreFlattenedOverReplicasAndPartitions) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->replica_groups.groups = {{0, 3}, {1, 2}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 2, 2), {F32({1}, {float(1 << d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(9.0f));
  EXPECT_THAT(Values(*results[1]), ElementsAre(6.0f));
  EXPECT_THAT(Values(*results[2]), ElementsAre(6.0f));
  EXPECT_THAT(Values(*results[3]), ElementsAre(9.0f));
}

TYPED_TEST(CollectivesConformanceTest, MaximumReducerPropagatesNan) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->called_computations = {
      this->builder_.Reducer("max", Opcode::kMaximum, PrimitiveType::kF32)};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 2),
                       {F32({2}, {d == 0 ? nan : 1.0f, float(d)})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(std::isnan(Values(*result)[0]));
    EXPECT_EQ(Values(*result)[1], 1.0f);
  }
}

TYPED_TEST(CollectivesConformanceTest, IntegerAddWrapsAround) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->called_computations = {
      this->builder_.Reducer("add_s32", Opcode::kAdd, PrimitiveType::kS32)};
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    return c.AllReduce(
        this->Op(ar, d, 2),
        {Literal::Scalar(PrimitiveType::kS32,
                         std::numeric_limits<int32_t>::max())});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->data<int32_t>()[0], -2);
  }
}

TYPED_TEST(CollectivesConformanceTest,
           NonstandardReducersApplyLeftToRightInGroupOrder) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->called_computations = {
      this->builder_.Reducer("sub", Opcode::kSubtract, PrimitiveType::kF32)};
  ar->replica_groups.groups = {{2, 0, 1}};
  exec::ComputationRunner runner =
      [](const hlo::Computation& computation,
         std::span<const Literal> args) -> absl::StatusOr<Literal> {
    return Literal::Scalar(PrimitiveType::kF32,
                           args[0].data<float>()[0] - args[1].data<float>()[0]);
  };
  std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
    CollectiveOp op = this->Op(ar, d, 3);
    op.run_computation = &runner;
    return c.AllReduce(op, {F32({1}, {float(10 * (d + 1))})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(30.0f - 10.0f - 20.0f));
  }
}

// Every dtype through an add all-reduce; the values are small integers, so
// any reduction order gives the bits ReduceInputs gives in group order.
TYPED_TEST(CollectivesConformanceTest, AllReduceMatchesReduceInputsInEveryDtype) {
  for (PrimitiveType type :
       {PrimitiveType::kPred, PrimitiveType::kS8, PrimitiveType::kS16,
        PrimitiveType::kS32, PrimitiveType::kS64, PrimitiveType::kU8,
        PrimitiveType::kU16, PrimitiveType::kU32, PrimitiveType::kU64,
        PrimitiveType::kF16, PrimitiveType::kBF16, PrimitiveType::kF32,
        PrimitiveType::kF64}) {
    SCOPED_TRACE(std::string(hlo::PrimitiveTypeName(type)));
    Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
    ar->called_computations = {
        this->builder_.Reducer("add", Opcode::kAdd, type)};
    auto input = [&](int64_t d) {
      Literal value(Shape(type, {5}));
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t v = (d + 1) * (i + 1) % 7;
        hlo::VisitType(type, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, bool>) {
            value.mutable_data<T>()[i] = v % 2 == 1;
          } else {
            value.mutable_data<T>()[i] = T(static_cast<float>(v));
          }
        });
      }
      return value;
    };
    std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
      return c.AllReduce(this->Op(ar, d, 3), {input(d)});
    });
    std::vector<Literal> inputs = {input(0), input(1), input(2)};
    const Literal* column[] = {&inputs[0], &inputs[1], &inputs[2]};
    absl::StatusOr<Literal> expected =
        exec::ReduceInputs(this->Op(ar, 0, 3), column);
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (auto& result : results) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(*result, *expected) << result->ToString();
    }
  }
}

// bf16 rounds at every step: 1 + 2^-8 rounds back to 1. In group order
// ({3, 1, 0, 2}: 1, 2^-8, 2^-8, -1) the sum is 0; most other orders keep
// some 2^-8 (rank order, for one, gives 2^-7).
TYPED_TEST(CollectivesConformanceTest, HalfPrecisionSumsReduceInGroupOrder) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->called_computations = {
      this->builder_.Reducer("add", Opcode::kAdd, PrimitiveType::kBF16)};
  ar->replica_groups.groups = {{3, 1, 0, 2}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    const float value = d == 3   ? 1.0f
                        : d == 2 ? -1.0f
                                 : std::ldexp(1.0f, -8);
    return c.AllReduce(this->Op(ar, d, 4),
                       {hlo::testutil::Array<hlo::BF16>(
                           PrimitiveType::kBF16, {1}, {hlo::BF16(value)})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(static_cast<float>(result->data<hlo::BF16>()[0]), 0.0f);
  }
}

// f32 sums in another order differ in the last bits: within rounding of the
// group-order sum, and the same bits on every member.
TYPED_TEST(CollectivesConformanceTest,
           FloatSumsAgreeWithinRoundingAndAreIdenticalOnEveryMember) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  constexpr int64_t kElements = 1000;
  auto input = [](int64_t d) {
    Literal value(Shape(PrimitiveType::kF32, {kElements}));
    for (int64_t i = 0; i < kElements; ++i) {
      value.mutable_data<float>()[i] =
          std::sin(float(i * 7 + d * 13)) * std::pow(10.0f, float(d % 3));
    }
    return value;
  };
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllReduce(this->Op(ar, d, 4), {input(d)});
  });
  std::vector<Literal> inputs = {input(0), input(1), input(2), input(3)};
  const Literal* column[] = {&inputs[0], &inputs[1], &inputs[2], &inputs[3]};
  absl::StatusOr<Literal> expected =
      exec::ReduceInputs(this->Op(ar, 0, 4), column);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(*result, *results[0]);
    for (int64_t i = 0; i < kElements; ++i) {
      const float want = expected->data<float>()[i];
      EXPECT_NEAR(result->data<float>()[i], want,
                  1e-5f * (std::abs(want) + 100.0f));
    }
  }
}

// Large enough that the ring cuts every chunk into several segments and
// reuses its window of received segments; every element is checked.
TYPED_TEST(CollectivesConformanceTest, ALargeAllReduceIsRightInEveryElement) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  constexpr int64_t kElements = (10 << 20) / 4 + 3;  // 10 MiB, uneven.
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    Literal value(Shape(PrimitiveType::kF32, {kElements}));
    auto data = value.mutable_data<float>();
    for (int64_t i = 0; i < kElements; ++i) data[i] = float((i + d) % 1000);
    std::vector<Literal> operands;
    operands.push_back(std::move(value));
    return c.AllReduce(this->Op(ar, d, 4), std::move(operands));
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    auto data = result->data<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < kElements; ++i) {
      float want = 0;
      for (int64_t d = 0; d < 4; ++d) want += float((i + d) % 1000);
      if (data[i] != want) ++wrong;
    }
    EXPECT_EQ(wrong, 0);
  }
}

TYPED_TEST(CollectivesConformanceTest, AllGatherConcatenatesInGroupOrder) {
  Instruction* ag = this->builder_.Collective(Opcode::kAllGather);
  ag->dimensions = {1};
  ag->replica_groups.groups = {{2, 0}, {1, 3}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.AllGather(this->Op(ag, d, 4),
                       {F32({2, 1}, {float(d), float(10 + d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(results[0]->shape().dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_THAT(Values(*results[0]), ElementsAre(2, 0, 12, 10));
  EXPECT_THAT(Values(*results[2]), ElementsAre(2, 0, 12, 10));
  EXPECT_THAT(Values(*results[3]), ElementsAre(1, 3, 11, 13));
}

TYPED_TEST(CollectivesConformanceTest, AllGatherTupleFormGathersEachOperand) {
  Instruction* ag = this->builder_.Collective(Opcode::kAllGather);
  ag->dimensions = {0};
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    return c.AllGather(this->Op(ag, d, 2),
                       {F32({1}, {float(d)}), F32({2}, {float(d), 5})});
  });
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  ASSERT_EQ(results[1]->elements().size(), 2u);
  EXPECT_THAT(Values(results[1]->elements()[0]), ElementsAre(0, 1));
  EXPECT_THAT(Values(results[1]->elements()[1]), ElementsAre(0, 5, 1, 5));
}

TYPED_TEST(CollectivesConformanceTest, AllGatherMovesEveryDtypeUnchanged) {
  for (PrimitiveType type : {PrimitiveType::kPred, PrimitiveType::kS8,
                             PrimitiveType::kU16, PrimitiveType::kBF16,
                             PrimitiveType::kF64, PrimitiveType::kS64}) {
    SCOPED_TRACE(std::string(hlo::PrimitiveTypeName(type)));
    Instruction* ag = this->builder_.Collective(Opcode::kAllGather);
    ag->dimensions = {0};
    auto input = [&](int64_t d) {
      Literal value(Shape(type, {3}));
      auto* bytes = static_cast<uint8_t*>(value.mutable_untyped_data());
      for (int64_t b = 0; b < value.size_bytes(); ++b) {
        bytes[b] = type == PrimitiveType::kPred ? (b + d) % 2
                                                : uint8_t(31 * d + 7 * b + 1);
      }
      return value;
    };
    std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
      return c.AllGather(this->Op(ag, d, 3), {input(d)});
    });
    std::vector<Literal> inputs = {input(0), input(1), input(2)};
    const Literal* parts[] = {&inputs[0], &inputs[1], &inputs[2]};
    absl::StatusOr<Literal> expected = exec::ConcatenateAlong(parts, 0);
    ASSERT_TRUE(expected.ok());
    for (auto& result : results) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(*result, *expected);
    }
  }
}

TYPED_TEST(CollectivesConformanceTest, ReduceScatterKeepsTheMembersBlock) {
  Instruction* rs = this->builder_.Collective(Opcode::kReduceScatter);
  rs->dimensions = {0};
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    return c.ReduceScatter(this->Op(rs, d, 2),
                           {F32({4}, {1, 2, 3, float(4 + d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(2, 4));
  EXPECT_THAT(Values(*results[1]), ElementsAre(6, 9));
}

TYPED_TEST(CollectivesConformanceTest,
           ReduceScatterOverASubgroupKeepsTheBlockOfTheGroupPosition) {
  Instruction* rs = this->builder_.Collective(Opcode::kReduceScatter);
  rs->dimensions = {1};
  rs->replica_groups.groups = {{3, 0}, {2, 1}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.ReduceScatter(this->Op(rs, d, 4),
                           {F32({1, 2}, {float(d), float(10 * d)})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[3]), ElementsAre(3));   // Block 0 of {3, 0}.
  EXPECT_THAT(Values(*results[0]), ElementsAre(30));  // Block 1.
  EXPECT_THAT(Values(*results[2]), ElementsAre(3));   // Block 0 of {2, 1}.
  EXPECT_THAT(Values(*results[1]), ElementsAre(30));
}

TYPED_TEST(CollectivesConformanceTest, AllToAllArrayFormSendsChunkJToMemberJ) {
  Instruction* a2a = this->builder_.Collective(Opcode::kAllToAll);
  a2a->dimensions = {0};
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c) {
    // Device d holds {d0, d1, d2, d3}: chunks {d0,d1} and {d2,d3}.
    float base = 10.0f * float(d);
    return c.AllToAll(this->Op(a2a, d, 2),
                      {F32({4}, {base, base + 1, base + 2, base + 3})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(0, 1, 10, 11));
  EXPECT_THAT(Values(*results[1]), ElementsAre(2, 3, 12, 13));
}

TYPED_TEST(CollectivesConformanceTest,
           AllToAllArrayFormAlongAnInnerDimensionFollowsGroupOrder) {
  Instruction* a2a = this->builder_.Collective(Opcode::kAllToAll);
  a2a->dimensions = {1};
  a2a->replica_groups.groups = {{2, 0, 1}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
    float b = 10.0f * float(d);
    return c.AllToAll(this->Op(a2a, d, 3),
                      {F32({2, 3}, {b, b + 1, b + 2, b + 3, b + 4, b + 5})});
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  // Device 0 is member 1: it gets column 1 of members 2, 0, 1.
  EXPECT_THAT(Values(*results[0]), ElementsAre(21, 1, 11, 24, 4, 14));
  EXPECT_THAT(Values(*results[2]), ElementsAre(20, 0, 10, 23, 3, 13));
}

TYPED_TEST(CollectivesConformanceTest,
           AllToAllTupleFormReturnsWhatEachMemberSentMe) {
  Instruction* a2a = this->builder_.Collective(Opcode::kAllToAll);
  std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
    std::vector<Literal> operands;
    for (int j = 0; j < 3; ++j) {
      operands.push_back(F32({1}, {float(10 * d + j)}));
    }
    return c.AllToAll(this->Op(a2a, d, 3), std::move(operands));
  });
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  ASSERT_EQ(results[1]->elements().size(), 3u);
  EXPECT_THAT(Values(results[1]->elements()[0]), ElementsAre(1));
  EXPECT_THAT(Values(results[1]->elements()[1]), ElementsAre(11));
  EXPECT_THAT(Values(results[1]->elements()[2]), ElementsAre(21));
}

TYPED_TEST(CollectivesConformanceTest,
           ChannelLessPermuteMovesValuesBetweenReplicas) {
  Instruction* cp = this->builder_.Collective(Opcode::kCollectivePermute);
  cp->channel_id.reset();
  cp->source_target_pairs = {{0, 1}, {1, 0}};  // Replica ids.
  // 2 replicas × 2 partitions: device = replica * 2 + partition.
  std::vector<absl::StatusOr<Literal>> results = this->Run(4, [&](int64_t d, Collectives& c) {
    return c.CollectivePermute(this->Op(cp, d, 2, 2), F32({1}, {float(d)}));
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(2));
  EXPECT_THAT(Values(*results[1]), ElementsAre(3));
  EXPECT_THAT(Values(*results[2]), ElementsAre(0));
  EXPECT_THAT(Values(*results[3]), ElementsAre(1));
}

TYPED_TEST(CollectivesConformanceTest,
           CollectivePermuteGivesZerosToDevicesNobodySendsTo) {
  Instruction* cp = this->builder_.Collective(Opcode::kCollectivePermute);
  cp->source_target_pairs = {{0, 1}, {1, 2}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
    return c.CollectivePermute(this->Op(cp, d, 3),
                               F32({2}, {float(d + 1), 7.0f}));
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(0, 0));
  EXPECT_THAT(Values(*results[1]), ElementsAre(1, 7));
  EXPECT_THAT(Values(*results[2]), ElementsAre(2, 7));
}

TYPED_TEST(CollectivesConformanceTest,
           CollectivePermuteToSelfKeepsTheValue) {
  Instruction* cp = this->builder_.Collective(Opcode::kCollectivePermute);
  cp->source_target_pairs = {{0, 0}, {1, 2}, {2, 1}};
  std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
    return c.CollectivePermute(this->Op(cp, d, 3), F32({1}, {float(d + 5)}));
  });
  for (auto& result : results) ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*results[0]), ElementsAre(5));
  EXPECT_THAT(Values(*results[1]), ElementsAre(7));
  EXPECT_THAT(Values(*results[2]), ElementsAre(6));
}

// A collective in a while loop: one call per iteration, told apart by the
// execution count.
TYPED_TEST(CollectivesConformanceTest, RepeatedExecutionsOfOneInstructionDoNotMix) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  std::vector<absl::StatusOr<Literal>> results = this->Run(2, [&](int64_t d, Collectives& c)
                               -> absl::StatusOr<Literal> {
    Literal value = F32({1}, {1.0f});
    for (int64_t i = 0; i < 50; ++i) {
      auto next = c.AllReduce(this->Op(ar, d, 2, 1, i), {value});
      if (!next.ok()) return next.status();
      value = *std::move(next);
    }
    return value;
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(std::ldexp(1.0f, 50)));
  }
}

// Launches one after another over the same devices (the same communicators
// for the Gloo implementation).
TYPED_TEST(CollectivesConformanceTest, SuccessiveRunsGiveTheirOwnResults) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  for (int run = 0; run < 5; ++run) {
    std::vector<absl::StatusOr<Literal>> results = this->Run(3, [&](int64_t d, Collectives& c) {
      return c.AllReduce(this->Op(ar, d, 3), {F32({1}, {float(run + d)})});
    });
    for (auto& result : results) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_THAT(Values(*result), ElementsAre(float(3 * run + 3)));
    }
  }
}

TYPED_TEST(CollectivesConformanceTest, CancelBeforeACallFailsItWithTheStatus) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  this->harness_.StartRun(2, absl::Seconds(20));
  this->harness_.Cancel(1, absl::InternalError("partition 1 failed"));
  auto result = this->harness_.Participant(0).AllReduce(
      this->Op(ar, 0, 2), {F32({1}, {1.0f})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("partition 1 failed"));
}

// The peer cancels while (or just before) this participant waits for it,
// on connections that earlier runs opened.
TYPED_TEST(CollectivesConformanceTest,
           CancelDuringACallWakesTheWaitingParticipantWithTheStatus) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ASSERT_EQ(this->OpenConnections(ar), absl::OkStatus());
  absl::StatusOr<Literal> result = this->AllReduceWhileCancelling(
      ar, 1, absl::InternalError("partition 1 failed"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("partition 1 failed"));
}

// The participant itself is cancelled (its session closed) while it waits
// for a peer that never comes: its own call ends, not at the timeout.
TYPED_TEST(CollectivesConformanceTest, CancelEndsTheCancelledParticipantsCall) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ASSERT_EQ(this->OpenConnections(ar), absl::OkStatus());
  absl::StatusOr<Literal> result = this->AllReduceWhileCancelling(
      ar, 0, absl::CancelledError("session closed"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(result.status().message(), HasSubstr("session closed"));
}

// What the evaluator reads at every while-loop iteration, so that a
// partition looping without collectives stops once it is cancelled.
TYPED_TEST(CollectivesConformanceTest, ACancelledParticipantSaysSoToItsLoops) {
  this->harness_.StartRun(2, absl::Seconds(20));
  EXPECT_TRUE(this->harness_.Participant(0).Cancelled().ok());
  this->harness_.Cancel(0, absl::CancelledError("session closed"));
  absl::Status cancelled = this->harness_.Participant(0).Cancelled();
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(cancelled.message(), HasSubstr("session closed"));
}

TYPED_TEST(CollectivesConformanceTest, MissingPeerEndsInDeadlineExceeded) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  this->harness_.StartRun(3, absl::Milliseconds(200));
  auto result = this->harness_.Participant(0).AllReduce(this->Op(ar, 0, 3),
                                                        {F32({1}, {1.0f})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("all-reduce.1"));
}

// The peers met in an earlier run; this time one of them never calls.
TYPED_TEST(CollectivesConformanceTest,
           PeerThatNeverCallsOnOpenConnectionsEndsInDeadlineExceeded) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ASSERT_EQ(this->OpenConnections(ar), absl::OkStatus());
  this->harness_.StartRun(2, absl::Milliseconds(200));
  auto result = this->harness_.Participant(0).AllReduce(this->Op(ar, 0, 2),
                                                        {F32({1}, {1.0f})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("all-reduce.1"));
}

TYPED_TEST(CollectivesConformanceTest, GroupIdsOutsideTheGridAreRefused) {
  Instruction* ar = this->builder_.Collective(Opcode::kAllReduce);
  ar->replica_groups.groups = {{0, 5}};
  this->harness_.StartRun(2, absl::Seconds(20));
  auto result = this->harness_.Participant(0).AllReduce(this->Op(ar, 0, 2),
                                                        {F32({1}, {1.0f})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("id 5"));
}

}  // namespace collectives_conformance_test
}  // namespace causeway::transport
