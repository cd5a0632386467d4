#include <cmath>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "causeway/exec/evaluator.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace custom_call_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::testutil::DoubleValues;
using hlo::testutil::F32;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CustomCallTest : public ::testing::Test {
 protected:
  absl::StatusOr<Literal> Run(std::string_view text, std::vector<Literal> args) {
    auto module = hlo::ParseModule(text);
    if (!module.ok()) return module.status();
    module_ = *std::move(module);
    auto evaluator = Evaluator::Create(*module_);
    if (!evaluator.ok()) return evaluator.status();
    evaluator_ = *std::move(evaluator);
    return evaluator_->Run(args, RunContext{});
  }

  std::unique_ptr<hlo::Module> module_;
  std::unique_ptr<Evaluator> evaluator_;
};

// The comparator lax.top_k writes: greater in the total order of floats.
constexpr std::string_view kTopK = R"(
HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  zero = s32[] constant(0)
  max = s32[] constant(2147483647)
  ba = s32[] bitcast(a)
  bb = s32[] bitcast(b)
  xa = s32[] xor(max, ba)
  na = pred[] compare(ba, zero), direction=LT
  xb = s32[] xor(max, bb)
  nb = pred[] compare(bb, zero), direction=LT
  ka = s32[] select(na, xa, ba)
  kb = s32[] select(nb, xb, bb)
  ROOT c = pred[] compare(ka, kb), direction=GT
}
ENTRY main {
  x = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) custom-call(x), custom_call_target="TopK", called_computations={gt}
})";

TEST_F(CustomCallTest, TopKKeepsTheLargestByTheComparatorTiesByIndex) {
  auto result = Run(kTopK, {F32({2, 6}, {1, 5, 3, 5, -2, 4,  //
                                         0, -1, -3, 7, 7, 7})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(result->elements()[0]),
              ElementsAre(5, 5, 4, 7, 7, 7));
  EXPECT_THAT(DoubleValues(result->elements()[1]),
              ElementsAre(1, 3, 5, 3, 4, 5));
}

TEST_F(CustomCallTest, TopKInTotalOrderPutsNaNFirstAndPlusZeroBeforeMinusZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto result = Run(kTopK, {F32({2, 6}, {-0.0f, 0.0f, -inf, -1, -2, -3,  //
                                         1, inf, nan, 2, 3, 4})});
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> values = DoubleValues(result->elements()[0]);
  EXPECT_EQ(values[0], 0.0);
  EXPECT_FALSE(std::signbit(values[0]));
  EXPECT_TRUE(std::signbit(values[1]));
  EXPECT_EQ(values[2], -1);
  EXPECT_TRUE(std::isnan(values[3]));
  EXPECT_EQ(values[4], inf);
  EXPECT_EQ(values[5], 4);
  EXPECT_THAT(DoubleValues(result->elements()[1]),
              ElementsAre(1, 0, 3, 2, 1, 5));
}

TEST_F(CustomCallTest, MapAppliesItsComputationToEachElement) {
  // The reducer jnp.cumsum writes for bf16: add in f32, round to bf16.
  auto result = Run(R"(
HloModule m
add_bf16 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  r = bf16[] convert(s)
  ROOT w = f32[] convert(r)
}
ENTRY main {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT m = f32[3] map(x, y), dimensions={0}, to_apply=add_bf16
})",
                    {F32({3}, {1, 256, 0.5f}), F32({3}, {2, 1, 0.25f})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAre(3, 256, 0.75));
}

TEST_F(CustomCallTest, AnUnknownTargetIsRefusedAtCreateByName) {
  auto result = Run(R"(
HloModule m
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] custom-call(x), custom_call_target="xla_python_cpu_callback"
})",
                    {F32({2}, {1, 2})});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(result.status().message(), HasSubstr("host callback"));
  EXPECT_EQ(evaluator_, nullptr);
}

}  // namespace custom_call_test
}  // namespace causeway::exec
