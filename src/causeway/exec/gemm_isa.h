// The per-instruction-set halves of exec/gemm.h, for gemm.cc alone.
// gemm_kernels.inc defines them once per namespace: gemm_baseline.cc
// compiles it with the build's flags (Eigen only), gemm_avx2.cc with AVX2
// and FMA on, gemm_avx512.cc with AVX-512 on (CMake sets their flags), each with Eigen's namespace renamed, so that no inline function
// or template compiled for AVX-512 can be merged with the build's own by
// the linker and run on a processor without it.
#ifndef CAUSEWAY_EXEC_GEMM_ISA_H_
#define CAUSEWAY_EXEC_GEMM_ISA_H_

#include <cstdint>

#include "causeway/exec/gemm.h"

#define CW_DECLARE_GEMM_ISA(isa)                                            \
  namespace causeway::exec::isa {                                           \
  /* Our register-tiled float kernel: a(i, p) at a[i * a_row + p * a_col],  \
     b(p, j) at b[p * ldb + j]. */                                          \
  void SmallGemm(int64_t m, int64_t n, int64_t k, const float* a,           \
                 int64_t a_row, int64_t a_col, const float* b, int64_t ldb, \
                 float* c, int64_t ldc, bool accumulate);                   \
  /* Eigen's blocked GEMM. */                                               \
  void EigenGemm(const GemmCall<float>& call);                              \
  void EigenGemm(const GemmCall<double>& call);                             \
  void EigenGemm(const GemmCall<int64_t>& call);                            \
  }

namespace causeway::exec::gemm_baseline {
void EigenGemm(const GemmCall<float>& call);
void EigenGemm(const GemmCall<double>& call);
void EigenGemm(const GemmCall<int64_t>& call);
}  // namespace causeway::exec::gemm_baseline
CW_DECLARE_GEMM_ISA(gemm_avx2)
CW_DECLARE_GEMM_ISA(gemm_avx512)

#endif  // CAUSEWAY_EXEC_GEMM_ISA_H_
