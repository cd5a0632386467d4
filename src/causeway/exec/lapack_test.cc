#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/exec/evaluator.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace lapack_test {

using hlo::Literal;
using hlo::testutil::DoubleValues;
using hlo::testutil::F32;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs a module of one LAPACK custom-call on `args`.
absl::StatusOr<Literal> RunCall(std::string_view call, std::string_view params,
                                std::vector<Literal> args) {
  const std::string text =
      "HloModule m\nENTRY main {\n" + std::string(params) + "  ROOT r = " +
      std::string(call) + "\n}\n";
  auto module = hlo::ParseModule(text);
  if (!module.ok()) return module.status();
  auto evaluator = Evaluator::Create(**module);
  if (!evaluator.ok()) return evaluator.status();
  return (*evaluator)->Run(args, RunContext{});
}

TEST(LapackTest, PotrfFactorsEachMatrixOfTheBatchAndReportsInfo) {
  // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt(2)]]; [[1, 2], [2,
  // 1]] is not positive definite: info 2.
  auto result = RunCall(
      "(f32[2,2,2]{1,2,0}, s32[2]{0}) custom-call(a), "
      "custom_call_target=\"lapack_spotrf_ffi\", "
      "backend_config={uplo = 76 : ui8}",
      "  a = f32[2,2,2] parameter(0)\n",
      {F32({2, 2, 2}, {4, 2, 2, 3, 1, 2, 2, 1})});
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> l = DoubleValues(result->elements()[0]);
  EXPECT_EQ(l[0], 2);
  EXPECT_EQ(l[2], 1);
  EXPECT_THAT(l[3], DoubleNear(std::sqrt(2.0), 1e-6));
  EXPECT_THAT(DoubleValues(result->elements()[1]), ElementsAre(0, 2));
}

TEST(LapackTest, TrsmReadsSideUploTransposeAndDiagonalFromBackendConfig) {
  // Solves L^T x = b with L = [[2, 0], [1, 4]] (uplo L, trans T).
  auto result = RunCall(
      "f32[2,1]{0,1} custom-call(a, b), custom_call_target=\"lapack_strsm_ffi\", "
      "backend_config={diag = 78 : ui8, side = 76 : ui8, trans_x = 84 : ui8, "
      "uplo = 76 : ui8}",
      "  a = f32[2,2] parameter(0)\n  b = f32[2,1] parameter(1)\n",
      {F32({2, 2}, {2, 0, 1, 4}), F32({2, 1}, {5, 8})});
  ASSERT_TRUE(result.ok()) << result.status();
  // L^T = [[2, 1], [0, 4]]: x1 = 2, x0 = (5 - 2) / 2.
  EXPECT_THAT(DoubleValues(*result), ElementsAre(1.5, 2));
}

TEST(LapackTest, GetrfPivotsAreOneBasedAsLapackWritesThem) {
  auto result = RunCall(
      "(f32[2,2]{0,1}, s32[2]{0}, s32[]) custom-call(a), "
      "custom_call_target=\"lapack_sgetrf_ffi\", backend_config={}",
      "  a = f32[2,2] parameter(0)\n", {F32({2, 2}, {1, 2, 4, 8})});
  ASSERT_TRUE(result.ok()) << result.status();
  // The larger first column entry (row 2) is the pivot; U is singular.
  EXPECT_THAT(DoubleValues(result->elements()[0]), ElementsAre(4, 8, 0.25, 0));
  EXPECT_THAT(DoubleValues(result->elements()[1]), ElementsAre(2, 2));
  EXPECT_THAT(DoubleValues(result->elements()[2]), ElementsAre(2));
}

TEST(LapackTest, AnF64RoutineRefusesF32Operands) {
  auto result = RunCall(
      "(f32[2,2]{1,0}, s32[]) custom-call(a), "
      "custom_call_target=\"lapack_dpotrf_ffi\"",
      "  a = f32[2,2] parameter(0)\n", {F32({2, 2}, {1, 0, 0, 1})});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("takes f64"));
}

TEST(LapackTest, AnOptionLapackWouldRefuseIsAnErrorNotAnExit) {
  // trans_x = 88 ('X'): the reference BLAS's xerbla would print "On entry
  // to STRSM parameter number 3 had an illegal value" and exit the process
  // (the multi-partition fuzzer found it).
  auto result = RunCall(
      "f32[2,1]{0,1} custom-call(a, b), custom_call_target=\"lapack_strsm_ffi\", "
      "backend_config={diag = 78 : ui8, side = 76 : ui8, trans_x = 88 : ui8, "
      "uplo = 76 : ui8}",
      "  a = f32[2,2] parameter(0)\n  b = f32[2,1] parameter(1)\n",
      {F32({2, 2}, {2, 0, 1, 4}), F32({2, 1}, {5, 8})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  EXPECT_THAT(result.status().message(),
              HasSubstr("trans_x = 88 is not one of the letters 'NTC'"));
}

TEST(LapackTest, LowerCaseOptionsAreLapacksLettersToo) {
  auto result = RunCall(
      "f32[2,1]{0,1} custom-call(a, b), custom_call_target=\"lapack_strsm_ffi\", "
      "backend_config={diag = 110 : ui8, side = 108 : ui8, trans_x = 116 : ui8, "
      "uplo = 108 : ui8}",
      "  a = f32[2,2] parameter(0)\n  b = f32[2,1] parameter(1)\n",
      {F32({2, 2}, {2, 0, 1, 4}), F32({2, 1}, {5, 8})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(DoubleValues(*result), ElementsAre(1.5, 2));
}

TEST(LapackTest, AFullSvdWhoseUIsTooSmallIsRefusedBeforeLapackWritesIt) {
  // mode 'A' writes u as 3 x 3; the declared u is 3 x 2 (what 'S' gives).
  auto result = RunCall(
      "(f32[3,2]{0,1}, f32[2]{0}, f32[3,2]{0,1}, f32[2,2]{0,1}, s32[]) "
      "custom-call(a), custom_call_target=\"lapack_sgesdd_ffi\", "
      "backend_config={mode = 65 : ui8}",
      "  a = f32[3,2] parameter(0)\n", {F32({3, 2}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("mode 'A'"));
}

}  // namespace lapack_test
}  // namespace causeway::exec
