#include "causeway/hlo/element_types.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "causeway/hlo/npy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace element_types_test {

// The inputs testdata/generate_minifloats.py converts with XLA: every f16
// bit pattern widened to f32, then 4096 f32 bit patterns of its LCG.
std::vector<float> MinifloatInputs() {
  std::vector<float> inputs;
  for (uint32_t bits = 0; bits < (1u << 16); ++bits) {
    inputs.push_back(F16::ToFloat(static_cast<uint16_t>(bits)));
  }
  uint64_t x = 0x853C49E6748FEA9Bull;
  for (int i = 0; i < 4096; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    inputs.push_back(std::bit_cast<float>(static_cast<uint32_t>(x >> 32)));
  }
  return inputs;
}

std::filesystem::path Testdata(const std::string& file) {
  return std::filesystem::path(__FILE__).parent_path() / "testdata" /
         "minifloats" / file;
}

template <typename M>
class MinifloatTest : public ::testing::Test {};

struct F8E5M2Name { static constexpr const char* kName = "f8e5m2"; using T = F8E5M2; };
struct F8E4M3Name { static constexpr const char* kName = "f8e4m3"; using T = F8E4M3; };
struct F8E4M3FNName { static constexpr const char* kName = "f8e4m3fn"; using T = F8E4M3FN; };
struct F8E4M3B11FNUZName { static constexpr const char* kName = "f8e4m3b11fnuz"; using T = F8E4M3B11FNUZ; };
struct F8E5M2FNUZName { static constexpr const char* kName = "f8e5m2fnuz"; using T = F8E5M2FNUZ; };
struct F8E4M3FNUZName { static constexpr const char* kName = "f8e4m3fnuz"; using T = F8E4M3FNUZ; };
struct F8E3M4Name { static constexpr const char* kName = "f8e3m4"; using T = F8E3M4; };
struct F8E8M0FNUName { static constexpr const char* kName = "f8e8m0fnu"; using T = F8E8M0FNU; };
struct F4E2M1FNName { static constexpr const char* kName = "f4e2m1fn"; using T = F4E2M1FN; };

using MinifloatTypes =
    ::testing::Types<F8E5M2Name, F8E4M3Name, F8E4M3FNName, F8E4M3B11FNUZName,
                     F8E5M2FNUZName, F8E4M3FNUZName, F8E3M4Name,
                     F8E8M0FNUName, F4E2M1FNName>;
TYPED_TEST_SUITE(MinifloatTest, MinifloatTypes);

// f32 -> minifloat, every input, bit for bit with XLA:CPU (NaN inputs:
// any NaN of the type; XLA's NaN bits follow the input's payload).
TYPED_TEST(MinifloatTest, ConvertsFromFloatAsXla) {
  using M = typename TypeParam::T;
  auto want = ReadNpy(Testdata(std::string(TypeParam::kName) + "_encode.npy"));
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float> inputs = MinifloatInputs();
  ASSERT_EQ(want->shape().ElementCount(), static_cast<int64_t>(inputs.size()));
  auto bits = want->data<uint8_t>();
  int64_t mismatches = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // f8e8m0fnu of an f32 denormal: XLA gives 2^-126 for 3 inputs where
    // round-to-nearest (and ml_dtypes) gives 2^-127; we follow ml_dtypes.
    if (std::is_same_v<M, F8E8M0FNU> &&
        std::fpclassify(inputs[i]) == FP_SUBNORMAL) {
      continue;
    }
    const M got = M::FromDouble(inputs[i]);
    const bool ok =
        got.bits == bits[i] ||
        (std::isnan(inputs[i]) && std::isnan(static_cast<float>(got)) &&
         std::isnan(static_cast<float>(M::FromBits(bits[i]))));
    if (!ok && ++mismatches <= 5) {
      ADD_FAILURE() << TypeParam::kName << "(" << inputs[i] << ") = 0x"
                    << std::hex << int{got.bits} << ", XLA gives 0x"
                    << int{bits[i]};
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// minifloat -> f32, every bit pattern, bit for bit with XLA:CPU.
TYPED_TEST(MinifloatTest, ConvertsToFloatAsXla) {
  using M = typename TypeParam::T;
  auto want = ReadNpy(Testdata(std::string(TypeParam::kName) + "_decode.npy"));
  ASSERT_TRUE(want.ok()) << want.status();
  auto values = want->data<float>();
  for (size_t b = 0; b < values.size(); ++b) {
    const float got = static_cast<float>(M::FromBits(static_cast<uint8_t>(b)));
    if (std::isnan(values[b])) {
      EXPECT_TRUE(std::isnan(got)) << TypeParam::kName << " bits " << b;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(values[b]))
          << TypeParam::kName << " bits " << b << ": got " << got << ", XLA "
          << values[b];
    }
  }
}

TEST(NarrowIntTest, WrapsToTheLowBitsAndReadsSignExtended) {
  EXPECT_EQ(S4::Wrap(7).value(), 7);
  EXPECT_EQ(S4::Wrap(8).value(), -8);
  EXPECT_EQ(S4::Wrap(-1).bits, 0x0F);
  EXPECT_EQ(U4::Wrap(-1).value(), 15);
  EXPECT_EQ(U4::Wrap(16).value(), 0);
  EXPECT_EQ(S2::Wrap(2).value(), -2);
  EXPECT_EQ(U2::Wrap(5).value(), 1);
}

}  // namespace element_types_test
}  // namespace causeway::hlo
