// exec/gemm.h's products for a processor without AVX2 and FMA: Eigen alone,
// compiled with the build's flags (plain x86-64 where the build machine
// lacks AVX2, CMakeLists.txt). Runs only where exec/cpu_isa.h chose it.
#define Eigen CwEigenBaseline
#define CW_GEMM_ISA gemm_baseline
#define CW_GEMM_EIGEN_ONLY 1
#define CW_GEMM_EIGEN_L1_FACTOR 1
#include "causeway/exec/gemm_kernels.inc"
