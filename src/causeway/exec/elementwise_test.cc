#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/multiply_add.h"
#include "causeway/exec/xla_cpu_target.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace elementwise_test {

using hlo::BF16;
using hlo::ComparisonDirection;
using hlo::ComparisonType;
using hlo::F16;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A rank-1 literal of `type` holding `values` (converted as by `convert`).
template <typename V>
Literal Vec(PrimitiveType type, const std::vector<V>& values) {
  Literal literal(Shape(type, {static_cast<int64_t>(values.size())}));
  hlo::VisitType(type, [&](auto tag) {
    using T = decltype(tag);
    T* out = MutableDataPtr<T>(literal);
    for (size_t i = 0; i < values.size(); ++i) {
      out[i] = ConvertElement<T>(values[i]);
    }
  });
  return literal;
}

template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto span = literal.data<T>();
  return std::vector<T>(span.begin(), span.end());
}

std::vector<double> Doubles(const Literal& literal) {
  std::vector<double> out;
  for (int64_t i = 0; i < literal.shape().ElementCount(); ++i) {
    out.push_back(literal.GetAsDouble(i));
  }
  return out;
}

Instruction Instr(Opcode opcode, PrimitiveType type, int64_t n) {
  Instruction instr;
  instr.name = "test";
  instr.opcode = opcode;
  instr.shape = Shape(type, {n});
  return instr;
}

Literal Unary(Opcode opcode, const Literal& operand) {
  Instruction instr = Instr(opcode, operand.shape().type(), operand.shape().dim(0));
  absl::StatusOr<Literal> result = EvalUnary(instr, operand);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : Literal();
}

Literal Binary(Opcode opcode, const Literal& lhs, const Literal& rhs) {
  Instruction instr = Instr(opcode, lhs.shape().type(), lhs.shape().dim(0));
  absl::StatusOr<Literal> result = EvalBinary(instr, lhs, rhs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : Literal();
}

std::vector<bool> Compare(ComparisonDirection direction, ComparisonType type,
                          const Literal& lhs, const Literal& rhs) {
  Instruction instr = Instr(Opcode::kCompare, PrimitiveType::kPred,
                            lhs.shape().dim(0));
  instr.comparison_direction = direction;
  instr.comparison_type = type;
  absl::StatusOr<Literal> result = EvalCompare(instr, lhs, rhs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? Values<bool>(*result) : std::vector<bool>();
}

Literal Convert(PrimitiveType to, const Literal& operand) {
  Instruction instr = Instr(Opcode::kConvert, to, operand.shape().dim(0));
  absl::StatusOr<Literal> result = EvalConvert(instr, operand);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : Literal();
}

// Float unary ops against values computed with numpy in double precision
// and rounded to f32.
struct FloatUnaryCase {
  Opcode opcode;
  std::vector<double> input;
  std::vector<double> expected;
};

class FloatUnaryTest : public ::testing::TestWithParam<FloatUnaryCase> {};

TEST_P(FloatUnaryTest, MatchesReferenceValuesInF32) {
  const FloatUnaryCase& c = GetParam();
  std::vector<double> got = Doubles(Unary(c.opcode, Vec(PrimitiveType::kF32, c.input)));
  ASSERT_EQ(got.size(), c.expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], c.expected[i], 2e-7 * std::max(1.0, std::fabs(c.expected[i])))
        << hlo::OpcodeName(c.opcode) << " of " << c.input[i];
  }
}

const std::vector<double> kSpread = {-2.5, -0.5, 0.25, 1.0, 3.0};
const std::vector<double> kPositive = {0.25, 1.0, 3.0, 10.0};

INSTANTIATE_TEST_SUITE_P(
    Ops, FloatUnaryTest,
    ::testing::Values(
        FloatUnaryCase{Opcode::kExp, kSpread, {0.0820849985, 0.606530666, 1.28402543, 2.71828175, 20.085537}},
        FloatUnaryCase{Opcode::kExpm1, kSpread, {-0.917914987, -0.393469334, 0.284025431, 1.71828187, 19.085537}},
        FloatUnaryCase{Opcode::kTanh, kSpread, {-0.986614287, -0.462117165, 0.244918659, 0.761594176, 0.995054781}},
        FloatUnaryCase{Opcode::kLogistic, kSpread, {0.0758581832, 0.377540678, 0.562176526, 0.731058598, 0.952574134}},
        FloatUnaryCase{Opcode::kErf, kSpread, {-0.999593019, -0.520499885, 0.276326388, 0.842700779, 0.999977887}},
        FloatUnaryCase{Opcode::kSin, kSpread, {-0.598472118, -0.47942555, 0.247403964, 0.841470957, 0.141120002}},
        FloatUnaryCase{Opcode::kCos, kSpread, {-0.801143587, 0.87758255, 0.968912423, 0.540302277, -0.989992499}},
        FloatUnaryCase{Opcode::kTan, kSpread, {0.747022271, -0.546302497, 0.255341917, 1.55740774, -0.142546549}},
        FloatUnaryCase{Opcode::kCbrt, kSpread, {-1.35720885, -0.793700516, 0.629960537, 1, 1.44224954}},
        FloatUnaryCase{Opcode::kNegate, kSpread, {2.5, 0.5, -0.25, -1.0, -3.0}},
        FloatUnaryCase{Opcode::kAbs, kSpread, {2.5, 0.5, 0.25, 1.0, 3.0}},
        FloatUnaryCase{Opcode::kFloor, kSpread, {-3, -1, 0, 1, 3}},
        FloatUnaryCase{Opcode::kCeil, kSpread, {-2, -0.0, 1, 1, 3}},
        FloatUnaryCase{Opcode::kLog, kPositive, {-1.38629436, 0, 1.09861231, 2.30258512}},
        FloatUnaryCase{Opcode::kLog1p, kPositive, {0.223143548, 0.693147182, 1.38629436, 2.39789534}},
        FloatUnaryCase{Opcode::kSqrt, kPositive, {0.5, 1, 1.73205078, 3.1622777}},
        FloatUnaryCase{Opcode::kRsqrt, kPositive, {2, 1, 0.577350259, 0.316227764}}));

TEST(ElementwiseTest, F32TranscendentalsHandleInfinitiesAndNaN) {
  Literal in = Vec(PrimitiveType::kF32, std::vector<double>{kInf, -kInf, kNaN, 0.0});
  EXPECT_THAT(Doubles(Unary(Opcode::kExp, in)).at(0), kInf);
  EXPECT_THAT(Doubles(Unary(Opcode::kExp, in)).at(1), 0.0);
  std::vector<double> tanh = Doubles(Unary(Opcode::kTanh, in));
  EXPECT_EQ(tanh[0], 1.0);
  EXPECT_EQ(tanh[1], -1.0);
  EXPECT_TRUE(std::isnan(tanh[2]));
  std::vector<double> logistic = Doubles(Unary(Opcode::kLogistic, in));
  EXPECT_EQ(logistic[0], 1.0);
  EXPECT_EQ(logistic[1], 0.0);
  EXPECT_EQ(logistic[3], 0.5);
  std::vector<double> erf = Doubles(Unary(Opcode::kErf, in));
  EXPECT_EQ(erf[0], 1.0);
  EXPECT_EQ(erf[1], -1.0);
  std::vector<double> log = Doubles(Unary(Opcode::kLog, in));
  EXPECT_EQ(log[0], kInf);
  EXPECT_TRUE(std::isnan(log[1]));
  EXPECT_EQ(log[3], -kInf);
  std::vector<double> rsqrt = Doubles(Unary(Opcode::kRsqrt, in));
  EXPECT_EQ(rsqrt[0], 0.0);
  EXPECT_EQ(rsqrt[3], kInf);
  std::vector<double> sqrt = Doubles(Unary(Opcode::kSqrt, in));
  EXPECT_EQ(sqrt[0], kInf);
  EXPECT_TRUE(std::isnan(sqrt[1]));
}

TEST(ElementwiseTest, SqrtIsCorrectlyRounded) {
  std::vector<double> values;
  for (int i = 1; i <= 40; ++i) values.push_back(i * 0.37);
  std::vector<float> got = Values<float>(Unary(Opcode::kSqrt, Vec(PrimitiveType::kF32, values)));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(got[i], std::sqrt(static_cast<float>(values[i])));
  }
}

TEST(ElementwiseTest, HalfTranscendentalsComputeInF32AndRound) {
  // exp(1) = 2.71828..; bf16 has 8 significant bits: 2.71875. f16: 2.71875.
  Literal one = Vec(PrimitiveType::kBF16, std::vector<double>{1.0});
  EXPECT_THAT(Doubles(Unary(Opcode::kExp, one)), ElementsAre(2.71875));
  Literal half = Vec(PrimitiveType::kF16, std::vector<double>{1.0, 0.5});
  EXPECT_THAT(Doubles(Unary(Opcode::kExp, half)), ElementsAre(2.71875, 1.6484375));
}

TEST(ElementwiseTest, HalfLogisticRoundsEachExpandedStepAsXla) {
  // XLA expands logistic into exp, add and divide of the half type; each
  // rounds. Expected values: JAX on XLA's CPU backend.
  EXPECT_THAT(Doubles(Unary(Opcode::kLogistic, Vec(PrimitiveType::kBF16, std::vector<double>{-0.232421875}))),
              ElementsAre(0.4453125));
  EXPECT_THAT(Doubles(Unary(Opcode::kLogistic, Vec(PrimitiveType::kF16, std::vector<double>{-2.744140625}))),
              ElementsAre(0.06036376953125));
}

TEST(ElementwiseTest, F16Expm1UsesXlasFormulaInHalfPrecision) {
  // tanh(x/2) * (exp(x) + 1), each step rounded to f16 (JAX gives this).
  EXPECT_THAT(Doubles(Unary(Opcode::kExpm1, Vec(PrimitiveType::kF16, std::vector<double>{0.323486328125}))),
              ElementsAre(0.38232421875));
}

TEST(ElementwiseTest, DenormalsAreFlushedToZeroAsXlaDoes) {
  Literal a = Vec(PrimitiveType::kF32, std::vector<double>{1e-38, 3e-39});
  Literal b = Vec(PrimitiveType::kF32, std::vector<double>{0.5, 1.0});
  EXPECT_THAT(Doubles(Binary(Opcode::kMultiply, a, b)), ElementsAre(0.0, 0.0));
  EXPECT_THAT(Doubles(Unary(Opcode::kExp, Vec(PrimitiveType::kF32, std::vector<double>{-100}))),
              ElementsAre(0.0));
  // The caller's floating-point mode is restored afterwards.
  volatile float tiny = 1e-38f;
  EXPECT_GT(tiny * 0.5f, 0.0f);
}

TEST(ElementwiseTest, SignKeepsNaNAndSignedZero) {
  Literal out = Unary(Opcode::kSign, Vec(PrimitiveType::kF32, std::vector<double>{kNaN, -0.0, 0.0, -3, 2}));
  std::vector<float> v = Values<float>(out);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::signbit(v[1]) && v[1] == 0);
  EXPECT_TRUE(!std::signbit(v[2]) && v[2] == 0);
  EXPECT_EQ(v[3], -1);
  EXPECT_EQ(v[4], 1);
}

TEST(ElementwiseTest, SignOfIntegersIsMinusOneZeroOrOne) {
  Literal out = Unary(Opcode::kSign, Vec(PrimitiveType::kS32, std::vector<int64_t>{-5, 0, 3}));
  EXPECT_THAT(Values<int32_t>(out), ElementsAre(-1, 0, 1));
}

TEST(ElementwiseTest, RoundAfzRoundsHalvesAwayAndRoundEvenToEven) {
  Literal in = Vec(PrimitiveType::kF32, std::vector<double>{0.5, 1.5, 2.5, -0.5, -2.5});
  EXPECT_THAT(Doubles(Unary(Opcode::kRoundNearestAfz, in)), ElementsAre(1, 2, 3, -1, -3));
  EXPECT_THAT(Doubles(Unary(Opcode::kRoundNearestEven, in)), ElementsAre(0, 2, 2, -0.0, -2));
}

TEST(ElementwiseTest, IsFiniteMapsFloatsToPred) {
  Instruction instr = Instr(Opcode::kIsFinite, PrimitiveType::kPred, 4);
  absl::StatusOr<Literal> out = EvalUnary(
      instr, Vec(PrimitiveType::kBF16, std::vector<double>{1.0, kInf, -kInf, kNaN}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<bool>(*out), ElementsAre(true, false, false, false));
}

TEST(ElementwiseTest, NotIsLogicalForPredAndBitwiseForIntegers) {
  EXPECT_THAT(Values<bool>(Unary(Opcode::kNot, Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 0}))),
              ElementsAre(false, true));
  EXPECT_THAT(Values<uint8_t>(Unary(Opcode::kNot, Vec(PrimitiveType::kU8, std::vector<int64_t>{0, 0x0F}))),
              ElementsAre(0xFF, 0xF0));
}

TEST(ElementwiseTest, PopcntAndClzCountBitsOfTheStoredWidth) {
  Literal in = Vec(PrimitiveType::kS32, std::vector<int64_t>{0, 1, -1});
  EXPECT_THAT(Values<int32_t>(Unary(Opcode::kClz, in)), ElementsAre(32, 31, 0));
  EXPECT_THAT(Values<int32_t>(Unary(Opcode::kPopcnt, in)), ElementsAre(0, 1, 32));
  Literal bytes = Vec(PrimitiveType::kS8, std::vector<int64_t>{0, 1, -1});
  EXPECT_THAT(Values<int8_t>(Unary(Opcode::kPopcnt, bytes)), ElementsAre(0, 1, 8));
}

TEST(ElementwiseTest, NegateAndAbsOfIntMinWrap) {
  Literal in = Vec(PrimitiveType::kS8, std::vector<int64_t>{-128, -5, 7});
  EXPECT_THAT(Values<int8_t>(Unary(Opcode::kNegate, in)), ElementsAre(-128, 5, -7));
  EXPECT_THAT(Values<int8_t>(Unary(Opcode::kAbs, in)), ElementsAre(-128, 5, 7));
}

TEST(ElementwiseTest, UnaryRejectsFloatOpOnIntegers) {
  Instruction instr = Instr(Opcode::kExp, PrimitiveType::kS32, 1);
  absl::StatusOr<Literal> out = EvalUnary(instr, Vec(PrimitiveType::kS32, std::vector<int64_t>{1}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, UnaryRejectsOperandOfAnotherShape) {
  Instruction instr = Instr(Opcode::kNegate, PrimitiveType::kF32, 3);
  absl::StatusOr<Literal> out = EvalUnary(instr, Vec(PrimitiveType::kF32, std::vector<double>{1, 2}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, SignedDivisionByZeroIsMinusOneAndIntMinOverMinusOneIsIntMin) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  Literal a = Vec(PrimitiveType::kS32, std::vector<int64_t>{7, -7, kMin, 5, 0, -7});
  Literal b = Vec(PrimitiveType::kS32, std::vector<int64_t>{0, 0, -1, -2, 0, 2});
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kDivide, a, b)),
              ElementsAre(-1, -1, kMin, -2, -1, -3));
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kRemainder, a, b)),
              ElementsAre(7, -7, 0, 1, 0, -1));
}

TEST(ElementwiseTest, UnsignedDivisionByZeroIsAllOnesAndRemainderIsDividend) {
  Literal a = Vec(PrimitiveType::kU32, std::vector<int64_t>{7, 0, 9});
  Literal b = Vec(PrimitiveType::kU32, std::vector<int64_t>{0, 0, 4});
  EXPECT_THAT(Values<uint32_t>(Binary(Opcode::kDivide, a, b)),
              ElementsAre(0xFFFFFFFFu, 0xFFFFFFFFu, 2u));
  EXPECT_THAT(Values<uint32_t>(Binary(Opcode::kRemainder, a, b)), ElementsAre(7u, 0u, 1u));
}

TEST(ElementwiseTest, IntegerArithmeticWraps) {
  Literal a = Vec(PrimitiveType::kU16, std::vector<int64_t>{65535, 0, 300});
  Literal b = Vec(PrimitiveType::kU16, std::vector<int64_t>{65535, 1, 300});
  EXPECT_THAT(Values<uint16_t>(Binary(Opcode::kMultiply, a, b)), ElementsAre(1, 0, 24464));
  EXPECT_THAT(Values<uint16_t>(Binary(Opcode::kSubtract, a, b)), ElementsAre(0, 65535, 0));
  Literal c = Vec(PrimitiveType::kS8, std::vector<int64_t>{127});
  EXPECT_THAT(Values<int8_t>(Binary(Opcode::kAdd, c, c)), ElementsAre(-2));
}

TEST(ElementwiseTest, ShiftsPastTheWidthClearOrSignFill) {
  Literal x = Vec(PrimitiveType::kS32, std::vector<int64_t>{1, -8, -1, -8});
  Literal s = Vec(PrimitiveType::kS32, std::vector<int64_t>{32, 33, -1, 1});
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kShiftLeft, x, s)), ElementsAre(0, 0, 0, -16));
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kShiftRightLogical, x, s)),
              ElementsAre(0, 0, 0, 0x7FFFFFFC));
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kShiftRightArithmetic, x, s)),
              ElementsAre(0, -1, -1, -4));
}

TEST(ElementwiseTest, ArithmeticShiftOfUnsignedFillsWithTheTopBit) {
  Literal x = Vec(PrimitiveType::kU8, std::vector<int64_t>{0x80, 0x40});
  Literal s = Vec(PrimitiveType::kU8, std::vector<int64_t>{2, 2});
  EXPECT_THAT(Values<uint8_t>(Binary(Opcode::kShiftRightArithmetic, x, s)), ElementsAre(0xE0, 0x10));
}

TEST(ElementwiseTest, IntegerPowerSquaresAndZeroesNegativeExponents) {
  Literal base = Vec(PrimitiveType::kS32, std::vector<int64_t>{2, -1, 1, 3, 0, -2, 2, 5});
  Literal exp = Vec(PrimitiveType::kS32, std::vector<int64_t>{10, -1, -5, 0, 0, 3, 31, -2});
  EXPECT_THAT(Values<int32_t>(Binary(Opcode::kPower, base, exp)),
              ElementsAre(1024, 0, 1, 1, 1, -8, std::numeric_limits<int32_t>::min(), 0));
}

TEST(ElementwiseTest, FloatMaxMinPropagateNaNAndOrderSignedZeros) {
  Literal a = Vec(PrimitiveType::kF32, std::vector<double>{kNaN, 1.0, -0.0, 0.0, 2.0});
  Literal b = Vec(PrimitiveType::kF32, std::vector<double>{1.0, kNaN, 0.0, -0.0, -3.0});
  std::vector<float> mx = Values<float>(Binary(Opcode::kMaximum, a, b));
  std::vector<float> mn = Values<float>(Binary(Opcode::kMinimum, a, b));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_FALSE(std::signbit(mx[2]) || std::signbit(mx[3]));
  EXPECT_TRUE(std::signbit(mn[2]) && std::signbit(mn[3]));
  EXPECT_EQ(mx[4], 2.0f);
  EXPECT_EQ(mn[4], -3.0f);
}

TEST(ElementwiseTest, FloatRemainderIsFmod) {
  Literal a = Vec(PrimitiveType::kF32, std::vector<double>{5.5, -5.5, 1, kInf});
  Literal b = Vec(PrimitiveType::kF32, std::vector<double>{2, 2, 0, 1});
  std::vector<double> r = Doubles(Binary(Opcode::kRemainder, a, b));
  EXPECT_EQ(r[0], 1.5);
  EXPECT_EQ(r[1], -1.5);
  EXPECT_TRUE(std::isnan(r[2]) && std::isnan(r[3]));
}

TEST(ElementwiseTest, FloatPowerAndAtan2FollowTheCLibrary) {
  Literal a = Vec(PrimitiveType::kF64, std::vector<double>{2, -8, 0.5});
  Literal b = Vec(PrimitiveType::kF64, std::vector<double>{10, 1.0 / 3, -2});
  std::vector<double> p = Doubles(Binary(Opcode::kPower, a, b));
  EXPECT_EQ(p[0], 1024);
  EXPECT_TRUE(std::isnan(p[1]));
  EXPECT_EQ(p[2], 4);
  Literal y = Vec(PrimitiveType::kF64, std::vector<double>{1, -1, 0});
  Literal x = Vec(PrimitiveType::kF64, std::vector<double>{0, -1, -1});
  EXPECT_THAT(Doubles(Binary(Opcode::kAtan2, y, x)),
              ElementsAre(M_PI / 2, -3 * M_PI / 4, M_PI));
}

TEST(ElementwiseTest, Bf16AddRoundsToNearestEvenAfterEachOp) {
  Literal one = Vec(PrimitiveType::kBF16, std::vector<double>{1, 1, 1});
  Literal small = Vec(PrimitiveType::kBF16, std::vector<double>{0x1p-8, 0x1.8p-7, 0x1p-7});
  // 1 + 2^-8 is a tie (rounds to even: 1); 1 + 1.5*2^-7 rounds up to
  // 1 + 2^-6; 1 + 2^-7 is exact.
  EXPECT_THAT(Doubles(Binary(Opcode::kAdd, one, small)),
              ElementsAre(1.0, 1.0 + 0x1p-6, 1.0 + 0x1p-7));
}

TEST(ElementwiseTest, F16MultiplyOverflowsToInfinity) {
  Literal a = Vec(PrimitiveType::kF16, std::vector<double>{300, 0.5});
  Literal b = Vec(PrimitiveType::kF16, std::vector<double>{300, 0x1p-24});
  std::vector<double> r = Doubles(Binary(Opcode::kMultiply, a, b));
  EXPECT_EQ(r[0], kInf);
  EXPECT_EQ(r[1], 0.0);  // 2^-25 is a tie between 0 and 2^-24: even is 0.
}

TEST(ElementwiseTest, PredArithmeticIsLogical) {
  Literal a = Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 1, 0, 0});
  Literal b = Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 0, 1, 0});
  EXPECT_THAT(Values<bool>(Binary(Opcode::kAnd, a, b)), ElementsAre(true, false, false, false));
  EXPECT_THAT(Values<bool>(Binary(Opcode::kOr, a, b)), ElementsAre(true, true, true, false));
  EXPECT_THAT(Values<bool>(Binary(Opcode::kXor, a, b)), ElementsAre(false, true, true, false));
  EXPECT_THAT(Values<bool>(Binary(Opcode::kAdd, a, b)), ElementsAre(true, true, true, false));
}

TEST(ElementwiseTest, BitwiseOpsOnIntegers) {
  Literal a = Vec(PrimitiveType::kU8, std::vector<int64_t>{0xF0, 0x3C});
  Literal b = Vec(PrimitiveType::kU8, std::vector<int64_t>{0x3C, 0x0F});
  EXPECT_THAT(Values<uint8_t>(Binary(Opcode::kAnd, a, b)), ElementsAre(0x30, 0x0C));
  EXPECT_THAT(Values<uint8_t>(Binary(Opcode::kOr, a, b)), ElementsAre(0xFC, 0x3F));
  EXPECT_THAT(Values<uint8_t>(Binary(Opcode::kXor, a, b)), ElementsAre(0xCC, 0x33));
}

TEST(ElementwiseTest, DefaultFloatCompareTreatsNaNAsUnordered) {
  Literal a = Vec(PrimitiveType::kF32, std::vector<double>{kNaN, 1, -0.0});
  Literal b = Vec(PrimitiveType::kF32, std::vector<double>{kNaN, 2, 0.0});
  EXPECT_THAT(Compare(ComparisonDirection::kEq, ComparisonType::kDefault, a, b),
              ElementsAre(false, false, true));
  EXPECT_THAT(Compare(ComparisonDirection::kNe, ComparisonType::kFloat, a, b),
              ElementsAre(true, true, false));
  EXPECT_THAT(Compare(ComparisonDirection::kLt, ComparisonType::kDefault, a, b),
              ElementsAre(false, true, false));
}

TEST(ElementwiseTest, TotalOrderCompareOrdersNaNsAndSignedZeros) {
  // -NaN < -inf < -1 < -0 < +0 < 1 < inf < NaN.
  std::vector<double> order = {-kNaN, -kInf, -1, -0.0, 0.0, 1, kInf, kNaN};
  for (PrimitiveType type : {PrimitiveType::kF32, PrimitiveType::kBF16,
                             PrimitiveType::kF16, PrimitiveType::kF64}) {
    std::vector<double> lhs(order.begin(), order.end() - 1);
    std::vector<double> rhs(order.begin() + 1, order.end());
    std::vector<bool> lt = Compare(ComparisonDirection::kLt, ComparisonType::kTotalOrder,
                                   Vec(type, lhs), Vec(type, rhs));
    EXPECT_THAT(lt, ElementsAreArray(std::vector<bool>(lhs.size(), true)))
        << hlo::PrimitiveTypeName(type);
    std::vector<bool> ge = Compare(ComparisonDirection::kGe, ComparisonType::kTotalOrder,
                                   Vec(type, lhs), Vec(type, rhs));
    EXPECT_THAT(ge, ElementsAreArray(std::vector<bool>(lhs.size(), false)));
  }
}

TEST(ElementwiseTest, IntegerCompareHonoursSignedness) {
  Literal a = Vec(PrimitiveType::kU32, std::vector<int64_t>{0xFFFFFFFF, 1});
  Literal b = Vec(PrimitiveType::kU32, std::vector<int64_t>{1, 1});
  EXPECT_THAT(Compare(ComparisonDirection::kGt, ComparisonType::kDefault, a, b),
              ElementsAre(true, false));
  EXPECT_THAT(Compare(ComparisonDirection::kGt, ComparisonType::kSigned, a, b),
              ElementsAre(false, false));
  Literal c = Vec(PrimitiveType::kS8, std::vector<int64_t>{-1, 3});
  Literal d = Vec(PrimitiveType::kS8, std::vector<int64_t>{1, 3});
  EXPECT_THAT(Compare(ComparisonDirection::kLe, ComparisonType::kDefault, c, d),
              ElementsAre(true, true));
}

TEST(ElementwiseTest, SelectPicksPerElementOrByScalarPredicate) {
  Instruction instr = Instr(Opcode::kSelect, PrimitiveType::kF32, 3);
  Literal t = Vec(PrimitiveType::kF32, std::vector<double>{1, 2, 3});
  Literal f = Vec(PrimitiveType::kF32, std::vector<double>{-1, -2, -3});
  absl::StatusOr<Literal> out =
      EvalSelect(instr, Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 0, 1}), t, f);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Doubles(*out), ElementsAre(1, -2, 3));
  Literal scalar_false = Literal::Scalar(PrimitiveType::kPred, false);
  out = EvalSelect(instr, scalar_false, t, f);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Doubles(*out), ElementsAre(-1, -2, -3));
}

TEST(ElementwiseTest, SelectOfEveryWidthMatchesPerElementChoice) {
  // 37 elements: whole SIMD blocks and a scalar tail for every width.
  std::vector<int64_t> flags, on_true, on_false;
  for (int64_t i = 0; i < 37; ++i) {
    flags.push_back((i * 7) % 3 == 0);
    on_true.push_back(i);
    on_false.push_back(-i - 1);
  }
  for (PrimitiveType type : {PrimitiveType::kS8, PrimitiveType::kBF16,
                             PrimitiveType::kF32, PrimitiveType::kS64}) {
    Instruction instr = Instr(Opcode::kSelect, type, 37);
    absl::StatusOr<Literal> out = EvalSelect(instr, Vec(PrimitiveType::kPred, flags),
                                             Vec(type, on_true), Vec(type, on_false));
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < 37; ++i) {
      EXPECT_EQ(out->GetAsDouble(i), flags[i] ? on_true[i] : on_false[i])
          << hlo::PrimitiveTypeName(type) << " at " << i;
    }
  }
}

TEST(ElementwiseTest, SelectRejectsPredicateOfAnotherShape) {
  Instruction instr = Instr(Opcode::kSelect, PrimitiveType::kF32, 3);
  Literal t = Vec(PrimitiveType::kF32, std::vector<double>{1, 2, 3});
  absl::StatusOr<Literal> out =
      EvalSelect(instr, Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 0}), t, t);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, ClampTakesScalarOrArrayBoundsAndPropagatesNaN) {
  Instruction instr = Instr(Opcode::kClamp, PrimitiveType::kF32, 5);
  Literal x = Vec(PrimitiveType::kF32, std::vector<double>{kNaN, -1, 2, 0.5, -0.0});
  absl::StatusOr<Literal> out = EvalClamp(instr, Literal::Scalar(PrimitiveType::kF32, 0.0f), x,
                                          Literal::Scalar(PrimitiveType::kF32, 1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> v = Values<float>(*out);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_THAT(std::vector<float>(v.begin() + 1, v.end()), ElementsAre(0, 1, 0.5, 0));
  EXPECT_FALSE(std::signbit(v[4]));
  Instruction ints = Instr(Opcode::kClamp, PrimitiveType::kS32, 3);
  out = EvalClamp(ints, Vec(PrimitiveType::kS32, std::vector<int64_t>{0, 5, 0}),
                  Vec(PrimitiveType::kS32, std::vector<int64_t>{-4, 1, 9}),
                  Literal::Scalar(PrimitiveType::kS32, 6));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>(*out), ElementsAre(0, 5, 6));
}

TEST(ElementwiseTest, ConvertFloatToIntTruncatesAndSaturates) {
  Literal in = Vec(PrimitiveType::kF32,
                   std::vector<double>{kNaN, kInf, -kInf, 3e9, -3e9, -1.5, 2.7, -0.0});
  EXPECT_THAT(Values<int32_t>(Convert(PrimitiveType::kS32, in)),
              ElementsAre(0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, -1, 2, 0));
  EXPECT_THAT(Values<uint8_t>(Convert(PrimitiveType::kU8, in)),
              ElementsAre(0, 255, 0, 255, 0, 0, 2, 0));
  EXPECT_THAT(Values<int64_t>(Convert(PrimitiveType::kS64, in)),
              ElementsAre(0, INT64_MAX, INT64_MIN, 3000000000, -3000000000, -1, 2, 0));
  EXPECT_THAT(Values<uint64_t>(Convert(PrimitiveType::kU64, in)),
              ElementsAre(0, UINT64_MAX, 0, 3000000000u, 0, 0, 2, 0));
}

TEST(ElementwiseTest, ConvertToPredIsNonZeroAndFromPredIsZeroOrOne) {
  Literal in = Vec(PrimitiveType::kF32, std::vector<double>{kNaN, 0.0, -0.0, 0.1});
  EXPECT_THAT(Values<bool>(Convert(PrimitiveType::kPred, in)),
              ElementsAre(true, false, false, true));
  Literal p = Vec(PrimitiveType::kPred, std::vector<int64_t>{1, 0});
  EXPECT_THAT(Doubles(Convert(PrimitiveType::kBF16, p)), ElementsAre(1, 0));
  EXPECT_THAT(Values<int32_t>(Convert(PrimitiveType::kS32, p)), ElementsAre(1, 0));
}

TEST(ElementwiseTest, ConvertToBf16RoundsToNearestEvenThroughF32) {
  Literal in = Vec(PrimitiveType::kF32, std::vector<double>{1 + 0x1p-8, 1 + 0x1.8p-8, kNaN});
  std::vector<uint16_t> bits;
  for (BF16 v : Values<BF16>(Convert(PrimitiveType::kBF16, in))) bits.push_back(v.bits);
  EXPECT_EQ(bits[0], 0x3F80);
  EXPECT_EQ(bits[1], 0x3F81);
  EXPECT_EQ(bits[2] & 0x7F80, 0x7F80);
  EXPECT_NE(bits[2] & 0x7F, 0);
  // As XLA's CPU backend: f64 and s32 go through f32 and round twice.
  Literal d = Vec(PrimitiveType::kF64, std::vector<double>{1 + 0x1p-8 + 0x1p-40});
  EXPECT_EQ(Values<BF16>(Convert(PrimitiveType::kBF16, d))[0].bits, 0x3F80);
  Literal i = Vec(PrimitiveType::kS32, std::vector<int64_t>{(1 << 24) + 65537});
  EXPECT_THAT(Doubles(Convert(PrimitiveType::kBF16, i)), ElementsAre(16777216.0));
}

TEST(ElementwiseTest, ConvertF64ToF16RoundsOnceAsTheProcessorDoes) {
  Literal d = Vec(PrimitiveType::kF64,
                  std::vector<double>{0x1p-25 * (1 + 0x1p-40), 0x1p-25,
                                      1 + 0x1p-11 + 0x1p-40, 65519.99, 65520,
                                      -0x1.ffcp-15});
  std::vector<uint16_t> bits;
  for (F16 v : Values<F16>(Convert(PrimitiveType::kF16, d))) {
    bits.push_back(v.bits);
  }
  // Through f32 the first and third would round twice, to 0 and to 1.
  EXPECT_THAT(bits, ElementsAre(0x0001, 0x0000, 0x3C01, 0x7BFF, 0x7C00,
                                0x8400));
}

TEST(ElementwiseTest, MaxAndMinReadDenormalsAsZeroButNotHalfDenormals) {
  Literal a = Vec(PrimitiveType::kF32, std::vector<double>{1e-39, -1e-39});
  Literal b = Vec(PrimitiveType::kF32, std::vector<double>{-5, 5});
  std::vector<float> mx = Values<float>(Binary(Opcode::kMaximum, a, b));
  std::vector<float> mn = Values<float>(Binary(Opcode::kMinimum, a, b));
  EXPECT_EQ(std::bit_cast<uint32_t>(mx[0]), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(mn[1]), 0x80000000u);
  Literal h = Vec(PrimitiveType::kF16, std::vector<double>{0x1p-24});
  Literal minus = Vec(PrimitiveType::kF16, std::vector<double>{-1});
  EXPECT_EQ(Values<F16>(Binary(Opcode::kMaximum, h, minus))[0].bits, 0x0001);
}

TEST(ElementwiseTest, SignOfADenormalIsASignedZeroAndTanhIsItself) {
  Literal in = Vec(PrimitiveType::kF32, std::vector<double>{-1e-39, 1e-39});
  std::vector<float> sign = Values<float>(Unary(Opcode::kSign, in));
  EXPECT_EQ(std::bit_cast<uint32_t>(sign[0]), 0x80000000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(sign[1]), 0u);
  std::vector<float> tanh = Values<float>(Unary(Opcode::kTanh, in));
  EXPECT_EQ(tanh[0], -1e-39f);
  EXPECT_EQ(tanh[1], 1e-39f);
}

TEST(ElementwiseTest, RsqrtRefinesTheEstimateAsXlaDoes) {
  std::vector<double> x = {0x1p-126, 4, 0.25, 0, -1, kInf, 2};
  for (int i = 0; i < 10; ++i) x.push_back(4);  // Also the vector loop.
  std::vector<float> r =
      Values<float>(Unary(Opcode::kRsqrt, Vec(PrimitiveType::kF32, x)));
  // Two Newton steps give these exactly; AMD's one (xla_cpu_target.h), on
  // its own estimate, within its bound of 4 ulp (docs/hlo.md, "Rounding").
  const float ulps = ActiveXlaCpuTarget().amd ? 4 : 0;
  EXPECT_NEAR(r[0], 0x1p63f, ulps * 0x1p40f);
  EXPECT_NEAR(r[1], 0.5f, ulps * 0x1p-24f);
  EXPECT_NEAR(r[2], 2.0f, ulps * 0x1p-22f);
  EXPECT_EQ(r[3], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(r[4]));
  EXPECT_EQ(r[5], 0.0f);
  EXPECT_NEAR(r[6], 1 / std::sqrt(2.0), 1e-7 + ulps * 0x1p-24f);
  for (int i = 7; i < 17; ++i) EXPECT_NEAR(r[i], 0.5f, ulps * 0x1p-24f);
}

// XLA's own exp, log and log1p formulas, bit for bit, where Eigen's differ
// by an ulp. Expected bits from JAX 0.10.2 on CPU:
//   x = np.array([...], np.float32).view(np.uint32) above; for f in
//   (jnp.exp, jnp.log (of |x|), jnp.log1p): jax.jit(f)(x).view(np.uint32)
TEST(ElementwiseTest, ExpLogAndLog1pGiveXlasBits) {
  const std::vector<uint32_t> x = {0x42601b62, 0xc1ea8bf4, 0x41e4056f,
                                   0x3fafb674, 0x40961853, 0x4261fa64,
                                   0x3e4c5198, 0xbec1bce4};
  const std::vector<uint32_t> exp = {0x67e37711, 0x2a504f1a, 0x540b29d6,
                                     0x407c8eb3, 0x42d9cefd, 0x6835916e,
                                     0x3f9c441e, 0x3f2f5991};
  const std::vector<uint32_t> log = {0x4080d398, 0x405834a5, 0x4056665b,
                                     0x3ea2363e, 0x3fc5d403, 0x408117b4,
                                     0xbfce4f28, 0xbf78c91c};
  const std::vector<uint32_t> log1p = {0x40816485, 0xffffffff, 0x40589b53,
                                       0x3f5d3282, 0x3fde90c2, 0x4081a771,
                                       0x3e3a4bd0, 0xbef36e14};
  // Twice over, so that both the vector loop and the scalar tail run.
  std::vector<double> values, magnitudes;
  for (int copy = 0; copy < 2; ++copy) {
    for (uint32_t bits : x) {
      values.push_back(std::bit_cast<float>(bits));
      magnitudes.push_back(std::fabs(std::bit_cast<float>(bits)));
    }
  }
  values.pop_back();
  magnitudes.pop_back();
  auto bits_of = [](const Literal& literal) {
    std::vector<uint32_t> out;
    for (float v : Values<float>(literal)) out.push_back(std::bit_cast<uint32_t>(v));
    return out;
  };
  const auto got_exp = bits_of(Unary(Opcode::kExp, Vec(PrimitiveType::kF32, values)));
  const auto got_log =
      bits_of(Unary(Opcode::kLog, Vec(PrimitiveType::kF32, magnitudes)));
  const auto got_log1p =
      bits_of(Unary(Opcode::kLog1p, Vec(PrimitiveType::kF32, values)));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(got_exp[i], exp[i % 8]) << i;
    EXPECT_EQ(got_log[i], log[i % 8]) << i;
    EXPECT_EQ(got_log1p[i], log1p[i % 8]) << i;
  }
}

// a * a - c with one rounding: the product's low bits survive.
TEST(ElementwiseTest, MultiplyAddRoundsOnceInEveryContractedType) {
  struct Case {
    PrimitiveType type;
    double a, c, want;
  };
  const Case cases[] = {
      {PrimitiveType::kF16, 1 + 0x1p-10, 1 + 0x1p-9, 0x1p-20},
      {PrimitiveType::kF32, 1 + 0x1p-23, 1 + 0x1p-22, 0x1p-46},
      {PrimitiveType::kF64, 1 + 0x1p-52, 1 + 0x1p-51, 0x1p-104},
  };
  for (const Case& c : cases) {
    Literal a = Vec(c.type, std::vector<double>{c.a});
    Literal addend = Vec(c.type, std::vector<double>{c.c});
    Instruction add = Instr(Opcode::kSubtract, c.type, 1);
    MultiplyAdd contraction;
    contraction.negate_addend = true;
    auto fused = EvalMultiplyAdd(add, contraction, a, a, addend);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(fused->GetAsDouble(0), c.want)
        << hlo::PrimitiveTypeName(c.type);
    // Rounding the product first loses them.
    Literal product = Binary(Opcode::kMultiply, a, a);
    EXPECT_EQ(Binary(Opcode::kSubtract, product, addend).GetAsDouble(0), 0);
    contraction.negate_product = true;
    contraction.negate_addend = false;
    fused = EvalMultiplyAdd(add, contraction, a, a, addend);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(fused->GetAsDouble(0), -c.want);
  }
}

TEST(ElementwiseTest, ConvertBetweenIntegersWrapsAndToFloatRounds) {
  Literal in = Vec(PrimitiveType::kS32, std::vector<int64_t>{300, -1, 16777217});
  EXPECT_THAT(Values<uint8_t>(Convert(PrimitiveType::kU8, in)), ElementsAre(44, 255, 1));
  EXPECT_THAT(Doubles(Convert(PrimitiveType::kF32, in)), ElementsAre(300, -1, 16777216));
  Literal u = Vec(PrimitiveType::kU64, std::vector<uint64_t>{UINT64_MAX});
  EXPECT_THAT(Doubles(Convert(PrimitiveType::kF64, u)), ElementsAre(0x1p64));
}

TEST(ElementwiseTest, BitcastConvertReinterpretsBitsOfEqualWidth) {
  Instruction instr = Instr(Opcode::kBitcastConvert, PrimitiveType::kU32, 2);
  absl::StatusOr<Literal> out =
      EvalBitcastConvert(instr, Vec(PrimitiveType::kF32, std::vector<double>{1.0, -2.0}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint32_t>(*out), ElementsAre(0x3F800000u, 0xC0000000u));
}

TEST(ElementwiseTest, BitcastConvertAddsAndRemovesATrailingDim) {
  Instruction to_bytes;
  to_bytes.opcode = Opcode::kBitcastConvert;
  to_bytes.shape = Shape(PrimitiveType::kU8, {2, 4});
  Literal floats = Vec(PrimitiveType::kF32, std::vector<double>{1.0, -2.0});
  absl::StatusOr<Literal> bytes = EvalBitcastConvert(to_bytes, floats);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_THAT(Values<uint8_t>(*bytes), ElementsAre(0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0));
  Instruction back = Instr(Opcode::kBitcastConvert, PrimitiveType::kF32, 2);
  absl::StatusOr<Literal> again = EvalBitcastConvert(back, *bytes);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(Doubles(*again), ElementsAre(1.0, -2.0));
  Instruction wrong = Instr(Opcode::kBitcastConvert, PrimitiveType::kU16, 2);
  EXPECT_EQ(EvalBitcastConvert(wrong, floats).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, ReducePrecisionMatchesXla) {
  // Expected values: jax.lax.reduce_precision on XLA's CPU backend.
  Literal in = Vec(PrimitiveType::kF32,
                   std::vector<double>{1.1, kNaN, 1e6, 1e-9, kInf, 3.5, 65519.0, 1e-5, 6e-5});
  Instruction instr = Instr(Opcode::kReducePrecision, PrimitiveType::kF32, 9);
  instr.exponent_bits = 5;
  instr.mantissa_bits = 2;
  absl::StatusOr<Literal> out = EvalReducePrecision(instr, in);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> v = Doubles(*out);
  EXPECT_TRUE(std::isnan(v[1]));
  v.erase(v.begin() + 1);
  EXPECT_THAT(v, ElementsAre(1.0, kInf, 0.0, kInf, 3.5, kInf, 0.0, 0x1p-14));
  instr.mantissa_bits = 0;
  out = EvalReducePrecision(instr, in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->GetAsDouble(5), 4.0);
  EXPECT_TRUE(std::isnan(out->GetAsDouble(1)));
  instr.mantissa_bits = 10;
  out = EvalReducePrecision(instr, in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->GetAsDouble(0), 1126.0 / 1024);
  EXPECT_EQ(out->GetAsDouble(6), 65504.0);
  EXPECT_EQ(out->GetAsDouble(8), 0.0);  // Below f16's smallest normal.
}

}  // namespace elementwise_test
}  // namespace causeway::exec
