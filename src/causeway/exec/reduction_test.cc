// Tests for reduce, reduce-window, select-and-scatter and sort. Expected
// values come from JAX 0.10.2 (jnp.sum/max/argmax/cumsum/sort/argsort,
// lax.reduce_window and its gradient) on the same inputs: element i of an
// input filled with `seed` is ((7 * i + seed) % 11) - 5.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "causeway/exec/kernels.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace reduction_test {

using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAreArray;
using hlo::testutil::Array;
using hlo::testutil::DoubleValues;

Literal Fill(PrimitiveType type, std::vector<int64_t> dims, int64_t seed) {
  Literal literal{Shape(type, std::move(dims))};
  hlo::VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    auto data = literal.mutable_data<E>();
    for (size_t i = 0; i < data.size(); ++i) {
      float v =
          static_cast<float>((static_cast<int64_t>(i) * 7 + seed) % 11 - 5);
      if constexpr (std::is_same_v<E, hlo::BF16> ||
                    std::is_same_v<E, hlo::F16>) {
        data[i] = E(v);
      } else {
        data[i] = static_cast<E>(v);
      }
    }
  });
  return literal;
}

// Computations shared by the tests.
constexpr char kComputations[] = R"(
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}
%add_commuted (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%b, %a)
}
%add_bf16 (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %sum = bf16[] add(%a, %b)
}
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] maximum(%a, %b)
}
%ge (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(%a, %b), direction=GE
}
%le_swapped (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = pred[] compare(%b, %a), direction=LE
}
%sub_then_abs (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %d = s32[] subtract(%a, %b)
  ROOT %r = s32[] abs(%d)
}
%popcount_sum (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %p = s32[] popcnt(%b)
  ROOT %r = s32[] add(%a, %p)
}
%argmax (a: f32[], ai: s32[], b: f32[], bi: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %ai = s32[] parameter(1)
  %b = f32[] parameter(2)
  %bi = s32[] parameter(3)
  %ne = pred[] compare(%a, %a), direction=NE
  %gt = pred[] compare(%a, %b), direction=GT
  %eq = pred[] compare(%a, %b), direction=EQ
  %lt = pred[] compare(%ai, %bi), direction=LT
  %or = pred[] or(%gt, %ne)
  %and = pred[] and(%eq, %lt)
  %v = f32[] select(%or, %a, %b)
  %or2 = pred[] or(%or, %and)
  %i = s32[] select(%or2, %ai, %bi)
  ROOT %t = (f32[], s32[]) tuple(%v, %i)
}
%jax_lt (x: f32[], y: f32[], xi: s32[], yi: s32[]) -> pred[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  %xi = s32[] parameter(2)
  %yi = s32[] parameter(3)
  %nan = f32[] constant(nan)
  %zero = f32[] constant(0)
  %izero = s32[] constant(0)
  %imax = s32[] constant(2147483647)
  %xnan = pred[] compare(%x, %x), direction=NE
  %ynan = pred[] compare(%y, %y), direction=NE
  %xz = pred[] compare(%x, %zero), direction=EQ
  %yz = pred[] compare(%y, %zero), direction=EQ
  %x1 = f32[] select(%xz, %zero, %x)
  %y1 = f32[] select(%yz, %zero, %y)
  %x2 = f32[] select(%xnan, %nan, %x1)
  %y2 = f32[] select(%ynan, %nan, %y1)
  %xb = s32[] bitcast-convert(%x2)
  %yb = s32[] bitcast-convert(%y2)
  %xf = s32[] xor(%imax, %xb)
  %xneg = pred[] compare(%xb, %izero), direction=LT
  %yf = s32[] xor(%imax, %yb)
  %yneg = pred[] compare(%yb, %izero), direction=LT
  %xk = s32[] select(%xneg, %xf, %xb)
  %yk = s32[] select(%yneg, %yf, %yb)
  ROOT %lt = pred[] compare(%xk, %yk), direction=LT
}
%s32_gt (a: s32[], b: s32[], ai: s32[], bi: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %ai = s32[] parameter(2)
  %bi = s32[] parameter(3)
  ROOT %gt = pred[] compare(%a, %b), direction=GT
}
%by_parity_then_value (a: s32[], b: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %one = s32[] constant(1)
  %pa = s32[] and(%a, %one)
  %pb = s32[] and(%b, %one)
  %plt = pred[] compare(%pa, %pb), direction=LT
  %peq = pred[] compare(%pa, %pb), direction=EQ
  %vlt = pred[] compare(%a, %b), direction=LT
  %both = pred[] and(%peq, %vlt)
  ROOT %r = pred[] or(%plt, %both)
}
)";

class ReductionTest : public ::testing::Test {
 protected:
  // Parses the shared computations plus an ENTRY holding `body`; returns
  // the entry's root.
  const Instruction& Parse(const std::string& params, const std::string& body) {
    std::string text = std::string("HloModule test\n") + kComputations +
                       "ENTRY %main (" + params + ") -> f32[] {\n" + body +
                       "\n}\n";
    absl::StatusOr<std::unique_ptr<hlo::Module>> module =
        hlo::ParseModule(text);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) std::abort();
    module_ = std::move(*module);
    return *module_->entry()->root();
  }

  // Fails the test when a kernel falls back to the evaluator.
  ComputationRunner NoRunner() {
    return [](const hlo::Computation& c,
              std::span<const Literal>) -> absl::StatusOr<Literal> {
      ADD_FAILURE() << "runner called for " << c.name();
      return absl::InternalError("runner called");
    };
  }

  std::unique_ptr<hlo::Module> module_;
};

TEST_F(ReductionTest, SumsOverSeveralDimensions) {
  const Instruction& reduce = Parse("x: f32[2,3,4]", R"(
  %x = f32[2,3,4] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[3] reduce(%x, %zero), dimensions={0,2}, to_apply=%add)");
  Literal x = Fill(PrimitiveType::kF32, {2, 3, 4}, 1);
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  const Literal* operands[] = {&x, &zero};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-8, 7, 0}));
}

TEST_F(ReductionTest, TakesTheMaximumOverAMiddleDimension) {
  const Instruction& reduce = Parse("x: f32[2,3,4]", R"(
  %x = f32[2,3,4] parameter(0)
  %init = f32[] constant(-inf)
  ROOT %r = f32[2,4] reduce(%x, %init), dimensions={1}, to_apply=%max)");
  Literal x = Fill(PrimitiveType::kF32, {2, 3, 4}, 1);
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({2, 4, 5, 1, 4, 5, 1, 3}));
}

TEST_F(ReductionTest, SumsLongRowsExactly) {
  const Instruction& reduce = Parse("x: f32[2,1000]", R"(
  %x = f32[2,1000] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[2] reduce(%x, %zero), dimensions={1}, to_apply=%add)");
  Literal x{Shape(PrimitiveType::kF32, {2, 1000})};
  for (int i = 0; i < 2000; ++i)
    x.mutable_data<float>()[i] = i % 7 + (i >= 1000 ? 1 : 0);
  Literal init = Literal::Scalar(PrimitiveType::kF32, 0.5);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  double row0 = 0.5, row1 = 0.5;
  for (int i = 0; i < 1000; ++i) row0 += i % 7;
  for (int i = 1000; i < 2000; ++i) row1 += i % 7 + 1;
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({row0, row1}));
}

TEST_F(ReductionTest, PropagatesNanThroughALongMaxReduction) {
  const Instruction& reduce = Parse("x: f32[300]", R"(
  %x = f32[300] parameter(0)
  %init = f32[] constant(-inf)
  ROOT %r = f32[] reduce(%x, %init), dimensions={0}, to_apply=%max)");
  Literal x{Shape(PrimitiveType::kF32, {300})};
  for (int i = 0; i < 300; ++i) x.mutable_data<float>()[i] = i;
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->data<float>()[0], 299.0f);
  x.mutable_data<float>()[77] = std::numeric_limits<float>::quiet_NaN();
  result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(std::isnan(result->data<float>()[0]));
}

TEST_F(ReductionTest, RecognisesACommutedAdder) {
  const Instruction& reduce = Parse("x: f32[2,3,4]", R"(
  %x = f32[2,3,4] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(%x, %zero), dimensions={0,1,2}, to_apply=%add_commuted)");
  Literal x = Fill(PrimitiveType::kF32, {2, 3, 4}, 1);
  Literal init = Literal::Scalar(PrimitiveType::kF32, 10);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({-8 + 7 + 0 + 10}));
}

TEST_F(ReductionTest, RoundsEachStepOfABf16Reducer) {
  const Instruction& reduce = Parse("x: bf16[3]", R"(
  %x = bf16[3] parameter(0)
  %zero = bf16[] constant(0)
  ROOT %r = bf16[] reduce(%x, %zero), dimensions={0}, to_apply=%add_bf16)");
  // 256 + 1 rounds back to 256 in bf16 (8 significant bits) each time.
  Literal x{Shape(PrimitiveType::kBF16, {3})};
  auto data = x.mutable_data<hlo::BF16>();
  data[0] = hlo::BF16(256.0f);
  data[1] = hlo::BF16(1.0f);
  data[2] = hlo::BF16(1.0f);
  Literal zero = Literal::Scalar(PrimitiveType::kBF16, 0);
  const Literal* operands[] = {&x, &zero};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->GetAsDouble(0), 256.0);
}

TEST_F(ReductionTest, ComputesAVariadicArgmax) {
  const Instruction& reduce = Parse("x: f32[4,6], i: s32[4,6]", R"(
  %x = f32[4,6] parameter(0)
  %i = s32[4,6] parameter(1)
  %init = f32[] constant(-inf)
  %izero = s32[] constant(0)
  ROOT %r = (f32[4], s32[4]) reduce(%x, %i, %init, %izero), dimensions={1}, to_apply=%argmax)");
  Literal x = Fill(PrimitiveType::kF32, {4, 6}, 2);
  Literal iota{Shape(PrimitiveType::kS32, {4, 6})};
  for (int i = 0; i < 24; ++i) iota.mutable_data<int32_t>()[i] = i % 6;
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  Literal izero = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* operands[] = {&x, &iota, &init, &izero};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->elements().size(), 2u);
  EXPECT_THAT(DoubleValues(result->elements()[1]), ElementsAreArray({1, 3, 0, 2}));
  EXPECT_THAT(DoubleValues(result->elements()[0]), ElementsAreArray({4, 5, 4, 5}));
}

TEST_F(ReductionTest, ComputesAnArgmaxOverManyRowsInBatches) {
  const Instruction& reduce = Parse("x: f32[20,7], i: s32[20,7]", R"(
  %x = f32[20,7] parameter(0)
  %i = s32[20,7] parameter(1)
  %init = f32[] constant(-inf)
  %izero = s32[] constant(0)
  ROOT %r = (f32[20], s32[20]) reduce(%x, %i, %init, %izero), dimensions={1}, to_apply=%argmax)");
  Literal x = Fill(PrimitiveType::kF32, {20, 7}, 3);
  Literal iota{Shape(PrimitiveType::kS32, {20, 7})};
  for (int i = 0; i < 140; ++i) iota.mutable_data<int32_t>()[i] = i % 7;
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  Literal izero = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* operands[] = {&x, &iota, &init, &izero};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(result->elements()[1]),
              ElementsAreArray({1, 5, 1, 2, 6, 2, 3, 2, 0, 4,
                                0, 1, 5, 1, 2, 6, 2, 3, 2, 0}));
  EXPECT_THAT(DoubleValues(result->elements()[0]),
              ElementsAreArray({5, 5, 4, 5, 5, 4, 5, 3, 5, 5,
                                4, 5, 5, 4, 5, 5, 4, 5, 3, 5}));
}

TEST_F(ReductionTest, RunsANonAssociativeReducerInRowMajorOrder) {
  const Instruction& reduce = Parse("x: s32[2,3]", R"(
  %x = s32[2,3] parameter(0)
  %zero = s32[] constant(0)
  ROOT %r = s32[2] reduce(%x, %zero), dimensions={1}, to_apply=%sub_then_abs)");
  Literal x = Array<int32_t>(PrimitiveType::kS32, {2, 3}, {5, 2, 10, 1, 7, 3});
  Literal init = Literal::Scalar(PrimitiveType::kS32, 4);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  // |||4-5|-2|-10| = 9; |||4-1|-7|-3| = 1.
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({9, 1}));
}

TEST_F(ReductionTest, FallsBackToTheRunnerForUnknownInstructions) {
  const Instruction& reduce = Parse("x: s32[4]", R"(
  %x = s32[4] parameter(0)
  %zero = s32[] constant(0)
  ROOT %r = s32[] reduce(%x, %zero), dimensions={0}, to_apply=%popcount_sum)");
  Literal x = Array<int32_t>(PrimitiveType::kS32, {4}, {1, 3, 7, 255});
  Literal zero = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* operands[] = {&x, &zero};
  int calls = 0;
  ComputationRunner runner =
      [&](const hlo::Computation& c,
          std::span<const Literal> args) -> absl::StatusOr<Literal> {
    ++calls;
    EXPECT_EQ(c.name(), "popcount_sum");
    int32_t a = args[0].data<int32_t>()[0], b = args[1].data<int32_t>()[0];
    return Literal::Scalar(PrimitiveType::kS32, a + __builtin_popcount(b));
  };
  absl::StatusOr<Literal> result = EvalReduce(reduce, operands, runner);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(result->data<int32_t>()[0], 1 + 2 + 3 + 8);
}

TEST_F(ReductionTest, PassesRunnerErrorsThrough) {
  const Instruction& reduce = Parse("x: s32[4]", R"(
  %x = s32[4] parameter(0)
  %zero = s32[] constant(0)
  ROOT %r = s32[] reduce(%x, %zero), dimensions={0}, to_apply=%popcount_sum)");
  Literal x = Array<int32_t>(PrimitiveType::kS32, {4}, {1, 3, 7, 255});
  Literal zero = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* operands[] = {&x, &zero};
  ComputationRunner failing =
      [](const hlo::Computation&,
         std::span<const Literal>) -> absl::StatusOr<Literal> {
    return absl::CancelledError("stop");
  };
  EXPECT_EQ(EvalReduce(reduce, operands, failing).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(ReductionTest, RejectsDimensionsOutOfRange) {
  const Instruction& reduce = Parse("x: f32[2,3]", R"(
  %x = f32[2,3] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[2] reduce(%x, %zero), dimensions={1}, to_apply=%add)");
  Literal x =
      Fill(PrimitiveType::kF32, {2, 3, 4}, 1);  // Not the declared shape.
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  const Literal* operands[] = {&x, &zero};
  EXPECT_EQ(EvalReduce(reduce, operands, NoRunner()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ReductionTest, ComputesACumulativeSumWithReduceWindow) {
  const Instruction& rw = Parse("x: f32[2,5]", R"(
  %x = f32[2,5] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[2,5] reduce-window(%x, %zero), window={size=1x5 pad=0_0x4_0}, to_apply=%add)");
  Literal x = Fill(PrimitiveType::kF32, {2, 5}, 3);
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  const Literal* operands[] = {&x, &zero};
  absl::StatusOr<Literal> result = EvalReduceWindow(rw, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({-2, 3, 4, 1, 5, 0, -4, -1, -2, -7}));
}

TEST_F(ReductionTest, MaxPoolsWithStridesAndPadding) {
  const Instruction& rw = Parse("x: f32[1,5,5,1]", R"(
  %x = f32[1,5,5,1] parameter(0)
  %init = f32[] constant(-inf)
  ROOT %r = f32[1,3,3,1] reduce-window(%x, %init), window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=%max)");
  Literal x = Fill(PrimitiveType::kF32, {1, 5, 5, 1}, 4);
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  const Literal* operands[] = {&x, &init};
  absl::StatusOr<Literal> result = EvalReduceWindow(rw, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({1, 4, 5, 5, 4, 0, 3, -1, 2}));
}

TEST_F(ReductionTest, DilatesBaseAndWindowInReduceWindow) {
  const Instruction& rw = Parse("x: f32[6]", R"(
  %x = f32[6] parameter(0)
  %zero = f32[] constant(0)
  ROOT %r = f32[11] reduce-window(%x, %zero), window={size=2 pad=1_2 lhs_dilate=2 rhs_dilate=3}, to_apply=%add)");
  Literal x = Fill(PrimitiveType::kF32, {6}, 5);
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  const Literal* operands[] = {&x, &zero};
  absl::StatusOr<Literal> result = EvalReduceWindow(rw, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({-4, 0, 3, -4, -1, 3, -5, -1, 2, -5, 0}));
}

TEST_F(ReductionTest, ComputesAVariadicReduceWindow) {
  const Instruction& rw = Parse("x: f32[6], i: s32[6]", R"(
  %x = f32[6] parameter(0)
  %i = s32[6] parameter(1)
  %init = f32[] constant(-inf)
  %izero = s32[] constant(0)
  ROOT %r = (f32[3], s32[3]) reduce-window(%x, %i, %init, %izero), window={size=2 stride=2}, to_apply=%argmax)");
  Literal x = Array<float>(PrimitiveType::kF32, {6}, {1, 3, 3, 3, 7, 2});
  Literal idx = Array<int32_t>(PrimitiveType::kS32, {6}, {0, 1, 2, 3, 4, 5});
  Literal init = Literal::Scalar(PrimitiveType::kF32, -INFINITY);
  Literal izero = Literal::Scalar(PrimitiveType::kS32, 0);
  const Literal* operands[] = {&x, &idx, &init, &izero};
  absl::StatusOr<Literal> result = EvalReduceWindow(rw, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(result->elements()[0]), ElementsAreArray({3, 3, 7}));
  EXPECT_THAT(DoubleValues(result->elements()[1]), ElementsAreArray({1, 2, 4}));
}

TEST_F(ReductionTest, ScattersTheMaxPoolGradientToTheFirstMaximum) {
  const Instruction& sas = Parse("x: f32[1,5,5,1], s: f32[1,3,3,1]", R"(
  %x = f32[1,5,5,1] parameter(0)
  %s = f32[1,3,3,1] parameter(1)
  %zero = f32[] constant(0)
  ROOT %r = f32[1,5,5,1] select-and-scatter(%x, %s, %zero), window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, select=%ge, scatter=%add)");
  Literal x = Fill(PrimitiveType::kF32, {1, 5, 5, 1}, 4);
  Literal source{Shape(PrimitiveType::kF32, {1, 3, 3, 1})};
  for (int i = 0; i < 9; ++i) source.mutable_data<float>()[i] = i;
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  absl::StatusOr<Literal> result =
      EvalSelectAndScatter(sas, x, source, zero, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({0, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0,
                                0, 0, 3, 0, 0, 4, 5, 0, 6, 7, 0, 8}));
}

TEST_F(ReductionTest, SelectsThroughAGeneralSelectComputation) {
  // compare(b, a), LE is GE written the other way round: same result as
  // the typed path, through the scalar interpreter.
  const Instruction& sas = Parse("x: f32[1,5,5,1], s: f32[1,3,3,1]", R"(
  %x = f32[1,5,5,1] parameter(0)
  %s = f32[1,3,3,1] parameter(1)
  %zero = f32[] constant(0)
  ROOT %r = f32[1,5,5,1] select-and-scatter(%x, %s, %zero), window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, select=%le_swapped, scatter=%add)");
  Literal x = Fill(PrimitiveType::kF32, {1, 5, 5, 1}, 4);
  Literal source{Shape(PrimitiveType::kF32, {1, 3, 3, 1})};
  for (int i = 0; i < 9; ++i) source.mutable_data<float>()[i] = i;
  Literal zero = Literal::Scalar(PrimitiveType::kF32, 0);
  absl::StatusOr<Literal> result =
      EvalSelectAndScatter(sas, x, source, zero, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result),
              ElementsAreArray({0, 0, 0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0,
                                0, 0, 3, 0, 0, 4, 5, 0, 6, 7, 0, 8}));
}

TEST_F(ReductionTest, SortsWithJaxsTotalOrderComparator) {
  const Instruction& sort = Parse("x: f32[2,7], i: s32[2,7]", R"(
  %x = f32[2,7] parameter(0)
  %i = s32[2,7] parameter(1)
  ROOT %s = (f32[2,7], s32[2,7]) sort(%x, %i), dimensions={1}, is_stable=true, to_apply=%jax_lt)");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Literal x = Array<float>(
      PrimitiveType::kF32, {2, 7},
      {3, nan, -1, -0.0f, 0, -INFINITY, 2, 1, 1, 0, -2, 5, nan, -nan});
  Literal idx{Shape(PrimitiveType::kS32, {2, 7})};
  for (int i = 0; i < 14; ++i) idx.mutable_data<int32_t>()[i] = i % 7;
  const Literal* operands[] = {&x, &idx};
  absl::StatusOr<Literal> result = EvalSort(sort, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(result->elements()[1]),
              ElementsAreArray({5, 2, 3, 4, 6, 0, 1, 3, 2, 0, 1, 4, 5, 6}));
  auto sorted = result->elements()[0].data<float>();
  EXPECT_EQ(sorted[0], -INFINITY);
  EXPECT_TRUE(std::signbit(sorted[2]));  // -0 stays before +0 (stable).
  EXPECT_TRUE(std::isnan(sorted[6]));
  EXPECT_TRUE(std::isnan(sorted[13]) && std::signbit(sorted[13]));
}

TEST_F(ReductionTest, SortsDescendingAndStablyOnTheFirstOperand) {
  const Instruction& sort = Parse("x: s32[6], i: s32[6]", R"(
  %x = s32[6] parameter(0)
  %i = s32[6] parameter(1)
  ROOT %s = (s32[6], s32[6]) sort(%x, %i), dimensions={0}, is_stable=true, to_apply=%s32_gt)");
  Literal x = Array<int32_t>(PrimitiveType::kS32, {6}, {1, 3, 1, 2, 3, 0});
  Literal idx = Array<int32_t>(PrimitiveType::kS32, {6}, {0, 1, 2, 3, 4, 5});
  const Literal* operands[] = {&x, &idx};
  absl::StatusOr<Literal> result = EvalSort(sort, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(result->elements()[0]),
              ElementsAreArray({3, 3, 2, 1, 1, 0}));
  EXPECT_THAT(DoubleValues(result->elements()[1]),
              ElementsAreArray({1, 4, 3, 0, 2, 5}));
}

TEST_F(ReductionTest, SortsAlongAnOuterDimensionWithAGeneralComparator) {
  const Instruction& sort = Parse("x: s32[4,2]", R"(
  %x = s32[4,2] parameter(0)
  ROOT %s = s32[4,2] sort(%x), dimensions={0}, to_apply=%by_parity_then_value)");
  Literal x =
      Array<int32_t>(PrimitiveType::kS32, {4, 2}, {5, 1, 2, 8, 7, 3, 4, 6});
  const Literal* operands[] = {&x};
  absl::StatusOr<Literal> result = EvalSort(sort, operands, NoRunner());
  ASSERT_TRUE(result.ok()) << result.status();
  // Columns {5,2,7,4} -> evens first: {2,4,5,7}; {1,8,3,6} -> {6,8,1,3}.
  EXPECT_THAT(DoubleValues(*result), ElementsAreArray({2, 6, 4, 8, 5, 1, 7, 3}));
}

TEST_F(ReductionTest, RejectsASortDimensionOutOfRange) {
  const Instruction& sort = Parse("x: s32[6], i: s32[6]", R"(
  %x = s32[6] parameter(0)
  %i = s32[6] parameter(1)
  ROOT %s = (s32[6], s32[6]) sort(%x, %i), dimensions={0}, to_apply=%s32_gt)");
  Instruction bad = sort;
  bad.dimensions = {1};
  Literal x = Array<int32_t>(PrimitiveType::kS32, {6}, {1, 3, 1, 2, 3, 0});
  const Literal* operands[] = {&x, &x};
  EXPECT_EQ(EvalSort(bad, operands, NoRunner()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace reduction_test
}  // namespace causeway::exec
