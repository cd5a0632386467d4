// exec/gemm.h's kernels for AVX-512 (F, CD, VL, DQ, BW; CMake compiles this
// file alone with those flags). Runs only where exec/cpu_isa.h chose it.
#define Eigen CwEigenAvx512
#define CW_GEMM_ISA gemm_avx512
#define CW_GEMM_AVX512 1
// Eigen already sizes for 4x its L1 under AVX-512 (its own measurement).
#define CW_GEMM_EIGEN_L1_FACTOR 1
#include "causeway/exec/gemm_kernels.inc"
