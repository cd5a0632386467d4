// Matrix products on one thread, for the dot and convolution kernels
// (linalg.cc): C (+)= A B on row-major storage, in float, double or int64.
//
// Each call runs on the calling thread (the runtime parallelises across
// devices; the benchmarks compare with single-threaded XLA) and on the
// instruction set of exec/cpu_isa.h: AVX-512 where the processor has it,
// else AVX2. Float products of at most kSmallGemmMaxK terms and a few
// million multiply-adds (gemm.cc has the bound per instruction set) run on
// our own register-tiled kernel, which reads A and B where they lie (no
// packing; a B stored transposed is transposed once into a scratch
// buffer); larger ones, and double and integer products, on Eigen's
// blocked GEMM compiled for the same instruction set.
//
// Bits: every output element is a fused multiply-add chain over k in
// order, per block of k (Eigen blocks a long k; our kernel never does). The
// same call on the same instruction set gives the same bits; AVX2 and
// AVX-512 may differ in the last bits where their blocking differs. With
// `accumulate`, the product of each k block is summed from zero and then
// added to C, so for a k that is not blocked the result is bit for bit
// C + (the product), as dot-then-add computes it.
//
// Thread-safe; no state but the instruction-set choice, made once.
#ifndef CAUSEWAY_EXEC_GEMM_H_
#define CAUSEWAY_EXEC_GEMM_H_

#include <cstdint>

namespace causeway::exec {

// One operand, a rows x cols matrix: element (r, c) is at
// data[r * stride + c], or at data[c * stride + r] when `transposed` (the
// stored matrix is its transpose).
template <typename T>
struct MatrixOperand {
  const T* data = nullptr;
  int64_t stride = 0;
  bool transposed = false;
};

// c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0) + sum over p < k of
// a(i, p) * b(p, j), for i < m, j < n. a is m x k, b is k x n. c must not
// overlap a or b.
template <typename T>
struct GemmCall {
  int64_t m = 0, n = 0, k = 0;
  MatrixOperand<T> a, b;
  T* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
};

inline constexpr int64_t kSmallGemmMaxK = 512;

void Gemm(const GemmCall<float>& call);
void Gemm(const GemmCall<double>& call);
void Gemm(const GemmCall<int64_t>& call);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_GEMM_H_
