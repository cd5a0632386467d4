// The in-process implementation's own behaviour and the shared helpers.
// What every implementation must do is in the conformance suite
// (transport/collectives_conformance_test.cc), which runs against this one
// and the Gloo one.
#include "causeway/exec/collectives.h"

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "causeway/exec/collective_test_util.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace collectives_test {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;
using testutil::OpFor;

class InProcessCollectivesTest : public ::testing::Test {
 protected:
  InProcessCollectives collectives_;
  testutil::CollectiveBuilder builder_;
};

TEST_F(InProcessCollectivesTest, MissingPeerEndsInDeadlineExceededNamingIt) {
  InProcessCollectives collectives(
      InProcessCollectives::Options{.timeout = absl::Milliseconds(50)});
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  auto result = collectives.AllReduce(OpFor(ar, 0, 3), {F32({1}, {1.0f})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.status().message(), HasSubstr("all-reduce.1"));
  EXPECT_THAT(result.status().message(), HasSubstr("partitions 1, 2"));
}

TEST_F(InProcessCollectivesTest, ResetClearsCancellation) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  collectives_.Cancel(absl::InternalError("boom"));
  collectives_.Reset();
  auto result = collectives_.AllReduce(OpFor(ar, 0, 1), {F32({1}, {3.0f})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(3.0f));
}

// Participants of one program always send equal shapes; the in-process
// implementation sees every input and says so when they do not.
TEST_F(InProcessCollectivesTest, ShapeMismatchBetweenParticipantsIsAnError) {
  Instruction* ar = builder_.Collective(Opcode::kAllReduce);
  std::vector<absl::StatusOr<Literal>> results(2);
  std::vector<std::thread> threads;
  for (int64_t d = 0; d < 2; ++d) {
    threads.emplace_back([&, d] {
      results[d] =
          collectives_.AllReduce(OpFor(ar, d, 2), {F32({d + 1}, {1, 1})});
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& result : results) {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("different shapes"));
  }
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

}  // namespace collectives_test
}  // namespace causeway::exec
