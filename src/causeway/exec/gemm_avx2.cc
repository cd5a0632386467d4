// exec/gemm.h's kernels for AVX2 + FMA (CMake compiles this file with
// -mavx2 -mfma whatever the build's own flags).
#define Eigen CwEigenAvx2
#define CW_GEMM_ISA gemm_avx2
// Panels sized for a 4x larger L1 ran the 1024^3 f32 product ~10% faster
// on AMD Zen 4 (89 -> 100 GFLOP/s); no shape measured (256^3 .. 2048^3,
// skinny 128x4096x1024) got slower.
#define CW_GEMM_EIGEN_L1_FACTOR 4
#include "causeway/exec/gemm_kernels.inc"
