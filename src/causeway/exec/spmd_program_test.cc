#include "causeway/exec/spmd_program.h"

#include <vector>

#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

// Each partition adds its id to x, then all partitions sum the result.
constexpr char kSumOfShards[] = R"(
HloModule sum, num_partitions=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[2] broadcast(pf), dimensions={}
  y = f32[2] add(x, b)
  r = f32[2] all-reduce(y), channel_id=1, replica_groups=[1,4]<=[4], use_global_device_ids=true, to_apply=add
  ROOT t = (f32[2], f32[2]) tuple(r, y)
}
)";

std::vector<std::vector<Literal>> SameArgs(int64_t partitions, Literal arg) {
  std::vector<std::vector<Literal>> args(partitions);
  for (auto& partition_args : args) partition_args.push_back(arg);
  return args;
}

TEST(SpmdProgramTest, PartitionsMeetInCollectivesAndReturnFlattenedTuples) {
  auto program = SpmdProgram::Load(kSumOfShards, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  auto outputs = (*program)->Run(SameArgs(4, F32({2}, {1, 10})));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 4u);
  for (int p = 0; p < 4; ++p) {
    ASSERT_EQ((*outputs)[p].size(), 2u);
    EXPECT_THAT(Values((*outputs)[p][0]), ElementsAre(10, 46));
    EXPECT_THAT(Values((*outputs)[p][1]), ElementsAre(1 + p, 10 + p));
  }
}

TEST(SpmdProgramTest, RunsManyTimesWithFreshCollectives) {
  auto program = SpmdProgram::Load(kSumOfShards, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  for (int run = 0; run < 20; ++run) {
    auto outputs = (*program)->Run(SameArgs(4, F32({2}, {float(run), 0})));
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    EXPECT_THAT(Values((*outputs)[3][0]), ElementsAre(4 * run + 6, 6));
  }
}

TEST(SpmdProgramTest, CollectivesInsideLoopsMatchUpPerIteration) {
  auto program = SpmdProgram::Load(R"(
HloModule loop, num_partitions=3
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1,2}}, use_global_device_ids=true, to_apply=add
  ROOT t = (s32[], f32[]) tuple(j, y)
}
ENTRY main {
  x = f32[] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[]) tuple(z, x)
  w = (s32[], f32[]) while(init), condition=cond, body=body
  ROOT r = f32[] get-tuple-element(w), index=1
}
)",
                                   3);
  ASSERT_TRUE(program.ok()) << program.status();
  auto outputs =
      (*program)->Run(SameArgs(3, Literal::Scalar(PrimitiveType::kF32, 1)));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ((*outputs)[p][0].GetAsDouble(0), 243);  // 3^5
  }
}

TEST(SpmdProgramTest, AFailingPartitionCancelsItsPeersInsteadOfHanging) {
  auto program = SpmdProgram::Load(kSumOfShards, 4,
                                   {.collective_timeout = absl::Seconds(300), .evaluator = {}});
  ASSERT_TRUE(program.ok()) << program.status();
  auto args = SameArgs(4, F32({2}, {1, 10}));
  args[2][0] = F32({3}, {1, 2, 3});
  const absl::Time start = absl::Now();
  auto outputs = (*program)->Run(std::move(args));
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outputs.status().message(),
              HasSubstr("partition 2: parameter 0 ('x'): expected f32[2], got "
                        "f32[3]"));
  // The next run works again.
  auto again = (*program)->Run(SameArgs(4, F32({2}, {1, 10})));
  ASSERT_TRUE(again.ok()) << again.status();
}

TEST(SpmdProgramTest, RefusesAPartitionCountTheModuleWasNotCompiledFor) {
  auto program = SpmdProgram::Load(kSumOfShards, 2);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(program.status().message(),
              HasSubstr("compiled for 4 partitions (num_partitions=4) but is "
                        "asked to run on 2"));
}

TEST(SpmdProgramTest, ASinglePartitionModuleWithoutCollectivesRunsOnMany) {
  auto program = SpmdProgram::Load(R"(
HloModule single
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] negate(x)
}
)",
                                   3);
  ASSERT_TRUE(program.ok()) << program.status();
  auto outputs = (*program)->Run(SameArgs(3, F32({2}, {1, 2})));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(Values((*outputs)[2][0]), ElementsAre(-1, -2));
}

TEST(SpmdProgramTest, RefusesArgumentsForTheWrongNumberOfPartitions) {
  auto program = SpmdProgram::Load(kSumOfShards, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  auto outputs = (*program)->Run(SameArgs(3, F32({2}, {1, 10})));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outputs.status().message(), HasSubstr("for 4 partitions, got 3"));
}

TEST(SpmdProgramTest, LoadRefusesUnsupportedOpsNamingTheLine) {
  auto program = SpmdProgram::Load(R"(
HloModule bad
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] custom-call(x), custom_call_target="Sharding"
}
)",
                                   1);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(program.status().message(), HasSubstr("line 5"));
  EXPECT_THAT(program.status().message(), HasSubstr("Sharding"));
}

TEST(SpmdProgramTest, LoadReportsParseErrors) {
  auto program = SpmdProgram::Load("HloModule m\nENTRY main {\n  x = \n}", 1);
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(program.status().message(), HasSubstr("line"));
}

}  // namespace
}  // namespace causeway::exec
