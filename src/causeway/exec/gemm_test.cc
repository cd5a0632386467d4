// Tests for exec/gemm.h on every instruction set this processor can run:
// each kernel (our register-tiled float kernel, Eigen's GEMM) against a
// reference computed in double, on shapes that cover every tile edge, the
// four storage orders, strided operands and accumulation.
#include "causeway/exec/gemm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "causeway/exec/cpu_isa.h"
#include "causeway/exec/gemm_isa.h"
#include "gtest/gtest.h"

namespace causeway::exec {
namespace gemm_test {

// A stored matrix with `pad` unused elements after each stored row.
struct Stored {
  std::vector<float> data;
  int64_t stride = 0;
  bool transposed = false;
  float at(int64_t r, int64_t c) const {
    return transposed ? data[c * stride + r] : data[r * stride + c];
  }
};

// Small integers: every product and sum below 2^24 is exact in float, so
// every kernel must give the reference's bits whatever its order.
Stored MakeMatrix(int64_t rows, int64_t cols, bool transposed, int64_t pad,
                  std::mt19937& rng, bool integers) {
  Stored s;
  s.transposed = transposed;
  const int64_t stored_rows = transposed ? cols : rows;
  s.stride = (transposed ? rows : cols) + pad;
  s.data.resize(stored_rows * s.stride);
  std::uniform_int_distribution<int> small(-4, 4);
  std::normal_distribution<float> normal;
  for (float& x : s.data) {
    x = integers ? static_cast<float>(small(rng)) : normal(rng);
  }
  return s;
}

std::vector<double> Reference(const Stored& a, const Stored& b, int64_t m,
                              int64_t n, int64_t k) {
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) {
        out[i * n + j] += double{a.at(i, p)} * double{b.at(p, j)};
      }
    }
  }
  return out;
}

GemmCall<float> CallOf(const Stored& a, const Stored& b, int64_t m, int64_t n,
                       int64_t k, std::vector<float>& c, int64_t ldc,
                       bool accumulate) {
  GemmCall<float> call;
  call.m = m;
  call.n = n;
  call.k = k;
  call.a = {a.data.data(), a.stride, a.transposed};
  call.b = {b.data.data(), b.stride, b.transposed};
  call.c = c.data();
  call.ldc = ldc;
  call.accumulate = accumulate;
  return call;
}

// The kernels under test: every (instruction set, kernel) this processor
// runs. SmallGemm reads B by rows, so it is given row-major B only (gemm.cc
// transposes the others first).
enum class Kernel {
  kEigenBaseline,
  kSmallAvx2,
  kEigenAvx2,
  kSmallAvx512,
  kEigenAvx512
};

std::vector<Kernel> KernelsHere() {
  std::vector<Kernel> kernels = {Kernel::kEigenBaseline};
  if (CpuSupportsAvx2()) {
    kernels.push_back(Kernel::kSmallAvx2);
    kernels.push_back(Kernel::kEigenAvx2);
  }
  if (CpuSupportsAvx512()) {
    kernels.push_back(Kernel::kSmallAvx512);
    kernels.push_back(Kernel::kEigenAvx512);
  }
  return kernels;
}

std::string KernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kEigenBaseline:
      return "eigen/baseline";
    case Kernel::kSmallAvx2:
      return "small/avx2";
    case Kernel::kEigenAvx2:
      return "eigen/avx2";
    case Kernel::kSmallAvx512:
      return "small/avx512";
    case Kernel::kEigenAvx512:
      return "eigen/avx512";
  }
  return "?";
}

void RunKernel(Kernel kernel, const GemmCall<float>& call) {
  const bool small =
      kernel == Kernel::kSmallAvx2 || kernel == Kernel::kSmallAvx512;
  if (small) {
    ASSERT_FALSE(call.b.transposed);
    const int64_t a_row = call.a.transposed ? 1 : call.a.stride;
    const int64_t a_col = call.a.transposed ? call.a.stride : 1;
    auto* run = kernel == Kernel::kSmallAvx2 ? gemm_avx2::SmallGemm
                                             : gemm_avx512::SmallGemm;
    run(call.m, call.n, call.k, call.a.data, a_row, a_col, call.b.data,
        call.b.stride, call.c, call.ldc, call.accumulate);
  } else if (kernel == Kernel::kEigenBaseline) {
    gemm_baseline::EigenGemm(call);
  } else if (kernel == Kernel::kEigenAvx2) {
    gemm_avx2::EigenGemm(call);
  } else {
    gemm_avx512::EigenGemm(call);
  }
}

// (m, n, k): rows around the tile heights (6) and columns around the
// vector widths (8, 16) and tile widths (16, 64) of both instruction sets.
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kShapes = {
    {1, 1, 1},    {1, 17, 3},     {5, 8, 7},    {6, 16, 16},
    {7, 15, 9},   {12, 64, 5},    {13, 65, 33}, {6, 130, 2},
    {19, 31, 64}, {16, 128, 128}, {3, 7, 0}};

TEST(GemmTest, EveryKernelMatchesTheReferenceExactlyOnIntegers) {
  std::mt19937 rng(7);
  for (Kernel kernel : KernelsHere()) {
    for (auto [m, n, k] : kShapes) {
      for (int layout = 0; layout < 4; ++layout) {
        const bool at = layout & 1, bt = layout & 2;
        if (bt &&
            (kernel == Kernel::kSmallAvx2 || kernel == Kernel::kSmallAvx512)) {
          continue;
        }
        Stored a = MakeMatrix(m, k, at, /*pad=*/3, rng, true);
        Stored b = MakeMatrix(k, n, bt, /*pad=*/1, rng, true);
        const int64_t ldc = n + 2;
        std::vector<float> c(m * ldc, 99.0f);
        RunKernel(kernel, CallOf(a, b, m, n, k, c, ldc, false));
        const std::vector<double> want = Reference(a, b, m, n, k);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            const float expected =
                j < n ? static_cast<float>(want[i * n + j]) : 99.0f;
            ASSERT_EQ(c[i * ldc + j], expected)
                << KernelName(kernel) << " " << m << "x" << n << "x" << k
                << " layout " << layout << " at (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

TEST(GemmTest, EveryKernelIsCloseToTheReferenceOnRandomValues) {
  std::mt19937 rng(8);
  for (Kernel kernel : KernelsHere()) {
    for (auto [m, n, k] : kShapes) {
      Stored a = MakeMatrix(m, k, false, 0, rng, false);
      Stored b = MakeMatrix(k, n, false, 0, rng, false);
      std::vector<float> c(m * n);
      RunKernel(kernel, CallOf(a, b, m, n, k, c, n, false));
      const std::vector<double> want = Reference(a, b, m, n, k);
      for (int64_t i = 0; i < m * n; ++i) {
        ASSERT_NEAR(c[i], want[i], 1e-5 * (k + 1) * (1 + std::abs(want[i])))
            << KernelName(kernel) << " " << m << "x" << n << "x" << k;
      }
    }
  }
}

// What keeps the dot-add fusion's bits equal to dot-then-add (evaluator.cc):
// accumulating adds the whole product to C once.
TEST(GemmTest, AccumulatingAddsTheWholeProductToC) {
  std::mt19937 rng(9);
  for (Kernel kernel : KernelsHere()) {
    for (auto [m, n, k] : kShapes) {
      Stored a = MakeMatrix(m, k, false, 0, rng, false);
      Stored b = MakeMatrix(k, n, false, 0, rng, false);
      std::vector<float> product(m * n), c(m * n);
      std::normal_distribution<float> normal;
      for (float& x : c) x = normal(rng);
      std::vector<float> want = c;
      RunKernel(kernel, CallOf(a, b, m, n, k, product, n, false));
      for (int64_t i = 0; i < m * n; ++i) want[i] += product[i];
      RunKernel(kernel, CallOf(a, b, m, n, k, c, n, true));
      ASSERT_EQ(0, std::memcmp(c.data(), want.data(), c.size() * 4))
          << KernelName(kernel) << " " << m << "x" << n << "x" << k;
    }
  }
}

// The public entry point, on the instruction set this process chose, on
// both sides of the bound between the kernels and with B stored
// transposed (which it transposes itself, in 8 x 8 blocks).
TEST(GemmTest, GemmMatchesTheReferenceInEveryLayoutAndSize) {
  std::mt19937 rng(10);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {16, 128, 128}, {9, 23, 17},   {64, 10, 128},
      {33, 70, 600},  {300, 65, 90}, {160, 160, 200}};
  for (auto [m, n, k] : shapes) {
    for (int layout = 0; layout < 4; ++layout) {
      Stored a = MakeMatrix(m, k, layout & 1, 2, rng, true);
      Stored b = MakeMatrix(k, n, layout & 2, 5, rng, true);
      std::vector<float> c(m * n);
      Gemm(CallOf(a, b, m, n, k, c, n, false));
      const std::vector<double> want = Reference(a, b, m, n, k);
      for (int64_t i = 0; i < m * n; ++i) {
        ASSERT_EQ(c[i], static_cast<float>(want[i]))
            << m << "x" << n << "x" << k << " layout " << layout << " on "
            << CpuIsaName(ActiveCpuIsa());
      }
    }
  }
}

// The same through the public call, in every storage order (a B stored
// transposed takes gemm.cc's transposing paths: m < n computes C^T).
TEST(GemmTest, GemmAccumulatesTheWholeProductInEveryLayout) {
  std::mt19937 rng(11);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {16, 128, 128}, {9, 23, 17}, {64, 10, 128}, {21, 21, 40}};
  for (auto [m, n, k] : shapes) {
    for (int layout = 0; layout < 4; ++layout) {
      Stored a = MakeMatrix(m, k, layout & 1, 1, rng, false);
      Stored b = MakeMatrix(k, n, layout & 2, 3, rng, false);
      std::vector<float> product(m * n), c(m * n);
      std::normal_distribution<float> normal;
      for (float& x : c) x = normal(rng);
      std::vector<float> want = c;
      Gemm(CallOf(a, b, m, n, k, product, n, false));
      for (int64_t i = 0; i < m * n; ++i) want[i] += product[i];
      Gemm(CallOf(a, b, m, n, k, c, n, true));
      ASSERT_EQ(0, std::memcmp(c.data(), want.data(), c.size() * 4))
          << m << "x" << n << "x" << k << " layout " << layout;
    }
  }
}

// Which path a stored-transposed B takes does not change the bits: C^T =
// B^T A^T (m < n) and transposing B give the same chains of multiply-adds.
TEST(GemmTest, BothPathsForATransposedBGiveTheSameBits) {
  std::mt19937 rng(12);
  const int64_t m = 20, n = 24, k = 50;
  Stored a = MakeMatrix(m, k, false, 0, rng, false);
  Stored b = MakeMatrix(k, n, true, 0, rng, false);
  std::vector<float> c_t(m * n), c(m * n);
  Gemm(CallOf(a, b, m, n, k, c, n, false));  // m < n: C^T = B^T A^T.
  // The kernel itself on B transposed by hand.
  std::vector<float> b_rows(k * n);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) b_rows[p * n + j] = b.at(p, j);
  }
  if (ActiveCpuIsa() == CpuIsa::kBaseline) {
    GTEST_SKIP() << "plain x86-64 has no SmallGemm: Gemm runs on Eigen alone";
  }
  auto* small = ActiveCpuIsa() == CpuIsa::kAvx512 ? gemm_avx512::SmallGemm
                                                  : gemm_avx2::SmallGemm;
  small(m, n, k, a.data.data(), k, 1, b_rows.data(), n, c_t.data(), n, false);
  EXPECT_EQ(0, std::memcmp(c.data(), c_t.data(), c.size() * 4));
}

TEST(GemmTest, DoubleAndIntegerProductsRunOnEigen) {
  const double ad[] = {1, 2, 3, 4, 5, 6};
  const double bd[] = {7, 8, 9, 10, 11, 12};
  double cd[4];
  GemmCall<double> d;
  d.m = 2, d.n = 2, d.k = 3;
  d.a = {ad, 3, false};
  d.b = {bd, 2, false};
  d.c = cd;
  d.ldc = 2;
  Gemm(d);
  EXPECT_EQ(cd[0], 58);
  EXPECT_EQ(cd[3], 154);
  const int64_t ai[] = {int64_t{1} << 40, 1};
  const int64_t bi[] = {1 << 20, 3};
  int64_t ci[1];
  GemmCall<int64_t> s;
  s.m = 1, s.n = 1, s.k = 2;
  s.a = {ai, 2, false};
  s.b = {bi, 1, false};
  s.c = ci;
  s.ldc = 1;
  Gemm(s);
  EXPECT_EQ(ci[0], (int64_t{1} << 60) + 3);
}

TEST(CpuIsaTest, UnsetOrAutoDetects) {
  std::string warning;
  EXPECT_EQ(ChooseCpuIsa(nullptr, CpuIsa::kAvx512, &warning), CpuIsa::kAvx512);
  EXPECT_EQ(ChooseCpuIsa("", CpuIsa::kAvx2, &warning), CpuIsa::kAvx2);
  EXPECT_EQ(ChooseCpuIsa("auto", CpuIsa::kBaseline, &warning),
            CpuIsa::kBaseline);
  EXPECT_EQ(warning, "");
}

TEST(CpuIsaTest, ANarrowerSetIsForcedOnAnyProcessor) {
  std::string warning;
  EXPECT_EQ(ChooseCpuIsa("avx2", CpuIsa::kAvx512, &warning), CpuIsa::kAvx2);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ChooseCpuIsa("baseline", CpuIsa::kAvx512, &warning),
            CpuIsa::kBaseline);
  EXPECT_EQ(ChooseCpuIsa("baseline", CpuIsa::kAvx2, &warning),
            CpuIsa::kBaseline);
  EXPECT_EQ(warning, "");
}

TEST(CpuIsaTest, AWiderSetThanTheProcessorsFallsBackWithAWarning) {
  std::string warning;
  EXPECT_EQ(ChooseCpuIsa("avx512", CpuIsa::kAvx512, &warning), CpuIsa::kAvx512);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ChooseCpuIsa("avx512", CpuIsa::kAvx2, &warning), CpuIsa::kAvx2);
  EXPECT_NE(warning.find("CAUSEWAY_CPU_ISA=avx512, but this processor lacks "
                         "it: using the avx2 kernels"),
            std::string::npos)
      << warning;
  EXPECT_EQ(ChooseCpuIsa("avx2", CpuIsa::kBaseline, &warning),
            CpuIsa::kBaseline);
  EXPECT_NE(warning.find("using the baseline kernels"), std::string::npos)
      << warning;
}

TEST(CpuIsaTest, AnUnknownValueIsNamedAndDetected) {
  std::string warning;
  EXPECT_EQ(ChooseCpuIsa("sse9", CpuIsa::kAvx2, &warning), CpuIsa::kAvx2);
  EXPECT_NE(warning.find("'sse9' is not one of auto, baseline, avx2, avx512"),
            std::string::npos)
      << warning;
}

TEST(CpuIsaTest, TheProcessSettingFollowsTheEnvironment) {
  std::string warning;
  const CpuIsa widest = CpuSupportsAvx512() ? CpuIsa::kAvx512
                        : CpuSupportsAvx2() ? CpuIsa::kAvx2
                                            : CpuIsa::kBaseline;
  EXPECT_EQ(ActiveCpuIsa(),
            ChooseCpuIsa(std::getenv("CAUSEWAY_CPU_ISA"), widest, &warning));
}

}  // namespace gemm_test
}  // namespace causeway::exec
