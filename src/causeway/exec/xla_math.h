// XLA:CPU's floating-point math, element by element and on arrays, for
// kernels that compose it (the complex functions of complex_elementwise.cc
// are built from these as XLA's elemental emitter builds them).
//
// The f32 functions are XLA's own formulas, bit for bit (elementwise.cc has
// them and their measurements); f64 uses the C library, as the real f64
// kernels do. All of them expect the caller to run with denormals flushed
// (ScopedFlushDenormals), as XLA's kernels run. Pure functions; thread-safe.
#ifndef CAUSEWAY_EXEC_XLA_MATH_H_
#define CAUSEWAY_EXEC_XLA_MATH_H_

#include <cmath>
#include <complex>
#include <cstdint>

#include "causeway/exec/kernel_util.h"

namespace causeway::exec {

// A denormal as the signed zero the processor reads it as under DAZ (XLA's
// kernels run so). Bit-based, so that it holds whatever the mode: f16
// values are widened to float first, where none of them is denormal, as
// the processor's half-precision instructions do not flush either.
template <typename C>
inline C DenormalAsZero(C x) {
  using U = FloatBitsType<C>;
  constexpr int kMantissaBits = FloatFormat<C>::kMantissaBits;
  constexpr int kExponentBits = FloatFormat<C>::kExponentBits;
  constexpr U kExponentMask =
      static_cast<U>(((U{1} << kExponentBits) - 1) << kMantissaBits);
  const U bits = FloatToBits(x);
  if ((bits & kExponentMask) != 0) return x;
  return FloatFromBits<C>(static_cast<U>(bits & ~((U{1} << kMantissaBits) - 1) &
                                         ~kExponentMask));
}

// IEEE 754-2019 maximum/minimum: NaN-propagating, -0 < +0, denormals read
// as zero (as XLA's CPU backend).
template <typename C>
inline C FloatMax(C a, C b) {
  a = DenormalAsZero(a);
  b = DenormalAsZero(b);
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename C>
inline C FloatMin(C a, C b) {
  a = DenormalAsZero(a);
  b = DenormalAsZero(b);
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

// (a_r + a_i i)(b_r + b_i i) as XLA:CPU's fused loops compute it
// (EmitComplexMultiply, then LLVM's contraction): the real part's first
// product and the imaginary part's second one are fused multiply-adds
// (measured bit for bit with JAX 0.10.2 on 2^16 random c64 products).
template <typename F>
inline std::complex<F> ComplexMultiply(std::complex<F> a, std::complex<F> b) {
  return {std::fma(a.real(), b.real(), -(a.imag() * b.imag())),
          std::fma(a.imag(), b.real(), a.real() * b.imag())};
}

// out[i] = f(in[i]) over n elements (in and out may be the same array).
void ExpArray(const float* in, float* out, int64_t n);
void ExpArray(const double* in, double* out, int64_t n);
void LogArray(const float* in, float* out, int64_t n);
void LogArray(const double* in, double* out, int64_t n);
void Log1pArray(const float* in, float* out, int64_t n);
void Log1pArray(const double* in, double* out, int64_t n);
void Expm1Array(const float* in, float* out, int64_t n);
void Expm1Array(const double* in, double* out, int64_t n);
void TanhArray(const float* in, float* out, int64_t n);
void TanhArray(const double* in, double* out, int64_t n);
void SqrtArray(const float* in, float* out, int64_t n);
void SqrtArray(const double* in, double* out, int64_t n);
void RsqrtArray(const float* in, float* out, int64_t n);
void RsqrtArray(const double* in, double* out, int64_t n);
void SinArray(const float* in, float* out, int64_t n);
void SinArray(const double* in, double* out, int64_t n);
void CosArray(const float* in, float* out, int64_t n);
void CosArray(const double* in, double* out, int64_t n);
// out[i] = atan2(y[i], x[i]); out[i] = pow(x[i], y[i]).
void Atan2Array(const float* y, const float* x, float* out, int64_t n);
void Atan2Array(const double* y, const double* x, double* out, int64_t n);
void PowArray(const float* x, const float* y, float* out, int64_t n);
void PowArray(const double* x, const double* y, double* out, int64_t n);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_XLA_MATH_H_
