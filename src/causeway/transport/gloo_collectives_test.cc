// What only the Gloo implementation has: its communicator cache, epochs,
// and the keys it leaves in the store. The shared behaviour is in the
// conformance suite.
#include "causeway/transport/gloo_collectives.h"

#include <functional>
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
namespace gloo_collectives_test {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using hlo::testutil::F32;
using hlo::testutil::Values;

// Four devices (ids 10..13) on two communicators, as two processes would
// hold them.
class GlooCollectivesTest : public ::testing::Test {
 protected:
  static constexpr int64_t kDevices = 4;

  GlooCollectivesTest() {
    for (int p = 0; p < 2; ++p) {
      communicators_.push_back(
          *GlooCommunicators::Create({.store = &store_}));
    }
  }

  GlooCommunicators& CommunicatorsOf(int64_t device) {
    return *communicators_[device % 2];
  }

  GlooLaunch Launch(uint64_t epoch, uint64_t seq) {
    GlooLaunch launch{.island = IslandId(0), .epoch = epoch, .seq = seq,
                      .devices = {}};
    for (int64_t d = 0; d < kDevices; ++d) {
      launch.devices.push_back(DeviceId(10 + d));
    }
    return launch;
  }

  // Runs `call` on every device's participant of launch (epoch, seq).
  std::vector<absl::StatusOr<Literal>> Run(
      uint64_t epoch, uint64_t seq,
      const std::function<absl::StatusOr<Literal>(int64_t,
                                                  GlooCollectives&)>& call,
      absl::Duration timeout = absl::Seconds(20)) {
    std::vector<std::unique_ptr<GlooCollectives>> participants;
    for (int64_t d = 0; d < kDevices; ++d) {
      participants.push_back(std::make_unique<GlooCollectives>(
          CommunicatorsOf(d), Launch(epoch, seq), d,
          GlooCollectives::Options{.timeout = timeout}));
    }
    std::vector<absl::StatusOr<Literal>> results(kDevices);
    std::vector<std::thread> threads;
    for (int64_t d = 0; d < kDevices; ++d) {
      threads.emplace_back([&, d] { results[d] = call(d, *participants[d]); });
    }
    for (auto& thread : threads) thread.join();
    return results;
  }

  // An f32 sum of every device's (d + 1).
  std::vector<absl::StatusOr<Literal>> SumOnce(uint64_t epoch, uint64_t seq,
                                               Instruction* ar) {
    return Run(epoch, seq, [&](int64_t d, GlooCollectives& c) {
      return c.AllReduce(exec::testutil::OpFor(ar, d, kDevices, 1, 0, seq),
                         {F32({1}, {float(d + 1)})});
    });
  }

  int64_t NumContexts() {
    return communicators_[0]->NumContexts() + communicators_[1]->NumContexts();
  }

  InProcessKeyValueStore store_;
  std::vector<std::unique_ptr<GlooCommunicators>> communicators_;
  exec::testutil::CollectiveBuilder builder_;
};

TEST_F(GlooCollectivesTest, ContextsAreBuiltOnceAndReusedByLaterLaunches) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    for (auto& result : SumOnce(0, seq, ar)) {
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_THAT(Values(*result), ElementsAre(10.0f));
    }
    EXPECT_EQ(NumContexts(), kDevices);  // One group, one rank each.
  }
}

TEST_F(GlooCollectivesTest, ATupleAllReduceRunsOneRingOverItsOperands) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  // Operands of 1, 3 and 5 elements: laid end to end, the ring's chunks cut
  // across them. Whole numbers, so every order of the sum is exact.
  auto results = Run(0, 1, [&](int64_t d, GlooCollectives& c) {
    const float v = float(d + 1);
    return c.AllReduce(exec::testutil::OpFor(ar, d, kDevices, 1, 0, 1),
                       {F32({1}, {v}), F32({3}, {v, 2 * v, 3 * v}),
                        F32({5}, {v, v, v, v, -v})});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->elements().size(), 3u);
    EXPECT_THAT(Values(result->elements()[0]), ElementsAre(10.0f));
    EXPECT_THAT(Values(result->elements()[1]), ElementsAre(10.0f, 20.0f, 30.0f));
    EXPECT_THAT(Values(result->elements()[2]),
                ElementsAre(10.0f, 10.0f, 10.0f, 10.0f, -10.0f));
  }
  EXPECT_EQ(NumContexts(), kDevices);  // One group, one context per rank.
}

TEST_F(GlooCollectivesTest, RendezvousKeysAreDeletedOnceEveryRankConnected) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  for (auto& result : SumOnce(0, 1, ar)) {
    ASSERT_TRUE(result.ok()) << result.status();
  }
  EXPECT_THAT(store_.Keys(GlooEpochPrefix(IslandId(0), 0)), IsEmpty());
}

TEST_F(GlooCollectivesTest, SubgroupsGetTheirOwnContexts) {
  Instruction* whole = builder_.Collective(Opcode::kAllReduce);
  Instruction* pairs = builder_.Collective(Opcode::kAllReduce);
  pairs->replica_groups.groups = {{0, 1}, {2, 3}};
  auto results = Run(0, 1, [&](int64_t d, GlooCollectives& c)
                               -> absl::StatusOr<Literal> {
    auto sum = c.AllReduce(exec::testutil::OpFor(whole, d, kDevices, 1, 0, 1),
                           {F32({1}, {float(d + 1)})});
    if (!sum.ok()) return sum;
    return c.AllReduce(exec::testutil::OpFor(pairs, d, kDevices, 1, 0, 1),
                       {*sum});
  });
  for (auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(20.0f));
  }
  EXPECT_EQ(NumContexts(), 2 * kDevices);
}

TEST_F(GlooCollectivesTest, AClosedContextFailsLaterLaunchesOfItsEpochAtOnce) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  for (auto& result : SumOnce(0, 1, ar)) ASSERT_TRUE(result.ok());
  {
    // Device 1 gives up on launch 2 before it runs.
    GlooCollectives cancelled(CommunicatorsOf(1), Launch(0, 2), 1,
                              GlooCollectives::Options());
    cancelled.Cancel(absl::InternalError("inputs failed"));
    auto results = Run(0, 2, [&](int64_t d, GlooCollectives& c) {
      if (d == 1) return absl::StatusOr<Literal>(Literal());
      return c.AllReduce(exec::testutil::OpFor(ar, d, kDevices, 1, 0, 2),
                         {F32({1}, {1.0f})});
    });
    for (int64_t d : {0, 2, 3}) {
      EXPECT_EQ(results[d].status().code(), absl::StatusCode::kInternal);
      EXPECT_THAT(results[d].status().message(), HasSubstr("inputs failed"));
    }
  }
  // Launch 3 of the same epoch: the contexts stay closed; nobody waits for
  // the 20 s timeout.
  for (auto& result : SumOnce(0, 3, ar)) {
    EXPECT_FALSE(result.ok());
    EXPECT_NE(result.status().code(), absl::StatusCode::kDeadlineExceeded)
        << result.status();
  }
}

TEST_F(GlooCollectivesTest, ANewEpochOpensNewContextsAndRetiresTheOld) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  for (auto& result : SumOnce(0, 1, ar)) ASSERT_TRUE(result.ok());
  GlooCollectives cancelled(CommunicatorsOf(0), Launch(0, 2), 0,
                            GlooCollectives::Options());
  cancelled.Cancel(absl::InternalError("inputs failed"));
  // The head moves the island to epoch 1; each device retires epoch 0 as it
  // starts its first launch there.
  for (int64_t d = 0; d < kDevices; ++d) {
    CommunicatorsOf(d).RetireEpochsBefore(IslandId(0), DeviceId(10 + d), 1);
  }
  for (auto& result : SumOnce(1, 3, ar)) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(*result), ElementsAre(10.0f));
  }
  EXPECT_EQ(NumContexts(), kDevices);
}

}  // namespace gloo_collectives_test
}  // namespace causeway::transport
