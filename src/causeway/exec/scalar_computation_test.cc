#include "causeway/exec/scalar_computation.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "causeway/hlo/parser.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace scalar_computation_test {

using hlo::ComparisonDirection;
using hlo::ComparisonType;
using hlo::PrimitiveType;

class ScalarComputationTest : public ::testing::Test {
 protected:
  // Parses a module whose entry is the computation under test.
  const hlo::Computation& Parse(const std::string& text) {
    auto module = hlo::ParseModule("HloModule test\n" + text);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) std::abort();
    module_ = std::move(*module);
    return *module_->entry();
  }

  uint64_t Run(const hlo::Computation& c, std::vector<uint64_t> args) {
    std::optional<ScalarComputation> program = ScalarComputation::Compile(c);
    EXPECT_TRUE(program.has_value());
    if (!program.has_value()) return 0;
    std::vector<uint64_t> frame = program->NewFrame();
    return program->Run1(frame, args);
  }

  std::unique_ptr<hlo::Module> module_;
};

TEST_F(ScalarComputationTest, RecognisesBinaryReducersInEitherOperandOrder) {
  const hlo::Computation& c = Parse(R"(
ENTRY %max (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %m = s32[] maximum(%b, %a)
})");
  EXPECT_EQ(MatchBinaryReducer(c), hlo::Opcode::kMaximum);
}

TEST_F(ScalarComputationTest, DoesNotTakeASubtractionForAReducer) {
  const hlo::Computation& c = Parse(R"(
ENTRY %sub (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %m = s32[] subtract(%a, %b)
})");
  EXPECT_FALSE(MatchBinaryReducer(c).has_value());
}

TEST_F(ScalarComputationTest, DividesIntegersByZeroAsXla) {
  const hlo::Computation& c = Parse(R"(
ENTRY %div (a: s32[], b: s32[]) -> (s32[], s32[]) {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  %q = s32[] divide(%a, %b)
  %r = s32[] remainder(%a, %b)
  ROOT %t = (s32[], s32[]) tuple(%q, %r)
})");
  std::optional<ScalarComputation> program = ScalarComputation::Compile(c);
  ASSERT_TRUE(program.has_value());
  std::vector<uint64_t> frame = program->NewFrame();
  uint64_t results[2];
  uint64_t args[] = {ToBits<int32_t>(7), ToBits<int32_t>(0)};
  program->Run(frame, args, results);
  EXPECT_EQ(BitsTo<int32_t>(results[0]), -1);
  EXPECT_EQ(BitsTo<int32_t>(results[1]), 7);
  uint64_t overflow[] = {ToBits(std::numeric_limits<int32_t>::min()),
                         ToBits<int32_t>(-1)};
  program->Run(frame, overflow, results);
  EXPECT_EQ(BitsTo<int32_t>(results[0]), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(BitsTo<int32_t>(results[1]), 0);
}

TEST_F(ScalarComputationTest, ConvertsAndBitcastsWithXlaRules) {
  const hlo::Computation& c = Parse(R"(
ENTRY %f (x: f32[]) -> s32[] {
  %x = f32[] parameter(0)
  %big = f32[] constant(1e10)
  %sum = f32[] add(%x, %big)
  ROOT %i = s32[] convert(%sum)
})");
  // Saturates instead of overflowing.
  EXPECT_EQ(BitsTo<int32_t>(Run(c, {ToBits(1.0f)})),
            std::numeric_limits<int32_t>::max());
}

TEST_F(ScalarComputationTest, RoundsBf16ArithmeticPerOp) {
  const hlo::Computation& c = Parse(R"(
ENTRY %f (x: bf16[], y: bf16[]) -> bf16[] {
  %x = bf16[] parameter(0)
  %y = bf16[] parameter(1)
  %s = bf16[] add(%x, %y)
  ROOT %t = bf16[] add(%s, %y)
})");
  uint64_t out = Run(c, {ToBits(hlo::BF16(256.0f)), ToBits(hlo::BF16(1.0f))});
  EXPECT_EQ(static_cast<float>(BitsTo<hlo::BF16>(out)), 256.0f);
}

TEST_F(ScalarComputationTest, RefusesInstructionsItDoesNotKnow) {
  const hlo::Computation& c = Parse(R"(
ENTRY %f (x: s32[]) -> s32[] {
  %x = s32[] parameter(0)
  ROOT %p = s32[] popcnt(%x)
})");
  EXPECT_FALSE(ScalarComputation::Compile(c).has_value());
}

TEST_F(ScalarComputationTest, RefusesNonScalarValues) {
  const hlo::Computation& c = Parse(R"(
ENTRY %f (x: f32[2]) -> f32[2] {
  %x = f32[2] parameter(0)
  ROOT %n = f32[2] negate(%x)
})");
  EXPECT_FALSE(ScalarComputation::Compile(c).has_value());
}

TEST(CompareBitsTest, OrdersFloatsTotallyWithTotalOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto lt = [](float a, float b) {
    return CompareBits(PrimitiveType::kF32, ComparisonType::kTotalOrder,
                       ComparisonDirection::kLt, ToBits(a), ToBits(b));
  };
  EXPECT_TRUE(lt(-nan, -INFINITY));
  EXPECT_TRUE(lt(-INFINITY, -1.0f));
  EXPECT_TRUE(lt(-0.0f, 0.0f));
  EXPECT_TRUE(lt(INFINITY, nan));
  EXPECT_FALSE(lt(nan, nan));
}

TEST(CompareBitsTest, UsesIeeeSemanticsByDefault) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto cmp = [](ComparisonDirection d, float a, float b) {
    return CompareBits(PrimitiveType::kF32, ComparisonType::kDefault, d,
                       ToBits(a), ToBits(b));
  };
  EXPECT_FALSE(cmp(ComparisonDirection::kLt, nan, 1.0f));
  EXPECT_TRUE(cmp(ComparisonDirection::kNe, nan, nan));
  EXPECT_TRUE(cmp(ComparisonDirection::kEq, -0.0f, 0.0f));
}

TEST(CompareBitsTest, ComparesSignedAndUnsignedIntegers) {
  EXPECT_TRUE(CompareBits(PrimitiveType::kS8, ComparisonType::kDefault,
                          ComparisonDirection::kLt, ToBits<int8_t>(-1),
                          ToBits<int8_t>(1)));
  EXPECT_FALSE(CompareBits(PrimitiveType::kU8, ComparisonType::kDefault,
                           ComparisonDirection::kLt, ToBits<uint8_t>(255),
                           ToBits<uint8_t>(1)));
}

TEST(CompareBitsTest, OrdersSubByteIntegersByTheirValue) {
  // s4 -8 is stored as 0x8 in the low nibble: above 7 as a byte, below it
  // as an s4 (the sort keys of a JAX s4 sort once ordered it as a byte).
  auto lt = [](PrimitiveType type, ComparisonType comparison, uint64_t a,
               uint64_t b) {
    return CompareBits(type, comparison, ComparisonDirection::kLt, a, b);
  };
  EXPECT_TRUE(lt(PrimitiveType::kS4, ComparisonType::kDefault, 0x8, 0x7));
  EXPECT_TRUE(lt(PrimitiveType::kS4, ComparisonType::kSigned, 0xf, 0x0));
  EXPECT_FALSE(lt(PrimitiveType::kU4, ComparisonType::kDefault, 0xf, 0x0));
  EXPECT_LT(TotalOrderKey(PrimitiveType::kS4, true, 0x8),
            TotalOrderKey(PrimitiveType::kS4, true, 0xf));
  EXPECT_LT(TotalOrderKey(PrimitiveType::kS4, true, 0xf),
            TotalOrderKey(PrimitiveType::kS4, true, 0x0));
}

TEST(CompareBitsTest, OrdersMinifloatsAsFloats) {
  // f8e4m3fn: 0x38 = 1, 0xb8 = -1, 0x80 = -0, 0x7f = NaN, 0xff = -NaN.
  auto cmp = [](ComparisonType comparison, ComparisonDirection d, uint64_t a,
                uint64_t b) {
    return CompareBits(PrimitiveType::kF8E4M3FN, comparison, d, a, b);
  };
  EXPECT_TRUE(cmp(ComparisonType::kDefault, ComparisonDirection::kLt, 0xb8,
                  0x38));
  EXPECT_TRUE(cmp(ComparisonType::kDefault, ComparisonDirection::kEq, 0x80,
                  0x00));
  EXPECT_FALSE(cmp(ComparisonType::kDefault, ComparisonDirection::kLt, 0x7f,
                   0x38));
  EXPECT_TRUE(cmp(ComparisonType::kTotalOrder, ComparisonDirection::kLt, 0x80,
                  0x00));
  EXPECT_TRUE(cmp(ComparisonType::kTotalOrder, ComparisonDirection::kLt, 0xff,
                  0xb8));
  EXPECT_TRUE(cmp(ComparisonType::kTotalOrder, ComparisonDirection::kLt, 0x38,
                  0x7f));
}

}  // namespace scalar_computation_test
}  // namespace causeway::exec
