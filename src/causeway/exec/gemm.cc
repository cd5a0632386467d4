#include "causeway/exec/gemm.h"

#include <immintrin.h>

#include <memory>
#include <vector>

#include "causeway/exec/cpu_isa.h"
#include "causeway/exec/gemm_isa.h"

namespace causeway::exec {
namespace {

struct GemmIsa {
  // Float products of at most this many multiply-adds (and at most
  // kSmallGemmMaxK terms) run on SmallGemm (bench/gemm_bench.cc: where it
  // beats Eigen on that instruction set).
  int64_t small_max_macs;  // -1: no SmallGemm on this instruction set.
  void (*small)(int64_t, int64_t, int64_t, const float*, int64_t, int64_t,
                const float*, int64_t, float*, int64_t, bool);
  void (*eigen_f32)(const GemmCall<float>&);
  void (*eigen_f64)(const GemmCall<double>&);
  void (*eigen_s64)(const GemmCall<int64_t>&);
};

const GemmIsa& Isa() {
  static const GemmIsa isa = [] {
    if (ActiveCpuIsa() == CpuIsa::kAvx512) {
      return GemmIsa{int64_t{1} << 22, gemm_avx512::SmallGemm,
                     gemm_avx512::EigenGemm, gemm_avx512::EigenGemm,
                     gemm_avx512::EigenGemm};
    }
    if (ActiveCpuIsa() == CpuIsa::kAvx2) {
      return GemmIsa{int64_t{1} << 20, gemm_avx2::SmallGemm,
                     gemm_avx2::EigenGemm, gemm_avx2::EigenGemm,
                     gemm_avx2::EigenGemm};
    }
    return GemmIsa{-1, nullptr, gemm_baseline::EigenGemm,
                   gemm_baseline::EigenGemm, gemm_baseline::EigenGemm};
  }();
  return isa;
}

// dst (rows x cols, row stride ldd) = the transpose of src (cols x rows,
// row stride lds), or dst + that transpose when kAdd, in 8 x 8 blocks
// transposed in registers (element by element in a build without AVX2,
// where SmallGemm never runs).
template <bool kAdd = false>
void Transpose(const float* src, int64_t lds, int64_t rows, int64_t cols,
               float* dst, int64_t ldd) {
  int64_t r0 = 0;
#if defined(__AVX2__)
  for (; r0 + 8 <= rows; r0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; ++i)
        v[i] = _mm256_loadu_ps(src + (c0 + i) * lds + r0);
      const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]);
      const __m256 t1 = _mm256_unpackhi_ps(v[0], v[1]);
      const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]);
      const __m256 t3 = _mm256_unpackhi_ps(v[2], v[3]);
      const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]);
      const __m256 t5 = _mm256_unpackhi_ps(v[4], v[5]);
      const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]);
      const __m256 t7 = _mm256_unpackhi_ps(v[6], v[7]);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44);
      const __m256 s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44);
      const __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44);
      const __m256 s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44);
      const __m256 s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      const __m256 out[8] = {_mm256_permute2f128_ps(s0, s4, 0x20),
                             _mm256_permute2f128_ps(s1, s5, 0x20),
                             _mm256_permute2f128_ps(s2, s6, 0x20),
                             _mm256_permute2f128_ps(s3, s7, 0x20),
                             _mm256_permute2f128_ps(s0, s4, 0x31),
                             _mm256_permute2f128_ps(s1, s5, 0x31),
                             _mm256_permute2f128_ps(s2, s6, 0x31),
                             _mm256_permute2f128_ps(s3, s7, 0x31)};
      for (int i = 0; i < 8; ++i) {
        float* row = dst + (r0 + i) * ldd + c0;
        _mm256_storeu_ps(
            row, kAdd ? _mm256_add_ps(_mm256_loadu_ps(row), out[i]) : out[i]);
      }
    }
    for (; c0 < cols; ++c0) {
      for (int64_t r = r0; r < r0 + 8; ++r)
        dst[r * ldd + c0] =
            kAdd ? dst[r * ldd + c0] + src[c0 * lds + r] : src[c0 * lds + r];
    }
  }
#endif
  for (; r0 < rows; ++r0) {
    for (int64_t c = 0; c < cols; ++c)
      dst[r0 * ldd + c] =
          kAdd ? dst[r0 * ldd + c] + src[c * lds + r0] : src[c * lds + r0];
  }
}

}  // namespace

// Scratch space for one product on this thread: a buffer kept per thread
// for small needs, else an allocation owned by the caller's `large`.
float* Scratch(int64_t floats, std::unique_ptr<float[]>& large) {
  constexpr int64_t kKeptFloats = int64_t{1} << 18;  // 1 MiB
  thread_local std::unique_ptr<float[]> kept(new float[kKeptFloats]);
  if (floats <= kKeptFloats) return kept.get();
  large.reset(new float[floats]);
  return large.get();
}

void Gemm(const GemmCall<float>& call) {
  const int64_t m = call.m, n = call.n, k = call.k;
  if (m == 0 || n == 0) return;
  const GemmIsa& isa = Isa();
  if (k > kSmallGemmMaxK || m * n * k > isa.small_max_macs) {
    isa.eigen_f32(call);
    return;
  }
  const MatrixOperand<float>& a = call.a;
  const MatrixOperand<float>& b = call.b;
  const int64_t a_row = a.transposed ? 1 : a.stride;
  const int64_t a_col = a.transposed ? a.stride : 1;
  if (!b.transposed) {
    isa.small(m, n, k, a.data, a_row, a_col, b.data, b.stride, call.c, call.ldc,
              call.accumulate);
    return;
  }
  // The kernel reads B by rows. A B stored transposed is B^T by rows, so
  // compute C^T = B^T A^T when A^T is by rows too (A stored transposed) or
  // is smaller to transpose than B (m < n), and transpose C^T back; else
  // transpose B (as Eigen's packing would copy it). Either way each element
  // is the same multiply-add chain over k, so the bits do not depend on
  // the choice.
  std::unique_ptr<float[]> large;
  if (a.transposed || m < n) {
    float* scratch = Scratch(n * m + (a.transposed ? 0 : k * m), large);
    float* c_t = scratch;
    const float* a_t = a.data;
    int64_t ld_a_t = a.stride;
    if (!a.transposed) {
      float* rows = scratch + n * m;
      Transpose(a.data, a.stride, k, m, rows, m);
      a_t = rows;
      ld_a_t = m;
    }
    isa.small(n, m, k, b.data, b.stride, 1, a_t, ld_a_t, c_t, m,
              /*accumulate=*/false);
    // C + (the product), as the kernel's own accumulation adds it.
    if (call.accumulate) {
      Transpose<true>(c_t, m, m, n, call.c, call.ldc);
    } else {
      Transpose(c_t, m, m, n, call.c, call.ldc);
    }
    return;
  }
  float* b_rows = Scratch(k * n, large);
  Transpose(b.data, b.stride, k, n, b_rows, n);
  isa.small(m, n, k, a.data, a_row, a_col, b_rows, n, call.c, call.ldc,
            call.accumulate);
}

void Gemm(const GemmCall<double>& call) {
  if (call.m == 0 || call.n == 0) return;
  Isa().eigen_f64(call);
}

void Gemm(const GemmCall<int64_t>& call) {
  if (call.m == 0 || call.n == 0) return;
  Isa().eigen_s64(call);
}

}  // namespace causeway::exec
