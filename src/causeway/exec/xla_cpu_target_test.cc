#include "causeway/exec/xla_cpu_target.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace xla_cpu_target_test {

using ::testing::HasSubstr;

constexpr XlaCpuTarget kSapphireRapids{.avx512f = true, .avx512fp16 = true};
constexpr XlaCpuTarget kZen4{.avx512f = true, .avx512fp16 = false, .amd = true};

// The first line of /proc/cpuinfo that starts with `key`, or "".
std::string CpuinfoLine(const std::string& key) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind(key, 0) == 0) return line;
  }
  return "";
}

bool CpuinfoHasFlag(const std::string& flag) {
  std::istringstream flags(CpuinfoLine("flags"));
  std::string word;
  while (flags >> word) {
    if (word == flag) return true;
  }
  return false;
}

TEST(XlaCpuTargetTest, DetectionAgreesWithTheKernelsCpuinfo) {
  ASSERT_NE(CpuinfoLine("flags"), "");
  const XlaCpuTarget detected = DetectXlaCpuTarget();
  EXPECT_EQ(detected.avx512f, CpuinfoHasFlag("avx512f"));
  EXPECT_EQ(detected.avx512fp16, CpuinfoHasFlag("avx512_fp16"));
  EXPECT_EQ(detected.amd,
            CpuinfoLine("vendor_id").find("AuthenticAMD") != std::string::npos);
  EXPECT_TRUE(detected.platform_dependent_math);
}

TEST(XlaCpuTargetTest, NoSpecKeepsWhatWasDetected) {
  std::string warnings;
  EXPECT_EQ(ApplyXlaCpuOverrides(kSapphireRapids, "", &warnings),
            kSapphireRapids);
  EXPECT_EQ(warnings, "");
}

TEST(XlaCpuTargetTest, MaxIsaBelowAvx512DropsItsFeaturesAsXlaDoes) {
  std::string warnings;
  const XlaCpuTarget avx2 =
      ApplyXlaCpuOverrides(kSapphireRapids, "max_isa=AVX2", &warnings);
  EXPECT_FALSE(avx2.avx512f);
  EXPECT_FALSE(avx2.avx512fp16);
  EXPECT_FALSE(avx2.amd);
  EXPECT_EQ(warnings, "");
  for (const char* keeps : {"max_isa=AVX512", "max_isa=AVX512_VNNI",
                            "max_isa=AVX512_BF16", "max_isa=AMX"}) {
    EXPECT_EQ(ApplyXlaCpuOverrides(kSapphireRapids, keeps, &warnings),
              kSapphireRapids)
        << keeps;
  }
  EXPECT_EQ(warnings, "");
  ApplyXlaCpuOverrides(kSapphireRapids, "max_isa=AVX", &warnings);
  EXPECT_THAT(warnings, HasSubstr("without FMA"));
}

TEST(XlaCpuTargetTest, EntriesSetTheVendorFeaturesAndPlatformMath) {
  std::string warnings;
  const XlaCpuTarget forced = ApplyXlaCpuOverrides(
      kZen4, " intel, avx512fp16 ,disable_platform_dependent_math", &warnings);
  EXPECT_EQ(warnings, "");
  EXPECT_FALSE(forced.amd);
  EXPECT_TRUE(forced.avx512fp16);
  EXPECT_TRUE(forced.avx512f);
  EXPECT_FALSE(forced.platform_dependent_math);
  EXPECT_EQ(XlaCpuTargetText(forced),
            "avx512f,avx512fp16,intel,disable_platform_dependent_math");
  const XlaCpuTarget amd =
      ApplyXlaCpuOverrides(kSapphireRapids, "amd,no_avx512fp16", &warnings);
  EXPECT_EQ(XlaCpuTargetText(amd), "avx512f,no_avx512fp16,amd");
}

TEST(XlaCpuTargetTest, AnEstimateTheProcessorLacksIsRefused) {
  std::string warnings;
  const XlaCpuTarget no_avx512{};
  EXPECT_FALSE(ApplyXlaCpuOverrides(no_avx512, "avx512f", &warnings).avx512f);
  EXPECT_THAT(warnings, HasSubstr("lacks AVX-512 F"));
  warnings.clear();
  EXPECT_FALSE(
      ApplyXlaCpuOverrides(kSapphireRapids, "no_avx512f", &warnings).avx512f);
  EXPECT_EQ(warnings, "");
}

TEST(XlaCpuTargetTest, UnknownEntriesAreNamedAndIgnored) {
  std::string warnings;
  EXPECT_EQ(ApplyXlaCpuOverrides(kZen4, "zen9,max_isa=AVX1024", &warnings),
            kZen4);
  EXPECT_THAT(warnings, HasSubstr("'zen9' is not one of max_isa=NAME"));
  EXPECT_THAT(warnings, HasSubstr("max_isa=AVX1024 is not one of SSE4_2"));
}

}  // namespace xla_cpu_target_test
}  // namespace causeway::exec
