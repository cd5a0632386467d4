// Tests for rng-bit-generator. Expected bits were produced by JAX 0.10.2 on
// CPU (jax.lax.rng_bit_generator, and a stablehlo module for the u64[3]
// Philox state that jax.lax does not accept) from the states below.
#include <cstdint>
#include <vector>

#include "causeway/exec/kernels.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace {

using hlo::PrimitiveType;
using hlo::RandomAlgorithm;
using hlo::Shape;
using ::testing::ElementsAreArray;

constexpr uint64_t kKey = 0x0123456789ABCDEFu;

Literal State(std::vector<uint64_t> values) {
  Literal state{
      Shape(PrimitiveType::kU64, {static_cast<int64_t>(values.size())})};
  std::copy(values.begin(), values.end(),
            state.mutable_data<uint64_t>().begin());
  return state;
}

absl::StatusOr<Literal> Generate(RandomAlgorithm algorithm,
                                 std::vector<uint64_t> state,
                                 PrimitiveType type,
                                 std::vector<int64_t> dims) {
  Instruction instr;
  instr.name = "rng";
  instr.opcode = hlo::Opcode::kRngBitGenerator;
  instr.rng_algorithm = algorithm;
  Shape state_shape(PrimitiveType::kU64, {static_cast<int64_t>(state.size())});
  instr.shape = Shape::Tuple({state_shape, Shape(type, std::move(dims))});
  return EvalRngBitGenerator(instr, State(std::move(state)));
}

template <typename T>
std::vector<T> Bits(const Literal& result) {
  auto data = result.elements()[1].data<T>();
  return std::vector<T>(data.begin(), data.end());
}

std::vector<uint64_t> NewState(const Literal& result) {
  auto data = result.elements()[0].data<uint64_t>();
  return std::vector<uint64_t>(data.begin(), data.end());
}

TEST(RngBitGeneratorTest, ThreeFryMatchesXlaOnAnEvenShape) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU32, {2, 3});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint32_t>(*result),
      ElementsAreArray<uint32_t>({0xaed4a37fu, 0xc3cc4d02u, 0xaee5264eu,
                                  0x1130d111u, 0x798e402eu, 0xb089da7au}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543213u}));
}

TEST(RngBitGeneratorTest, ThreeFrySplitsAnOddShapeOnItsLargestDim) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU32, {3, 3});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint32_t>(*result),
      ElementsAreArray<uint32_t>({0xaed4a37fu, 0xc3cc4d02u, 0xaee5264eu,
                                  0x1130d111u, 0x798e402eu, 0xb089da7au,
                                  0x49b105a8u, 0xe8e52210u, 0xf0a39a78u}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543216u}));
}

TEST(RngBitGeneratorTest, ThreeFryMakesAScalar) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU32, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Bits<uint32_t>(*result),
              ElementsAreArray<uint32_t>({0xaed4a37fu}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543211u}));
}

TEST(RngBitGeneratorTest, ThreeFryMakes64BitWordsFromOneBlockEach) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU64, {5});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint64_t>(*result),
      ElementsAreArray<uint64_t>({0x1130d111aed4a37fu, 0x798e402ec3cc4d02u,
                                  0xb089da7aaee5264eu, 0xaf0a8d9949b105a8u,
                                  0xdde94182e8e52210u}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543215u}));
}

TEST(RngBitGeneratorTest, ThreeFryKeepsTheLowBitsForNarrowTypes) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kThreeFry, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU8, {4});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Bits<uint8_t>(*result),
              ElementsAreArray<uint8_t>({0x7f, 0x11, 0x02, 0x2e}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543212u}));
}

TEST(RngBitGeneratorTest, PhiloxMatchesXlaWithATwoWordState) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kPhilox, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU32, {7});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Bits<uint32_t>(*result),
              ElementsAreArray<uint32_t>({0x1ec53d42u, 0xcfa390b5u, 0xf2235702u,
                                          0xe71ff917u, 0xcb472319u, 0xd682777au,
                                          0xa09c7b98u}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543212u}));
}

TEST(RngBitGeneratorTest, PhiloxMakes64BitWordsFromHalfBlocks) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kPhilox, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU64, {3});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint64_t>(*result),
      ElementsAreArray<uint64_t>(
          {0xcfa390b51ec53d42u, 0xe71ff917f2235702u, 0xd682777acb472319u}));
  EXPECT_THAT(NewState(*result),
              ElementsAreArray<uint64_t>({kKey, 0xfedcba9876543212u}));
}

TEST(RngBitGeneratorTest, PhiloxCarriesIntoTheHighWordOfAThreeWordState) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kPhilox, {kKey, 0xFFFFFFFFFFFFFFFEu, 7},
               PrimitiveType::kU32, {2, 3});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint32_t>(*result),
      ElementsAreArray<uint32_t>({0x6c1e9305u, 0xe0c1a0a5u, 0x9f05d22fu,
                                  0x9c01c61du, 0xd8f2cea1u, 0xeffe4af4u}));
  EXPECT_THAT(NewState(*result), ElementsAreArray<uint64_t>({kKey, 0u, 8u}));
}

TEST(RngBitGeneratorTest, PhiloxKeepsTheLowBitsForU16) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kPhilox, {kKey, 0xFFFFFFFFFFFFFFFEu, 7},
               PrimitiveType::kU16, {5});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(
      Bits<uint16_t>(*result),
      ElementsAreArray<uint16_t>({0x9305, 0xa0a5, 0xd22f, 0xc61d, 0xcea1}));
}

TEST(RngBitGeneratorTest, DefaultIsPhilox) {
  absl::StatusOr<Literal> result =
      Generate(RandomAlgorithm::kDefault, {kKey, 0xFEDCBA9876543210u},
               PrimitiveType::kU32, {5});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Bits<uint32_t>(*result),
              ElementsAreArray<uint32_t>({0x1ec53d42u, 0xcfa390b5u, 0xf2235702u,
                                          0xe71ff917u, 0xcb472319u}));
}

TEST(RngBitGeneratorTest, RejectsAThreeFryStateOfThreeWords) {
  absl::StatusOr<Literal> result = Generate(
      RandomAlgorithm::kThreeFry, {kKey, 1, 2}, PrimitiveType::kU32, {4});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace causeway::exec
