#include "causeway/exec/evaluator.h"

#include <memory>
#include <string>
#include <vector>

#include "causeway/base/block_pool.h"
#include "causeway/exec/xla_cpu_target.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace evaluator_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

class EvaluatorTest : public ::testing::Test {
 protected:
  // Parses `text` and builds an evaluator for it.
  absl::Status Load(std::string_view text) {
    auto module = hlo::ParseModule(text);
    if (!module.ok()) return module.status();
    module_ = *std::move(module);
    auto evaluator = Evaluator::Create(*module_);
    if (!evaluator.ok()) return evaluator.status();
    evaluator_ = *std::move(evaluator);
    return absl::OkStatus();
  }

  absl::StatusOr<Literal> Run(std::vector<Literal> args,
                              RunContext context = {}) {
    return evaluator_->Run(args, context);
  }

  std::unique_ptr<hlo::Module> module_;
  std::unique_ptr<Evaluator> evaluator_;
};

// XLA contracts a multiply into its add inside a fusion (one rounding), not
// between two instructions of the entry computation (multiply_add.h); in
// f16 only where it computes f16 natively (xla_cpu_target.h; ctest's
// PromotedF16.* run forces the other).
TEST_F(EvaluatorTest, FusionBodiesContractMultiplyAddsAndEntryCodeDoesNot) {
  ASSERT_TRUE(Load(R"(
HloModule m
fused {
  a = f16[3] parameter(0)
  c = f16[3] parameter(1)
  m = f16[3] multiply(a, a)
  ROOT s = f16[3] subtract(m, c)
}
ENTRY main {
  a = f16[3] parameter(0)
  c = f16[3] parameter(1)
  f = f16[3] fusion(a, c), kind=kLoop, calls=fused
  m = f16[3] multiply(a, a)
  s = f16[3] subtract(m, c)
  ROOT t = (f16[3], f16[3]) tuple(f, s)
})")
                  .ok());
  const double a = 1 + 0x1p-10, c = 1 + 0x1p-9;
  Literal as(Shape(PrimitiveType::kF16, {3}));
  Literal cs(Shape(PrimitiveType::kF16, {3}));
  for (int i = 0; i < 3; ++i) {
    as.mutable_data<hlo::F16>()[i] = hlo::F16(static_cast<float>(a));
    cs.mutable_data<hlo::F16>()[i] = hlo::F16(static_cast<float>(c));
  }
  auto result = Run({as, cs});
  ASSERT_TRUE(result.ok()) << result.status();
  const double fused = ActiveXlaCpuTarget().avx512fp16 ? 0x1p-20 : 0;
  EXPECT_THAT(hlo::testutil::DoubleValues(result->elements()[0]),
              ElementsAre(fused, fused, fused));
  EXPECT_THAT(hlo::testutil::DoubleValues(result->elements()[1]),
              ElementsAre(0, 0, 0));
}

TEST_F(EvaluatorTest, RunsElementwiseArithmetic) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  sum = f32[3] add(a, b)
  ROOT product = f32[3] multiply(sum, b)
})")
                  .ok());
  auto result = Run({F32({3}, {1, 2, 3}), F32({3}, {10, 20, 30})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(110, 440, 990));
}

TEST_F(EvaluatorTest, RefusesArgumentsOfTheWrongShapeNamingTheParameter) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  p0 = f32[8,4] parameter(0)
  p1 = f32[4,8] parameter(1)
  ROOT d = f32[8,8] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})")
                  .ok());
  auto result = Run({Literal(Shape(PrimitiveType::kF32, {8, 4})),
                     Literal(Shape(PrimitiveType::kF32, {8, 4}))});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr("parameter 1 ('p1'): expected f32[4,8], got f32[8,4]"));
}

TEST_F(EvaluatorTest, RefusesTheWrongNumberOfArguments) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  ROOT p0 = f32[2] parameter(0)
})")
                  .ok());
  auto result = Run({});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("takes 1 arguments, got 0"));
}

TEST_F(EvaluatorTest, BuildsTuplesAndReadsTheirElements) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = f32[2] parameter(0)
  b = f32[1] parameter(1)
  t = (f32[2], f32[1]) tuple(a, b)
  x = f32[1] get-tuple-element(t), index=1
  y = f32[2] get-tuple-element(t), index=0
  ROOT r = (f32[1], f32[2], (f32[2], f32[1])) tuple(x, y, t)
})")
                  .ok());
  auto result = Run({F32({2}, {1, 2}), F32({1}, {3})});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->elements().size(), 3u);
  EXPECT_THAT(Values(result->elements()[0]), ElementsAre(3));
  EXPECT_THAT(Values(result->elements()[1]), ElementsAre(1, 2));
  EXPECT_THAT(Values(result->elements()[2].elements()[0]), ElementsAre(1, 2));
}

TEST_F(EvaluatorTest, FusionAndCallEvaluateTheirComputations) {
  ASSERT_TRUE(Load(R"(
HloModule m
fused {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  ROOT s = f32[2] subtract(p0, p1)
}
callee {
  q = f32[2] parameter(0)
  ROOT n = f32[2] negate(q)
}
ENTRY main {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  f = f32[2] fusion(a, b), kind=kLoop, calls=fused
  ROOT c = f32[2] call(f), to_apply=callee
})")
                  .ok());
  auto result = Run({F32({2}, {5, 7}), F32({2}, {1, 2})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(-4, -5));
}

TEST_F(EvaluatorTest, AValuePassedTwiceToACallIsReadBothTimes) {
  ASSERT_TRUE(Load(R"(
HloModule m
fused {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  ROOT s = f32[2] add(p0, p1)
}
identity {
  ROOT q = f32[2] parameter(0)
}
ENTRY main {
  a = f32[2] parameter(0)
  n = f32[2] negate(a)
  i = f32[2] call(n), to_apply=identity
  f = f32[2] fusion(i, i), kind=kLoop, calls=fused
  ROOT t = (f32[2], f32[2]) tuple(f, a)
})")
                  .ok());
  auto result = Run({F32({2}, {1, 2})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(result->elements()[0]), ElementsAre(-2, -4));
  EXPECT_THAT(Values(result->elements()[1]), ElementsAre(1, 2));
}

TEST_F(EvaluatorTest, ConstantsAndParametersCanBeTheRoot) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  a = f32[2] parameter(0)
  c = f32[2] constant({7, 8})
  ROOT t = (f32[2], f32[2]) tuple(a, c)
})")
                  .ok());
  for (int run = 0; run < 2; ++run) {
    auto result = Run({F32({2}, {1, 2})});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(Values(result->elements()[0]), ElementsAre(1, 2));
    EXPECT_THAT(Values(result->elements()[1]), ElementsAre(7, 8));
  }
}

TEST_F(EvaluatorTest, WhileLoopRunsUntilItsConditionIsFalse) {
  ASSERT_TRUE(Load(R"(
HloModule m
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] constant(10)
  ROOT lt = pred[] compare(i, limit), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  doubled = f32[2] add(x, x)
  ROOT t = (s32[], f32[2]) tuple(next, doubled)
}
ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  w = (s32[], f32[2]) while(init), condition=cond, body=body
  ROOT out = f32[2] get-tuple-element(w), index=1
})")
                  .ok());
  auto result = Run({F32({2}, {1, 3})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(1024, 3072));
}

constexpr char kPredConditional[] = R"(
HloModule m
on_true {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}
on_false {
  b = f32[2] parameter(0)
  ROOT e = f32[2] add(b, b)
}
ENTRY main {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(p, x, x), true_computation=on_true, false_computation=on_false
})";

TEST_F(EvaluatorTest, PredConditionalTakesTheTrueBranch) {
  ASSERT_TRUE(Load(kPredConditional).ok());
  auto result =
      Run({Literal::Scalar(PrimitiveType::kPred, true), F32({2}, {1, 2})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(-1, -2));
}

TEST_F(EvaluatorTest, PredConditionalTakesTheFalseBranch) {
  ASSERT_TRUE(Load(kPredConditional).ok());
  auto result =
      Run({Literal::Scalar(PrimitiveType::kPred, false), F32({2}, {1, 2})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(2, 4));
}

constexpr char kIndexConditional[] = R"(
HloModule m
b0 {
  a = f32[] parameter(0)
  ROOT r = f32[] negate(a)
}
b1 {
  a = f32[] parameter(0)
  ROOT r = f32[] add(a, a)
}
b2 {
  a = f32[] parameter(0)
  ROOT r = f32[] multiply(a, a)
}
ENTRY main {
  i = s32[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(i, x, x, x), branch_computations={b0, b1, b2}
})";

TEST_F(EvaluatorTest, IndexConditionalRunsTheIndexedBranch) {
  ASSERT_TRUE(Load(kIndexConditional).ok());
  auto result = Run({Literal::Scalar(PrimitiveType::kS32, 1),
                     Literal::Scalar(PrimitiveType::kF32, 3)});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->GetAsDouble(0), 6);
}

TEST_F(EvaluatorTest, OutOfRangeConditionalIndexRunsTheLastBranch) {
  ASSERT_TRUE(Load(kIndexConditional).ok());
  for (int32_t index : {-1, 3, 100}) {
    auto result = Run({Literal::Scalar(PrimitiveType::kS32, index),
                       Literal::Scalar(PrimitiveType::kF32, 3)});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->GetAsDouble(0), 9) << "index " << index;
  }
}

TEST_F(EvaluatorTest, PartitionAndReplicaIdsComeFromTheRunContext) {
  ASSERT_TRUE(Load(R"(
HloModule m, num_partitions=4
ENTRY main {
  p = u32[] partition-id()
  r = u32[] replica-id()
  ROOT t = (u32[], u32[]) tuple(p, r)
})")
                  .ok());
  auto result = Run({}, RunContext{.partition_id = 3, .replica_id = 0});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->elements()[0].data<uint32_t>()[0], 3u);
  EXPECT_EQ(result->elements()[1].data<uint32_t>()[0], 0u);
}

TEST_F(EvaluatorTest, AOnePartitionModuleReadsPartitionIdZeroOnAnyDevice) {
  // XLA compiles such a module for one device; run on device 3, its
  // partition-id and replica-id are 0 (checked with JAX 0.10.2).
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  p = u32[] partition-id()
  r = u32[] replica-id()
  ROOT t = (u32[], u32[]) tuple(p, r)
})")
                  .ok());
  auto result = Run({}, RunContext{.partition_id = 3, .replica_id = 2});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->elements()[0].data<uint32_t>()[0], 0u);
  EXPECT_EQ(result->elements()[1].data<uint32_t>()[0], 0u);
}

TEST_F(EvaluatorTest, OptBarrierAndAfterAllPassValuesThrough) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  tok = token[] after-all()
  t = (f32[2], token[]) tuple(x, tok)
  b = (f32[2], token[]) opt-barrier(t)
  ROOT y = f32[2] get-tuple-element(b), index=0
})")
                  .ok());
  auto result = Run({F32({2}, {4, 5})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(4, 5));
}

TEST_F(EvaluatorTest, SingleDeviceCollectivesRunWithoutPeers) {
  ASSERT_TRUE(Load(R"(
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add
})")
                  .ok());
  auto result = Run({F32({2}, {1, 2})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(1, 2));
}

TEST_F(EvaluatorTest, ErrorsNameTheInstructionItsLineAndComputation) {
  ASSERT_TRUE(Load(R"(
HloModule m, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT ar.7 = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
})")
                  .ok());
  auto result = Run({F32({2}, {1, 2})});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("in instruction 'ar.7' (line 10) of computation "
                        "'main': "));
}

TEST_F(EvaluatorTest, ErrorsInsideCalledComputationsNameBothLevels) {
  ASSERT_TRUE(Load(R"(
HloModule m, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
inner {
  y = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(y), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT c = f32[2] call(x), to_apply=inner
})")
                  .ok());
  auto result = Run({F32({2}, {1, 2})});
  EXPECT_THAT(result.status().message(),
              HasSubstr("in instruction 'c' (line 14) of computation 'main': "
                        "in instruction 'ar' (line 10) of computation "
                        "'inner'"));
}

TEST_F(EvaluatorTest, CreateRefusesCustomCallsNamingTheLine) {
  auto status = Load(R"(
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  ROOT cc = f32[2] custom-call(x), custom_call_target="foo"
})");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("'cc' (line 5)"));
  EXPECT_THAT(status.message(), HasSubstr("custom-call"));
}

// add(acc, dot) with the dot used once runs as one accumulating dot; the
// values are small integers, so both orders of summation are exact.
TEST_F(EvaluatorTest, AnAddOfADotUsedOnceRunsAsOneAccumulatingDot) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = f32[2,3] parameter(0)
  w = f32[3,2] parameter(1)
  acc = f32[2,2] parameter(2)
  d = f32[2,2] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT sum = f32[2,2] add(acc, d)
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 1);
  Literal acc = F32({2, 2}, {100, 200, 300, 400});
  auto result = Run(
      {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {1, 0, 0, 1, 1, 1}), acc});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(104, 205, 310, 411));
  // The caller's accumulator is left as it was.
  EXPECT_THAT(Values(acc), ElementsAre(100, 200, 300, 400));
}

TEST_F(EvaluatorTest, AnAccumulatorComputedInTheProgramIsFusedToo) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = f32[2,2] parameter(0)
  acc = f32[2,2] multiply(x, x)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT sum = f32[2,2] add(d, acc)
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 1);
  auto result = Run({F32({2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(result.ok()) << result.status();
  // x.x = [7 10; 15 22], x*x = [1 4; 9 16].
  EXPECT_THAT(Values(*result), ElementsAre(8, 14, 24, 38));
}

// XLA wraps a lone add in a loop fusion (a scan's gradient accumulation):
// that fusion is an add too.
TEST_F(EvaluatorTest, AFusionThatIsOnlyAnAddOfADotIsFused) {
  ASSERT_TRUE(Load(R"(
HloModule m
wrapped_add {
  p0 = f32[2,2] parameter(0)
  p1 = f32[2,2] parameter(1)
  ROOT a = f32[2,2] add(p1, p0)
}
ENTRY main {
  x = f32[2,2] parameter(0)
  acc = f32[2,2] parameter(1)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT sum = f32[2,2] fusion(acc, d), kind=kLoop, calls=wrapped_add
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 1);
  auto result = Run({F32({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 1, 1, 1})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(8, 11, 16, 23));
}

TEST_F(EvaluatorTest, AFusionThatDoesMoreThanAddIsNotFused) {
  ASSERT_TRUE(Load(R"(
HloModule m
add_twice {
  p0 = f32[2,2] parameter(0)
  p1 = f32[2,2] parameter(1)
  a = f32[2,2] add(p0, p1)
  ROOT b = f32[2,2] add(a, p1)
}
ENTRY main {
  x = f32[2,2] parameter(0)
  acc = f32[2,2] parameter(1)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT sum = f32[2,2] fusion(acc, d), kind=kLoop, calls=add_twice
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 0);
  auto result = Run({F32({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 1, 1, 1})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(15, 21, 31, 45));
}

TEST_F(EvaluatorTest, ADotWithAnotherUserOrAsRootIsNotFused) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = f32[2,2] parameter(0)
  acc = f32[2,2] parameter(1)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  sum = f32[2,2] add(acc, d)
  ROOT t = (f32[2,2], f32[2,2]) tuple(sum, d)
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 0);
  auto result = Run({F32({2, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 1, 1, 1})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(result->elements()[0]), ElementsAre(8, 11, 16, 23));
  EXPECT_THAT(Values(result->elements()[1]), ElementsAre(7, 10, 15, 22));
}

TEST_F(EvaluatorTest, ADotOfOtherTypesIsNotFused) {
  ASSERT_TRUE(Load(R"(
HloModule m
ENTRY main {
  x = bf16[2,2] parameter(0)
  acc = f32[2,2] parameter(1)
  d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT sum = f32[2,2] add(acc, d)
})")
                  .ok());
  EXPECT_EQ(evaluator_->num_dot_add_fusions(), 0);
}

// A scan: a while loop writing row i of a carried f32[64,256] (64 KiB)
// buffer each iteration, with the update inside a fusion (as XLA emits it)
// or as a plain instruction.
std::string ScanModule(bool fused) {
  const std::string update =
      fused ? "upd = f32[64,256] fusion(buf, row, i), kind=kLoop, calls=dus"
            : "upd = f32[64,256] dynamic-update-slice(buf, row, i, zero)";
  // The state's last element is read after the buffer, so the buffer's
  // read is not the last use of the state tuple.
  return R"(
HloModule scan
dus {
  b = f32[64,256] parameter(0)
  r = f32[1,256] parameter(1)
  j = s32[] parameter(2)
  z = s32[] constant(0)
  ROOT u = f32[64,256] dynamic-update-slice(b, r, j, z)
}
body {
  p = (s32[], f32[64,256], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  buf = f32[64,256] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  fi = f32[] convert(i)
  row = f32[1,256] broadcast(fi), dimensions={}
  zero = s32[] constant(0)
  )" + update + R"(
  k = s32[] get-tuple-element(p), index=2
  ROOT t = (s32[], f32[64,256], s32[]) tuple(next, upd, k)
}
cond {
  p = (s32[], f32[64,256], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(64)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY main {
  buf = f32[64,256] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[64,256], s32[]) tuple(zero, buf, zero)
  w = (s32[], f32[64,256], s32[]) while(init), condition=cond, body=body
  ROOT out = f32[64,256] get-tuple-element(w), index=1
})";
}

// Large buffers come from BlockPool: counting its allocations shows whether
// the carry was copied each iteration (64 allocations) or updated in place.
void ExpectScanUpdatesItsCarryInPlace(const Evaluator& evaluator) {
  std::vector<Literal> arguments = {F32({64, 256}, {})};
  const Literal& buf = arguments[0];
  const BlockPoolStats before = BlockPool::Global().Stats();
  absl::StatusOr<Literal> result = evaluator.Run(arguments, {});
  const BlockPoolStats after = BlockPool::Global().Stats();
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<float> values = Values(*result);
  for (int64_t r = 0; r < 64; ++r) {
    EXPECT_EQ(values[r * 256], static_cast<float>(r));
    EXPECT_EQ(values[r * 256 + 255], static_cast<float>(r));
  }
  // The caller's buffer is untouched: the first update copies it, once.
  EXPECT_THAT(Values(buf), ::testing::Each(0.0f));
  const int64_t large_allocations = (after.allocated - before.allocated) +
                                    (after.reused - before.reused);
  EXPECT_LE(large_allocations, 2);
}

TEST_F(EvaluatorTest, AScanUpdatesItsCarriedBufferInPlace) {
  ASSERT_TRUE(Load(ScanModule(/*fused=*/false)).ok());
  ExpectScanUpdatesItsCarryInPlace(*evaluator_);
}

TEST_F(EvaluatorTest, AScanWhoseUpdateIsAFusionUpdatesItsCarryInPlace) {
  ASSERT_TRUE(Load(ScanModule(/*fused=*/true)).ok());
  ExpectScanUpdatesItsCarryInPlace(*evaluator_);
}

TEST_F(EvaluatorTest, RunIsSafeFromManyThreadsAtOnce) {
  ASSERT_TRUE(Load(R"(
HloModule m, num_partitions=8
ENTRY main {
  x = f32[4] parameter(0)
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[4] broadcast(pf), dimensions={}
  ROOT y = f32[4] add(x, b)
})")
                  .ok());
  std::vector<absl::StatusOr<Literal>> results(8);
  std::vector<std::thread> threads;
  for (int64_t p = 0; p < 8; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < 100; ++i) {
        results[p] =
            Run({F32({4}, {1, 2, 3, 4})}, RunContext{.partition_id = p});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int64_t p = 0; p < 8; ++p) {
    ASSERT_TRUE(results[p].ok()) << results[p].status();
    const float f = static_cast<float>(p);
    EXPECT_THAT(Values(*results[p]), ElementsAre(1 + f, 2 + f, 3 + f, 4 + f));
  }
}

}  // namespace evaluator_test
}  // namespace causeway::exec
