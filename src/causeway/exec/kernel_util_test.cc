#include "causeway/exec/kernel_util.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace kernel_util_test {

using hlo::BF16;
using hlo::F16;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;

TEST(KernelUtilTest, ConvertElementSaturatesFloatToInt) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ((ConvertElement<int32_t, float>(nan)), 0);
  EXPECT_EQ((ConvertElement<int32_t, float>(3e9f)), INT32_MAX);
  EXPECT_EQ((ConvertElement<int32_t, float>(-2147483648.0f)), INT32_MIN);
  EXPECT_EQ((ConvertElement<int8_t, double>(-128.9)), -128);
  EXPECT_EQ((ConvertElement<uint16_t, BF16>(BF16(-3.0f))), 0);
  EXPECT_EQ((ConvertElement<int64_t, F16>(F16(-2.5f))), -2);
}

TEST(KernelUtilTest, ConvertElementToAndFromPred) {
  EXPECT_TRUE((ConvertElement<bool, float>(std::nanf(""))));
  EXPECT_FALSE((ConvertElement<bool, double>(-0.0)));
  EXPECT_TRUE((ConvertElement<bool, int8_t>(-1)));
  EXPECT_EQ((ConvertElement<BF16, bool>(true)).bits, BF16(1.0f).bits);
  EXPECT_EQ((ConvertElement<uint64_t, bool>(true)), 1u);
}

TEST(KernelUtilTest, ComputeTypeWidensHalvesAndRoundsBack) {
  static_assert(std::is_same_v<ComputeType<BF16>, float>);
  static_assert(std::is_same_v<ComputeType<int8_t>, int8_t>);
  EXPECT_EQ(ToCompute(F16(1.5f)), 1.5f);
  EXPECT_EQ(FromCompute<BF16>(1.0f + 0x1p-8f).bits, BF16(1.0f).bits);
  EXPECT_EQ(FloatToBits(BF16(1.0f)), 0x3F80);
  EXPECT_EQ(FloatFromBits<float>(0x40000000u), 2.0f);
}

TEST(KernelUtilTest, ReadIndexElementReadsEveryIntegerType) {
  Literal s8(Shape(PrimitiveType::kS8, {2}));
  s8.mutable_data<int8_t>()[1] = -5;
  EXPECT_EQ(ReadIndexElement(s8, 1), -5);
  Literal u64 = Literal::Scalar(PrimitiveType::kU64, UINT64_MAX);
  EXPECT_EQ(ReadIndexElement(u64, 0), INT64_MAX);
  Literal u32 = Literal::Scalar(PrimitiveType::kU32, 4000000000u);
  EXPECT_EQ(ReadIndexElement(u32, 0), 4000000000);
}

TEST(KernelUtilTest, IndexIterationIsRowMajor) {
  std::vector<int64_t> dims = {2, 3};
  EXPECT_THAT(RowMajorStrides(dims), ElementsAre(3, 1));
  std::vector<int64_t> offsets;
  ForEachIndex(dims, [&](std::span<const int64_t> index) {
    offsets.push_back(LinearIndex(index, RowMajorStrides(dims)));
  });
  EXPECT_THAT(offsets, ElementsAre(0, 1, 2, 3, 4, 5));
  int calls = 0;
  ForEachIndex(std::vector<int64_t>{}, [&](std::span<const int64_t>) { ++calls; });
  ForEachIndex(std::vector<int64_t>{3, 0}, [&](std::span<const int64_t>) { ++calls; });
  EXPECT_EQ(calls, 1);  // Once for rank 0, never for an empty extent.
}

TEST(KernelUtilTest, LayoutHelpersTreatMissingLayoutAsDescending) {
  Shape plain(PrimitiveType::kF32, {2, 3, 4});
  EXPECT_TRUE(HasDefaultLayout(plain));
  EXPECT_THAT(MinorToMajorOrDefault(plain), ElementsAre(2, 1, 0));
  Shape column_major = plain;
  column_major.set_minor_to_major({0, 1, 2});
  EXPECT_FALSE(HasDefaultLayout(column_major));
  EXPECT_THAT(MinorToMajorOrDefault(column_major), ElementsAre(0, 1, 2));
}

TEST(KernelUtilTest, CheckArrayNamesWhatDoesNotFit) {
  Literal literal(Shape(PrimitiveType::kF32, {2}));
  std::vector<int64_t> dims = {2};
  EXPECT_TRUE(CheckArray(literal, PrimitiveType::kF32, dims, "lhs").ok());
  absl::Status status = CheckArray(literal, PrimitiveType::kS32, dims, "lhs");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("lhs"));
}

TEST(KernelUtilTest, ScopedFlushDenormalsFlushesOnlyWhileAlive) {
  volatile float tiny = 1e-38f;
  {
    ScopedFlushDenormals flush;
    EXPECT_EQ(tiny * 0.5f, 0.0f);
  }
  EXPECT_GT(tiny * 0.5f, 0.0f);
}

}  // namespace kernel_util_test
}  // namespace causeway::exec
