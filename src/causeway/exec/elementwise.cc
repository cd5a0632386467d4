// Elementwise kernels: unary and binary arithmetic, compare, select, clamp,
// convert, bitcast-convert and reduce-precision, with XLA's semantics for
// every edge case (integer division by zero, shifts past the width,
// NaN-propagating min/max, saturating float → int conversion, ...).
//
// Each kernel dispatches once on the element type and the opcode, then runs
// a tight typed loop over the elements. f16/bf16 compute in float and round
// to storage after each op, as XLA's CPU backend does (docs/hlo.md,
// "Rounding"). f32 exp, log, tanh (Eigen's, bit for bit XLA's), f32 and
// f64 rsqrt (the processor's estimate and Newton steps, as XLA chooses for
// the processor: exec/xla_cpu_target.h), erf, expm1, log1p and
// logistic follow XLA's own formulas, with its contractions. Kernels run with denormals flushed
// to zero and read as zero, as XLA's do.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__SSE__) || defined(__x86_64__)
#include <immintrin.h>
#endif

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/elementwise.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/multiply_add.h"
#include "causeway/exec/xla_cpu_target.h"
#include "causeway/exec/xla_math.h"

namespace causeway::exec {
namespace {

using hlo::ComparisonDirection;
using hlo::ComparisonType;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

std::string OpName(const Instruction& instr) {
  return absl::StrCat(std::string(hlo::OpcodeName(instr.opcode)), " '",
                      instr.name, "'");
}

absl::Status Unsupported(const Instruction& instr, PrimitiveType type) {
  return absl::InvalidArgumentError(
      absl::StrCat(OpName(instr), " does not accept element type ",
                   std::string(hlo::PrimitiveTypeName(type))));
}

// `operand` must have the dims of the result and element type `type`.
absl::Status CheckOperand(const Instruction& instr, const Literal& operand,
                          PrimitiveType type, const char* what) {
  if (!operand.shape().IsArray() || operand.shape().type() != type ||
      operand.shape().dims() != instr.shape.dims()) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(instr), ": ", what, " has shape ",
        operand.shape().ToString(/*with_layout=*/false), ", expected ",
        std::string(hlo::PrimitiveTypeName(type)), " with dims of ",
        instr.shape.ToString(/*with_layout=*/false)));
  }
  return absl::OkStatus();
}

absl::Status CheckArrayResult(const Instruction& instr) {
  if (!instr.shape.IsArray()) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(instr), " must have an array shape, not ",
                     instr.shape.ToString()));
  }
  return absl::OkStatus();
}

// Applies `f` (compute type → compute type) to each element.
template <typename T, typename F>
void MapUnary(const T* in, T* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = FromCompute<T>(f(ToCompute(in[i])));
}

template <typename T, typename F>
void MapBinary(const T* a, const T* b, T* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = FromCompute<T>(f(ToCompute(a[i]), ToCompute(b[i])));
  }
}

// ---------------------------------------------------------------------------
// Unary.

template <typename T>
absl::Status UnaryScalarFloat(const Instruction& instr, const T* in, T* out,
                        int64_t n) {
  using C = ComputeType<T>;
  switch (instr.opcode) {
    case Opcode::kNegate: MapUnary(in, out, n, [](C x) { return -x; }); break;
    case Opcode::kAbs: MapUnary(in, out, n, [](C x) { return std::fabs(x); }); break;
    case Opcode::kSign:
      MapUnary(in, out, n, [](C x) -> C {
        // NaN unchanged; ±0 and denormals (read as zero) give ±0.
        if (std::isnan(x)) return x;
        x = DenormalAsZero(x);
        if (x == C{0}) return x;
        return x > C{0} ? C{1} : C{-1};
      });
      break;
    case Opcode::kExp: MapUnary(in, out, n, [](C x) { return std::exp(x); }); break;
    case Opcode::kExpm1: MapUnary(in, out, n, [](C x) { return std::expm1(x); }); break;
    case Opcode::kLog: MapUnary(in, out, n, [](C x) { return std::log(x); }); break;
    case Opcode::kLog1p: MapUnary(in, out, n, [](C x) { return std::log1p(x); }); break;
    case Opcode::kTanh: MapUnary(in, out, n, [](C x) { return std::tanh(x); }); break;
    case Opcode::kLogistic:
      MapUnary(in, out, n, [](C x) { return C{1} / (C{1} + std::exp(-x)); });
      break;
    case Opcode::kSqrt: MapUnary(in, out, n, [](C x) { return std::sqrt(x); }); break;
    case Opcode::kCbrt: MapUnary(in, out, n, [](C x) { return std::cbrt(x); }); break;
    case Opcode::kErf: MapUnary(in, out, n, [](C x) { return std::erf(x); }); break;
    case Opcode::kSin: MapUnary(in, out, n, [](C x) { return std::sin(x); }); break;
    case Opcode::kCos: MapUnary(in, out, n, [](C x) { return std::cos(x); }); break;
    case Opcode::kTan: MapUnary(in, out, n, [](C x) { return std::tan(x); }); break;
    case Opcode::kFloor: MapUnary(in, out, n, [](C x) { return std::floor(x); }); break;
    case Opcode::kCeil: MapUnary(in, out, n, [](C x) { return std::ceil(x); }); break;
    case Opcode::kRoundNearestAfz:
      MapUnary(in, out, n, [](C x) { return std::round(x); });
      break;
    case Opcode::kRoundNearestEven:
      // The default rounding mode is to-nearest-even.
      MapUnary(in, out, n, [](C x) { return std::nearbyint(x); });
      break;
    default:
      return Unsupported(instr, instr.shape.type());
  }
  return absl::OkStatus();
}

void SqrtF32(const float* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_sqrt_ps(_mm256_loadu_ps(in + i)));
  }
#endif
  for (; i < n; ++i) out[i] = std::sqrt(in[i]);
}

using ArrayF = Eigen::Array<float, Eigen::Dynamic, 1>;

// exp as XLA's CPU emitter computes it (Cephes' range reduction and
// polynomial, with LLVM's contractions): exp(x) = 2^n * exp(r), n =
// floor(x log2(e) + 1/2) clamped to [-127, 127], r = x - n ln(2) in two
// parts. Written as a plain loop of fmas and selects that the compiler
// vectorises.
inline float ExpXlaElement(float x) {
  x = !(x < -87.8f) ? x : -87.8f;  // NaN passes both clamps.
  x = !(x > 88.8f) ? x : 88.8f;
  float n = std::floor(std::fma(x, std::bit_cast<float>(0x3FB8AA3Bu), 0.5f));
  n = !(n < -127.0f) ? n : -127.0f;
  n = !(n > 127.0f) ? n : 127.0f;
  float r = std::fma(-std::bit_cast<float>(0x3F318000u), n, x);
  r = std::fma(-std::bit_cast<float>(0xB95E8083u), n, r);
  float p = std::fma(r, std::bit_cast<float>(0x39506967u),
                     std::bit_cast<float>(0x3AB743CEu));
  p = std::fma(p, r, std::bit_cast<float>(0x3C088908u));
  p = std::fma(p, r, std::bit_cast<float>(0x3D2AA9C1u));
  p = std::fma(p, r, std::bit_cast<float>(0x3E2AAAAAu));
  p = std::fma(p, r, 0.5f);
  const float y = 1.0f + std::fma(p, r * r, r);
  // 2^n from its exponent bits (n is NaN only when y is).
  const int32_t exponent = static_cast<int32_t>(n == n ? n : 0.0f) + 127;
  return y * std::bit_cast<float>(static_cast<uint32_t>(exponent) << 23);
}

void ExpXla(const float* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  // ExpXlaElement, eight lanes at a time (the same operations).
  const __m256 lo = _mm256_set1_ps(-87.8f), hi = _mm256_set1_ps(88.8f);
  const __m256 n_lo = _mm256_set1_ps(-127.0f), n_hi = _mm256_set1_ps(127.0f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  auto c = [](uint32_t bits) { return _mm256_set1_ps(std::bit_cast<float>(bits)); };
  const __m256 log2e = c(0x3FB8AA3B), minus_c1 = c(0xBF318000),
               minus_c2 = c(0x395E8083);
  const __m256 p0 = c(0x39506967), p1 = c(0x3AB743CE), p2 = c(0x3C088908),
               p3 = c(0x3D2AA9C1), p4 = c(0x3E2AAAAA);
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(in + i);
    x = _mm256_blendv_ps(x, lo, _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    x = _mm256_blendv_ps(x, hi, _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    __m256 k = _mm256_floor_ps(_mm256_fmadd_ps(x, log2e, half));
    k = _mm256_blendv_ps(k, n_lo, _mm256_cmp_ps(k, n_lo, _CMP_LT_OQ));
    k = _mm256_blendv_ps(k, n_hi, _mm256_cmp_ps(k, n_hi, _CMP_GT_OQ));
    __m256 r = _mm256_fmadd_ps(minus_c1, k, x);
    r = _mm256_fmadd_ps(minus_c2, k, r);
    __m256 p = _mm256_fmadd_ps(r, p0, p1);
    p = _mm256_fmadd_ps(p, r, p2);
    p = _mm256_fmadd_ps(p, r, p3);
    p = _mm256_fmadd_ps(p, r, p4);
    p = _mm256_fmadd_ps(p, r, half);
    const __m256 y =
        _mm256_add_ps(one, _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r));
    const __m256 k_or_zero = _mm256_blendv_ps(
        k, _mm256_setzero_ps(), _mm256_cmp_ps(k, k, _CMP_UNORD_Q));
    const __m256i exponent = _mm256_add_epi32(_mm256_cvttps_epi32(k_or_zero),
                                              _mm256_set1_epi32(127));
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(y, _mm256_castsi256_ps(
                                          _mm256_slli_epi32(exponent, 23))));
  }
#endif
  for (; i < n; ++i) out[i] = ExpXlaElement(in[i]);
}

// log as XLA's CPU emitter computes it (Cephes' frexp, a degree-8
// polynomial in three parts, the exponent's ln(2) in two parts, with
// LLVM's contractions): -inf at 0 (and denormals, read as 0), +inf at
// +inf, NaN below 0 and for NaN.
inline float LogXlaElement(float x) {
  const float min_normal = std::bit_cast<float>(0x00800000u);
  const float clamped = !(min_normal < x) ? min_normal : x;
  const uint32_t bits = std::bit_cast<uint32_t>(clamped);
  float m = std::bit_cast<float>((bits & 0x807FFFFFu) | 0x3F000000u);
  float e = 1.0f + static_cast<float>(static_cast<int32_t>(bits >> 23) - 127);
  const bool below = m < std::bit_cast<float>(0x3F3504F3u);  // sqrt(1/2)
  const float tmp = below ? m : 0.0f;
  m = m - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  m = m + tmp;
  const float x2 = m * m;
  const float x3 = x2 * m;
  float y = std::fma(m, std::bit_cast<float>(0x3D9021BBu),
                     std::bit_cast<float>(0xBDEBD1B8u));
  float y1 = std::fma(m, std::bit_cast<float>(0xBDFE5D4Fu),
                      std::bit_cast<float>(0x3E11E9BFu));
  float y2 = std::fma(m, std::bit_cast<float>(0x3E4CCEACu),
                      std::bit_cast<float>(0xBE7FFFFCu));
  y = std::fma(y, m, std::bit_cast<float>(0x3DEF251Au));
  y1 = std::fma(y1, m, std::bit_cast<float>(0xBE2AAE50u));
  y2 = std::fma(y2, m, std::bit_cast<float>(0x3EAAAAAAu));
  y = std::fma(y, x3, y1);
  y = std::fma(y, x3, y2);
  y = std::fma(y, x3, std::bit_cast<float>(0xB95E8083u) * e);
  const float sum = std::fma(-0.5f, x2, m) + y;
  const float result = std::fma(std::bit_cast<float>(0x3F318000u), e, sum);
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  if (!(x > 0.0f)) return std::bit_cast<float>(0xFFFFFFFFu);  // NaN.
  return result;
}

void LogXla(const float* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  // LogXlaElement, eight lanes at a time (the same operations).
  auto c = [](uint32_t bits) { return _mm256_set1_ps(std::bit_cast<float>(bits)); };
  const __m256 min_normal = c(0x00800000), one = _mm256_set1_ps(1.0f);
  const __m256 sqrt_half = c(0x3F3504F3), minus_half = _mm256_set1_ps(-0.5f);
  const __m256 zero = _mm256_setzero_ps(), inf = c(0x7F800000),
               minus_inf = c(0xFF800000), nan = c(0xFFFFFFFF);
  const __m256 p0 = c(0x3D9021BB), p1 = c(0xBDEBD1B8), p2 = c(0x3DEF251A),
               p3 = c(0xBDFE5D4F), p4 = c(0x3E11E9BF), p5 = c(0xBE2AAE50),
               p6 = c(0x3E4CCEAC), p7 = c(0xBE7FFFFC), p8 = c(0x3EAAAAAA);
  const __m256 q1 = c(0xB95E8083), q2 = c(0x3F318000);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m256 clamped = _mm256_blendv_ps(
        x, min_normal, _mm256_cmp_ps(min_normal, x, _CMP_NLT_UQ));
    const __m256i bits = _mm256_castps_si256(clamped);
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
        _mm256_and_si256(bits, _mm256_set1_epi32(0x807FFFFF)),
        _mm256_set1_epi32(0x3F000000)));
    __m256 e = _mm256_add_ps(
        one, _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23),
                                                 _mm256_set1_epi32(127))));
    const __m256 below = _mm256_cmp_ps(m, sqrt_half, _CMP_LT_OQ);
    const __m256 tmp = _mm256_and_ps(m, below);
    m = _mm256_sub_ps(m, one);
    e = _mm256_sub_ps(e, _mm256_and_ps(one, below));
    m = _mm256_add_ps(m, tmp);
    const __m256 x2 = _mm256_mul_ps(m, m);
    const __m256 x3 = _mm256_mul_ps(x2, m);
    __m256 y = _mm256_fmadd_ps(m, p0, p1);
    __m256 y1 = _mm256_fmadd_ps(m, p3, p4);
    __m256 y2 = _mm256_fmadd_ps(m, p6, p7);
    y = _mm256_fmadd_ps(y, m, p2);
    y1 = _mm256_fmadd_ps(y1, m, p5);
    y2 = _mm256_fmadd_ps(y2, m, p8);
    y = _mm256_fmadd_ps(y, x3, y1);
    y = _mm256_fmadd_ps(y, x3, y2);
    y = _mm256_fmadd_ps(y, x3, _mm256_mul_ps(q1, e));
    const __m256 sum = _mm256_add_ps(_mm256_fmadd_ps(minus_half, x2, m), y);
    __m256 result = _mm256_fmadd_ps(q2, e, sum);
    result = _mm256_blendv_ps(result, nan, _mm256_cmp_ps(x, zero, _CMP_NGT_UQ));
    result = _mm256_blendv_ps(result, minus_inf,
                              _mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
    result = _mm256_blendv_ps(result, inf, _mm256_cmp_ps(x, inf, _CMP_EQ_OQ));
    _mm256_storeu_ps(out + i, result);
  }
#endif
  for (; i < n; ++i) out[i] = LogXlaElement(in[i]);
}

// exp on an array, for the formulas below.
ArrayF ExpOf(const ArrayF& v) {
  ArrayF r(v.size());
  ExpXla(v.data(), r.data(), v.size());
  return r;
}


// expm1 as XLA's CPU emitter computes it: tanh(x/2) * (exp(x) + 1) near
// zero, exp(x) - 1 for |x| > 1/2, x itself when x/2 underflows. `Round`
// rounds each intermediate to the storage type (identity for f32; f16
// arithmetic rounds after every op).
template <typename Round>
void Expm1Xla(const float* in, float* out, int64_t n, Round round) {
  Eigen::Map<const ArrayF> x(in, n);
  Eigen::Map<ArrayF> y(out, n);
  const ArrayF half_x = round(x * 0.5f);
  const ArrayF tanh_half_x = round(half_x.tanh());
  const ArrayF exp_x = round(ExpOf(x));
  const ArrayF near_zero = round(tanh_half_x * round(exp_x + 1.0f));
  const ArrayF far = round(exp_x - 1.0f);
  y = (half_x == 0.0f).select(x, (x.abs() > 0.5f).select(far, near_zero));
}

// log1p as XLA's CPU emitter computes it: Cephes' rational approximation
// for |x| < sqrt(2) - 1, log(1 + x) elsewhere.
void Log1pXla(const float* in, float* out, int64_t n) {
  static constexpr double kDenominator[] = {
      1.,
      1.5062909083469192043167E1,
      8.3047565967967209469434E1,
      2.2176239823732856465394E2,
      3.0909872225312059774938E2,
      2.1642788614495947685003E2,
      6.0118660497603843919306E1};
  static constexpr double kNumerator[] = {
      4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
      6.5787325942061044846969E0,  2.9911919328553073277375E1,
      6.0949667980987787057556E1,  5.7112963590585538103336E1,
      2.0039553499201281259648E1};
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    float numerator = 0, denominator = 0;
    for (double c : kNumerator) {
      numerator = std::fma(numerator, x, static_cast<float>(c));
    }
    for (double c : kDenominator) {
      denominator = std::fma(denominator, x, static_cast<float>(c));
    }
    const float x_squared = x * x;
    const float small =
        x + std::fma(x_squared, -0.5f,
                     (x * x_squared) * (numerator / denominator));
    out[i] = std::fabs(x) < 0.41421356237309504880f ? small
                                                    : LogXlaElement(x + 1.0f);
  }
}

// erf as XLA's CPU emitter computes it for f32: an odd/even rational
// interpolant (Eigen's newer one) evaluated with fused multiply-adds, and
// ±1 beyond |x| = 3.8325 (where erf rounds to 1).
void ErfXla(const float* in, float* out, int64_t n) {
  constexpr float kA1 = 1.128379143519084f, kA3 = 0.18520832239976145f,
                  kA5 = 0.050955695062380861f, kA7 = 0.0034082910107109506f,
                  kA9 = 0.00022905065861350646f;
  constexpr float kB0 = 1.0f, kB2 = 0.49746925110067538f,
                  kB4 = 0.11098505178285362f, kB6 = 0.014070470171167667f,
                  kB8 = 0.0010179625278914885f,
                  kB10 = 0.000023547966471313185f,
                  kB12 = -1.1791602954361697e-7f;
  constexpr float kOneBeyond = 3.832506856900711f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float x2 = x * x;
    float p = std::fma(x2, kA9, kA7);
    p = std::fma(x2, p, kA5);
    p = std::fma(x2, p, kA3);
    p = std::fma(x2, p, kA1);
    p = x * p;
    float q = std::fma(x2, kB12, kB10);
    q = std::fma(x2, q, kB8);
    q = std::fma(x2, q, kB6);
    q = std::fma(x2, q, kB4);
    q = std::fma(x2, q, kB2);
    q = std::fma(x2, q, kB0);
    out[i] = kOneBeyond <= std::fabs(x) ? std::copysign(1.0f, x) : p / q;
  }
}

// tanh as XLA's CPU emitter computes it: Eigen's rational approximation
// (bit for bit, with FMAs), except that |x| < 0.0004 gives x itself before
// any clamping, so a denormal x comes back unflushed, as XLA's does.
void TanhXla(const float* in, float* out, int64_t n) {
  Eigen::Map<ArrayF>(out, n) = Eigen::Map<const ArrayF>(in, n).tanh();
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(in[i]) < 0.0004f) out[i] = in[i];
  }
}

// Whether XLA's rsqrt takes the processor's estimate as it is: for every x
// but NaN and positive normal numbers (zeros, infinities, denormals and
// negatives).
inline bool RsqrtEstimateIsFinal(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t exponent = (bits >> 23) & 0xFF;
  const bool is_nan = exponent == 0xFF && (bits & 0x7FFFFF) != 0;
  const bool positive_normal = (bits >> 31) == 0 && exponent != 0 &&
                               exponent != 0xFF;
  return !is_nan && !positive_normal;
}

// One Newton step for 1/sqrt(x) from y, with XLA's contractions:
// y + (-y/2) * (x*y*y - 1).
template <typename F>
inline F RsqrtNewtonStep(F x, F y) {
  const F e = std::fma(x * y, y, F{-1});
  return std::fma(y * F{-0.5}, e, y);
}

// rsqrt as XLA's CPU emitter computes it (exec/xla_cpu_target.h): the
// processor's estimate (RSQRTSS/RSQRTPS) refined by two Newton steps (one
// on AMD), the estimate itself for zeros, infinities, denormals and
// negatives; 1/sqrt(x) without platform-dependent math. The estimate is
// the processor's own table, so this matches XLA on the same processor.
void RsqrtXla(const float* in, float* out, int64_t n) {
  const XlaCpuTarget& target = ActiveXlaCpuTarget();
  if (!target.platform_dependent_math) {
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / std::sqrt(in[i]);
    return;
  }
  const int steps = target.amd ? 1 : 2;
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 minus_one = _mm256_set1_ps(-1.0f);
  const __m256 minus_half = _mm256_set1_ps(-0.5f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    const __m256 y0 = _mm256_rsqrt_ps(x);
    __m256 y = y0;
    for (int step = 0; step < steps; ++step) {
      const __m256 e =
          _mm256_fmadd_ps(_mm256_mul_ps(x, y), y, minus_one);
      y = _mm256_fmadd_ps(_mm256_mul_ps(y, minus_half), e, y);
    }
    // The estimate is final unless x is a positive normal number.
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i exponent =
        _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF));
    const __m256i positive_normal = _mm256_andnot_si256(
        _mm256_or_si256(_mm256_cmpeq_epi32(exponent, _mm256_setzero_si256()),
                        _mm256_cmpeq_epi32(exponent, _mm256_set1_epi32(0xFF))),
        _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(-1)));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(y0, y, _mm256_castsi256_ps(
                                                          positive_normal)));
  }
#endif
  for (; i < n; ++i) {
    float estimate;
#if defined(__SSE__) || defined(__x86_64__)
    estimate = _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(in[i])));
#else
    estimate = 1.0f / std::sqrt(in[i]);
#endif
    float y = estimate;
    for (int step = 0; step < steps; ++step) y = RsqrtNewtonStep(in[i], y);
    out[i] = RsqrtEstimateIsFinal(in[i]) ? estimate : y;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// VRSQRT14PD of each element (AVX-512 F; the caller checks for it).
__attribute__((target("avx512f"))) void Rsqrt14(const double* in,
                                                double* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // maskz: GCC 12 warns of the undefined source _mm512_rsqrt14_pd uses.
    _mm512_storeu_pd(out + i,
                     _mm512_maskz_rsqrt14_pd(0xFF, _mm512_loadu_pd(in + i)));
  }
  for (; i < n; ++i) {
    out[i] = _mm_cvtsd_f64(
        _mm_rsqrt14_sd(_mm_setzero_pd(), _mm_set_sd(in[i])));
  }
}
#endif

// f64 rsqrt as XLA computes it: with AVX-512 F, the processor's estimate
// (VRSQRT14PD) refined by two Newton steps, the estimate itself below the
// smallest normal number and at infinity; else 1/sqrt(x).
void RsqrtXla(const double* in, double* out, int64_t n) {
  const XlaCpuTarget& target = ActiveXlaCpuTarget();
#if defined(__x86_64__) && defined(__GNUC__)
  if (target.platform_dependent_math && target.avx512f) {
    constexpr int64_t kBlock = 256;  // `in` and `out` may be one array.
    double estimate[kBlock];
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      const int64_t m = std::min(kBlock, n - begin);
      Rsqrt14(in + begin, estimate, m);
      for (int64_t k = 0; k < m; ++k) {
        const double x = in[begin + k];
        const double y0 = estimate[k];
        out[begin + k] =
            x < std::numeric_limits<double>::min() ||
                    x == std::numeric_limits<double>::infinity()
                ? y0
                : RsqrtNewtonStep(x, RsqrtNewtonStep(x, y0));
      }
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = 1.0 / std::sqrt(in[i]);
}

absl::Status UnaryF32(const Instruction& instr, const float* in, float* out,
                      int64_t n) {
  Eigen::Map<const ArrayF> x(in, n);
  Eigen::Map<ArrayF> y(out, n);
  switch (instr.opcode) {
    case Opcode::kExp: ExpXla(in, out, n); break;
    case Opcode::kLog: LogXla(in, out, n); break;
    case Opcode::kLog1p: Log1pXla(in, out, n); break;
    case Opcode::kExpm1:
      Expm1Xla(in, out, n, [](const ArrayF& v) -> const ArrayF& { return v; });
      break;
    case Opcode::kTanh: TanhXla(in, out, n); break;
    case Opcode::kLogistic: y = (1.0f + ExpOf(-x)).inverse(); break;
    case Opcode::kErf: ErfXla(in, out, n); break;
    case Opcode::kRsqrt: RsqrtXla(in, out, n); break;
    case Opcode::kSqrt: SqrtF32(in, out, n); break;
    default: return UnaryScalarFloat<float>(instr, in, out, n);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status UnaryFloat(const Instruction& instr, const T* in, T* out,
                        int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return UnaryF32(instr, in, out, n);
  } else if constexpr (kIsHalf<T>) {
    // Widen a block to f32, run the f32 kernel, round back. Where XLA
    // expands an op into several ops of the half type (logistic always,
    // expm1 for f16), round after each of them as it does.
    auto round = [](const ArrayF& v) {
      return v.unaryExpr([](float f) { return static_cast<float>(T(f)); });
    };
    constexpr int64_t kBlock = 512;
    float wide[kBlock], result[kBlock];
    for (int64_t start = 0; start < n; start += kBlock) {
      const int64_t m = std::min(kBlock, n - start);
      for (int64_t i = 0; i < m; ++i) wide[i] = static_cast<float>(in[start + i]);
      if (instr.opcode == Opcode::kLogistic) {
        Eigen::Map<const ArrayF> x(wide, m);
        Eigen::Map<ArrayF>(result, m) = round(1.0f + round(ExpOf(-x))).inverse();
      } else if (instr.opcode == Opcode::kExpm1 &&
                 std::is_same_v<T, hlo::F16>) {
        Expm1Xla(wide, result, m, round);
      } else {
        CW_RETURN_IF_ERROR(UnaryF32(instr, wide, result, m));
      }
      for (int64_t i = 0; i < m; ++i) out[start + i] = T(result[i]);
    }
    return absl::OkStatus();
  } else {
    if (instr.opcode == Opcode::kRsqrt) {
      RsqrtXla(in, out, n);
      return absl::OkStatus();
    }
    return UnaryScalarFloat<T>(instr, in, out, n);
  }
}

template <typename T>
absl::Status UnaryInt(const Instruction& instr, const T* in, T* out,
                      int64_t n) {
  using U = std::make_unsigned_t<T>;
  // Wide enough that arithmetic on U does not promote to signed int.
  using W = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
  constexpr int kBits = static_cast<int>(sizeof(T) * 8);
  switch (instr.opcode) {
    case Opcode::kNot:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(~in[i]);
      break;
    case Opcode::kNegate:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<T>(W{0} - static_cast<W>(static_cast<U>(in[i])));
      }
      break;
    case Opcode::kAbs:
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_signed_v<T>) {
          W w = static_cast<W>(static_cast<U>(in[i]));
          out[i] = in[i] < 0 ? static_cast<T>(W{0} - w) : in[i];
        } else {
          out[i] = in[i];
        }
      }
      break;
    case Opcode::kSign:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<T>((in[i] > 0) - (in[i] < 0));
      }
      break;
    case Opcode::kPopcnt:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<T>(std::popcount(static_cast<U>(in[i])));
      }
      break;
    case Opcode::kClz:
      for (int64_t i = 0; i < n; ++i) {
        int zeros = std::countl_zero(static_cast<U>(in[i]));
        out[i] = static_cast<T>(zeros > kBits ? kBits : zeros);
      }
      break;
    default:
      return Unsupported(instr, instr.shape.type());
  }
  return absl::OkStatus();
}

absl::Status UnaryPred(const Instruction& instr, const bool* in, bool* out,
                       int64_t n) {
  if (instr.opcode != Opcode::kNot) {
    return Unsupported(instr, PrimitiveType::kPred);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = !in[i];
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Binary.

// A multiply-add contracted as XLA's CPU backend does (multiply_add.h):
// one rounding of ±(x * y) ± z; ps and as are the signs (±1).
template <typename T>
T ContractedMultiplyAdd(T x, T y, T z, int ps, int as) {
  return std::fma(ps < 0 ? -x : x, y, as < 0 ? -z : z);
}

// Calls map(f) with f the element function of a float binary op (on
// ComputeType<T> values): one definition of each op for every way of
// feeding it operands.
template <typename T, typename Map>
absl::Status WithBinaryFloatOp(const Instruction& instr, Map map) {
  using C = ComputeType<T>;
  switch (instr.opcode) {
    case Opcode::kAdd: map([](C x, C y) { return x + y; }); break;
    case Opcode::kSubtract: map([](C x, C y) { return x - y; }); break;
    case Opcode::kMultiply: map([](C x, C y) { return x * y; }); break;
    case Opcode::kDivide: map([](C x, C y) { return x / y; }); break;
    case Opcode::kRemainder:
      map([](C x, C y) { return std::fmod(x, y); });
      break;
    case Opcode::kMaximum: map(FloatMax<C>); break;
    case Opcode::kMinimum: map(FloatMin<C>); break;
    case Opcode::kPower:
      map([](C x, C y) { return std::pow(x, y); });
      break;
    case Opcode::kAtan2:
      map([](C x, C y) { return std::atan2(x, y); });
      break;
    default:
      return Unsupported(instr, instr.shape.type());
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BinaryFloat(const Instruction& instr, const T* a, const T* b,
                         T* out, int64_t n) {
  return WithBinaryFloatOp<T>(
      instr, [&](auto f) { MapBinary(a, b, out, n, f); });
}

// x^y by squaring over the low 6 bits of y (larger exponents overflow any
// base but 0, 1 and -1 anyway), as XLA. A negative exponent gives 1 for
// base 1 and 0 otherwise (even for base -1).
template <typename T>
inline T IntPow(T base, T exponent) {
  using W = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
  W acc = 1;
  W b = static_cast<W>(static_cast<std::make_unsigned_t<T>>(base));
  auto e = static_cast<std::make_unsigned_t<T>>(exponent);
  for (int i = 0; i < 6; ++i) {
    if (e & 1) acc *= b;
    b *= b;
    e >>= 1;
  }
  // The sign test reads the exponent as signed whatever its type, as XLA.
  if (static_cast<std::make_signed_t<T>>(exponent) < 0) {
    return base == 1 ? T{1} : T{0};
  }
  return static_cast<T>(acc);
}

template <typename T>
absl::Status BinaryInt(const Instruction& instr, const T* a, const T* b,
                       T* out, int64_t n) {
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  using W = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
  constexpr U kBits = static_cast<U>(sizeof(T) * 8);
  constexpr T kMin = std::numeric_limits<T>::min();
  auto wide = [](T x) { return static_cast<W>(static_cast<U>(x)); };
  switch (instr.opcode) {
    case Opcode::kAdd:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(wide(a[i]) + wide(b[i]));
      break;
    case Opcode::kSubtract:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(wide(a[i]) - wide(b[i]));
      break;
    case Opcode::kMultiply:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(wide(a[i]) * wide(b[i]));
      break;
    case Opcode::kDivide:
      // x / 0 = -1 (all bits set); INT_MIN / -1 = INT_MIN.
      for (int64_t i = 0; i < n; ++i) {
        T x = a[i], y = b[i];
        if (y == 0) {
          out[i] = static_cast<T>(~U{0});
        } else if (std::is_signed_v<T> && x == kMin && y == static_cast<T>(-1)) {
          out[i] = kMin;
        } else {
          out[i] = static_cast<T>(x / y);
        }
      }
      break;
    case Opcode::kRemainder:
      // x % 0 = x; INT_MIN % -1 = 0.
      for (int64_t i = 0; i < n; ++i) {
        T x = a[i], y = b[i];
        if (y == 0) {
          out[i] = x;
        } else if (std::is_signed_v<T> && y == static_cast<T>(-1)) {
          out[i] = 0;
        } else {
          out[i] = static_cast<T>(x % y);
        }
      }
      break;
    case Opcode::kMaximum:
      for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
      break;
    case Opcode::kMinimum:
      for (int64_t i = 0; i < n; ++i) out[i] = std::min(a[i], b[i]);
      break;
    case Opcode::kPower:
      for (int64_t i = 0; i < n; ++i) out[i] = IntPow(a[i], b[i]);
      break;
    case Opcode::kAnd:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] & b[i]);
      break;
    case Opcode::kOr:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] | b[i]);
      break;
    case Opcode::kXor:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] ^ b[i]);
      break;
    // Shift amounts are read as unsigned: anything >= the width (negative
    // amounts included) shifts every bit out.
    case Opcode::kShiftLeft:
      for (int64_t i = 0; i < n; ++i) {
        U s = static_cast<U>(b[i]);
        out[i] = s >= kBits ? T{0} : static_cast<T>(wide(a[i]) << s);
      }
      break;
    case Opcode::kShiftRightLogical:
      for (int64_t i = 0; i < n; ++i) {
        U s = static_cast<U>(b[i]);
        out[i] = s >= kBits ? T{0} : static_cast<T>(static_cast<U>(a[i]) >> s);
      }
      break;
    case Opcode::kShiftRightArithmetic:
      for (int64_t i = 0; i < n; ++i) {
        U s = static_cast<U>(b[i]);
        S x = static_cast<S>(a[i]);
        out[i] = static_cast<T>(s >= kBits ? (x < 0 ? S{-1} : S{0})
                                           : static_cast<S>(x >> s));
      }
      break;
    default:
      return Unsupported(instr, instr.shape.type());
  }
  return absl::OkStatus();
}

absl::Status BinaryPred(const Instruction& instr, const bool* a,
                        const bool* b, bool* out, int64_t n) {
  switch (instr.opcode) {
    case Opcode::kAnd:
    case Opcode::kMultiply:
    case Opcode::kMinimum:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] && b[i];
      break;
    case Opcode::kOr:
    case Opcode::kAdd:
    case Opcode::kMaximum:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] || b[i];
      break;
    case Opcode::kXor:
    case Opcode::kSubtract:
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] != b[i];
      break;
    default:
      return Unsupported(instr, PrimitiveType::kPred);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Compare.

template <typename K, typename Key>
void CompareLoop(ComparisonDirection direction, const K* a, const K* b,
                 bool* out, int64_t n, Key key) {
  switch (direction) {
    case ComparisonDirection::kEq:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) == key(b[i]);
      break;
    case ComparisonDirection::kNe:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) != key(b[i]);
      break;
    case ComparisonDirection::kLt:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) < key(b[i]);
      break;
    case ComparisonDirection::kLe:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) <= key(b[i]);
      break;
    case ComparisonDirection::kGt:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) > key(b[i]);
      break;
    case ComparisonDirection::kGe:
      for (int64_t i = 0; i < n; ++i) out[i] = key(a[i]) >= key(b[i]);
      break;
  }
}

// A float's bits as a signed integer that orders -NaN < -inf < ... < -0 <
// +0 < ... < +inf < +NaN.
template <typename T>
inline auto TotalOrderKey(T value) {
  using U = FloatBitsType<T>;
  using S = std::make_signed_t<U>;
  S s = static_cast<S>(FloatToBits(value));
  constexpr int kShift = static_cast<int>(sizeof(U) * 8 - 1);
  return static_cast<S>(s ^ static_cast<S>(static_cast<U>(s >> kShift) >> 1));
}

// ---------------------------------------------------------------------------
// Reduce-precision.

template <typename T>
T ReducePrecisionElement(T value, int exponent_bits, int mantissa_bits) {
  using U = FloatBitsType<T>;
  constexpr int kSrcExponentBits = FloatFormat<T>::kExponentBits;
  constexpr int kSrcMantissaBits = FloatFormat<T>::kMantissaBits;
  constexpr int kBits = static_cast<int>(sizeof(U) * 8);
  const U original = FloatToBits(value);
  U x = original;
  if (mantissa_bits < kSrcMantissaBits) {
    // Round to nearest even at the new last mantissa bit.
    const int shift = kSrcMantissaBits - mantissa_bits;
    const U last_bit_mask = static_cast<U>(U{1} << shift);
    const U base_bias = static_cast<U>((last_bit_mask >> 1) - 1);
    const U last_bit = static_cast<U>((x & last_bit_mask) >> shift);
    const U truncation_mask = static_cast<U>(~(last_bit_mask - 1));
    x = static_cast<U>(static_cast<U>(x + last_bit + base_bias) & truncation_mask);
  }
  if (exponent_bits < kSrcExponentBits) {
    const U sign_mask = static_cast<U>(U{1} << (kBits - 1));
    const U exponent_mask =
        static_cast<U>(((U{1} << kSrcExponentBits) - 1) << kSrcMantissaBits);
    const U exponent_bias = static_cast<U>((U{1} << (kSrcExponentBits - 1)) - 1);
    const U reduced_bias = static_cast<U>((U{1} << (exponent_bits - 1)) - 1);
    const U max_exponent = static_cast<U>(exponent_bias + reduced_bias);
    const U min_exponent = static_cast<U>(exponent_bias - reduced_bias);
    const U exponent = static_cast<U>(x & exponent_mask);
    const U signed_zero = static_cast<U>(x & sign_mask);
    if (exponent > static_cast<U>(max_exponent << kSrcMantissaBits)) {
      x = static_cast<U>(signed_zero | exponent_mask);  // ±inf.
    } else if (exponent <= static_cast<U>(min_exponent << kSrcMantissaBits)) {
      x = signed_zero;
    }
  }
  // NaNs stay NaN (the rounding above could have turned them into inf).
  if (std::isnan(ToCompute(value))) return value;
  return FloatFromBits<T>(x);
}

// ---------------------------------------------------------------------------
// Clamp helpers.

template <typename T>
void ClampLoop(const T* lo, int64_t lo_step, const T* x, const T* hi,
               int64_t hi_step, T* out, int64_t n) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < n; ++i) {
    C l = ToCompute(lo[i * lo_step]);
    C h = ToCompute(hi[i * hi_step]);
    C v = ToCompute(x[i]);
    if constexpr (kIsFloat<T>) {
      out[i] = FromCompute<T>(FloatMin(FloatMax(v, l), h));
    } else {
      out[i] = std::min(std::max(v, l), h);
    }
  }
}

// ---------------------------------------------------------------------------
// Select.

#if defined(__AVX2__)
// All-ones lanes of width sizeof(U) where p is true, for 32 / sizeof(U)
// predicates.
template <typename U>
inline __m256i PredicateMask(const bool* p) {
  const __m256i zero = _mm256_setzero_si256();
  if constexpr (sizeof(U) == 1) {
    return _mm256_cmpgt_epi8(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), zero);
  } else if constexpr (sizeof(U) == 2) {
    return _mm256_cmpgt_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
        zero);
  } else if constexpr (sizeof(U) == 4) {
    return _mm256_cmpgt_epi32(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
        zero);
  } else {
    int32_t bytes;
    std::memcpy(&bytes, p, 4);
    return _mm256_cmpgt_epi64(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(bytes)),
                              zero);
  }
}
#endif

template <typename U>
void SelectBits(const bool* p, const U* a, const U* b, U* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  constexpr int64_t kLanes = 32 / sizeof(U);
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i mask = PredicateMask<U>(p + i);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_blendv_epi8(y, x, mask));
  }
#endif
  for (; i < n; ++i) out[i] = p[i] ? a[i] : b[i];
}

// ---------------------------------------------------------------------------
// Sub-byte integers (s2, s4, u2, u4): the integer rules above on values of
// kBits bits, wrapping to them.

template <typename N>
absl::Status UnaryNarrow(const Instruction& instr, const N* in, N* out,
                         int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = in[i].value();
    switch (instr.opcode) {
      case Opcode::kNot:
        out[i] = N::Wrap(~v);
        break;
      case Opcode::kNegate:
        out[i] = N::Wrap(-v);
        break;
      case Opcode::kAbs:
        out[i] = N::Wrap(v < 0 ? -v : v);
        break;
      case Opcode::kSign:
        out[i] = N::Wrap((v > 0) - (v < 0));
        break;
      case Opcode::kPopcnt:
        out[i] = N::Wrap(std::popcount(in[i].bits));
        break;
      case Opcode::kClz:
        out[i] = N::Wrap(std::countl_zero(in[i].bits) - (8 - N::kBitWidth));
        break;
      default:
        return Unsupported(instr, instr.shape.type());
    }
  }
  return absl::OkStatus();
}

template <typename N>
absl::Status BinaryNarrow(const Instruction& instr, const N* a, const N* b,
                          N* out, int64_t n) {
  constexpr int64_t kBits = N::kBitWidth;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = a[i].value(), y = b[i].value();
    // Shift amounts are read as unsigned kBits-bit values.
    const int64_t amount = b[i].bits;
    switch (instr.opcode) {
      case Opcode::kAdd: out[i] = N::Wrap(x + y); break;
      case Opcode::kSubtract: out[i] = N::Wrap(x - y); break;
      case Opcode::kMultiply: out[i] = N::Wrap(x * y); break;
      case Opcode::kDivide:
        // x / 0 = -1 (all bits set); MIN / -1 = MIN (wraps).
        out[i] = y == 0 ? N::Wrap(-1) : N::Wrap(x / y);
        break;
      case Opcode::kRemainder:
        out[i] = y == 0 ? a[i] : (N::kIsSigned && y == -1) ? N::Wrap(0)
                                                          : N::Wrap(x % y);
        break;
      case Opcode::kMaximum: out[i] = x >= y ? a[i] : b[i]; break;
      case Opcode::kMinimum: out[i] = x <= y ? a[i] : b[i]; break;
      case Opcode::kPower: {
        // Squaring over the low 6 bits of the exponent, as IntPow; a
        // negative exponent (its top bit read as a sign) gives 1 for base 1,
        // else 0.
        if ((b[i].bits >> (kBits - 1)) != 0) {
          out[i] = N::Wrap(x == 1 ? 1 : 0);
          break;
        }
        uint64_t acc = 1, base = static_cast<uint64_t>(x);
        uint64_t e = static_cast<uint64_t>(b[i].bits);
        for (int k = 0; k < 6; ++k) {
          if (e & 1) acc *= base;
          base *= base;
          e >>= 1;
        }
        out[i] = N::Wrap(static_cast<int64_t>(acc));
        break;
      }
      case Opcode::kAnd: out[i] = N::Wrap(a[i].bits & b[i].bits); break;
      case Opcode::kOr: out[i] = N::Wrap(a[i].bits | b[i].bits); break;
      case Opcode::kXor: out[i] = N::Wrap(a[i].bits ^ b[i].bits); break;
      case Opcode::kShiftLeft:
        out[i] = amount >= kBits ? N::Wrap(0) : N::Wrap(x << amount);
        break;
      case Opcode::kShiftRightLogical:
        out[i] = amount >= kBits ? N::Wrap(0) : N::Wrap(a[i].bits >> amount);
        break;
      case Opcode::kShiftRightArithmetic: {
        // The kBits-bit pattern read as signed, whatever the type.
        const int64_t s = (a[i].bits >> (kBits - 1)) != 0
                              ? static_cast<int64_t>(a[i].bits) - (int64_t{1} << kBits)
                              : static_cast<int64_t>(a[i].bits);
        out[i] = N::Wrap(amount >= kBits ? (s < 0 ? -1 : 0) : s >> amount);
        break;
      }
      default:
        return Unsupported(instr, instr.shape.type());
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Minifloats: XLA's float normalization computes every op on them in f16
// (f32 for f8e8m0fnu, whose range f16 cannot hold), with converts around
// it; so do these loops, block by block.

template <typename M>
using MinifloatWide =
    std::conditional_t<std::is_same_v<M, hlo::F8E8M0FNU>, float, hlo::F16>;

template <typename M>
void WidenMinifloats(const M* in, MinifloatWide<M>* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = MinifloatWide<M>(static_cast<float>(in[i]));
  }
}

template <typename M>
void NarrowToMinifloats(const MinifloatWide<M>* in, M* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = M::FromDouble(static_cast<float>(in[i]));
  }
}

constexpr int64_t kMinifloatBlock = 512;

template <typename M>
absl::Status UnaryMinifloat(const Instruction& instr, const M* in, M* out,
                            int64_t n) {
  using W = MinifloatWide<M>;
  W x[kMinifloatBlock], y[kMinifloatBlock];
  for (int64_t start = 0; start < n; start += kMinifloatBlock) {
    const int64_t m = std::min(kMinifloatBlock, n - start);
    WidenMinifloats(in + start, x, m);
    CW_RETURN_IF_ERROR(UnaryFloat<W>(instr, x, y, m));
    NarrowToMinifloats(y, out + start, m);
  }
  return absl::OkStatus();
}

template <typename M>
absl::Status BinaryMinifloat(const Instruction& instr, const M* a, const M* b,
                             M* out, int64_t n) {
  using W = MinifloatWide<M>;
  W x[kMinifloatBlock], y[kMinifloatBlock], z[kMinifloatBlock];
  for (int64_t start = 0; start < n; start += kMinifloatBlock) {
    const int64_t m = std::min(kMinifloatBlock, n - start);
    WidenMinifloats(a + start, x, m);
    WidenMinifloats(b + start, y, m);
    CW_RETURN_IF_ERROR(BinaryFloat<W>(instr, x, y, z, m));
    NarrowToMinifloats(z, out + start, m);
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------
// Element loops (elementwise.h).

absl::Status UnaryElements(const Instruction& instr, PrimitiveType type,
                           const void* in, void* out, int64_t n) {
  if (instr.opcode == Opcode::kIsFinite) {
    bool* result = static_cast<bool*>(out);
    return hlo::VisitType(type, [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (kIsFloat<T>) {
        const T* x = static_cast<const T*>(in);
        for (int64_t i = 0; i < n; ++i) result[i] = std::isfinite(ToCompute(x[i]));
        return absl::OkStatus();
      } else if constexpr (hlo::kIsMinifloat<T>) {
        const T* x = static_cast<const T*>(in);
        for (int64_t i = 0; i < n; ++i) {
          result[i] = std::isfinite(static_cast<float>(x[i]));
        }
        return absl::OkStatus();
      } else {
        return Unsupported(instr, type);
      }
    });
  }
  return hlo::VisitType(type, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    if constexpr (hlo::kIsComplex<T>) {
      return ComplexUnaryElements(instr, type, in, out, n);
    } else if constexpr (hlo::kIsMinifloat<T>) {
      return UnaryMinifloat<T>(instr, x, static_cast<T*>(out), n);
    } else if constexpr (hlo::kIsNarrowInt<T>) {
      return UnaryNarrow<T>(instr, x, static_cast<T*>(out), n);
    } else if constexpr (kIsFloat<T>) {
      return UnaryFloat<T>(instr, x, static_cast<T*>(out), n);
    } else if constexpr (std::is_same_v<T, bool>) {
      return UnaryPred(instr, x, static_cast<T*>(out), n);
    } else {
      return UnaryInt<T>(instr, x, static_cast<T*>(out), n);
    }
  });
}

absl::Status BinaryElements(const Instruction& instr, const void* lhs,
                            const void* rhs, void* out, int64_t n) {
  return hlo::VisitType(instr.shape.type(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(lhs);
    const T* b = static_cast<const T*>(rhs);
    T* y = static_cast<T*>(out);
    if constexpr (hlo::kIsComplex<T>) {
      return ComplexBinaryElements(instr, instr.shape.type(), lhs, rhs, out, n);
    } else if constexpr (hlo::kIsMinifloat<T>) {
      return BinaryMinifloat<T>(instr, a, b, y, n);
    } else if constexpr (hlo::kIsNarrowInt<T>) {
      return BinaryNarrow<T>(instr, a, b, y, n);
    } else if constexpr (kIsFloat<T>) {
      return BinaryFloat<T>(instr, a, b, y, n);
    } else if constexpr (std::is_same_v<T, bool>) {
      return BinaryPred(instr, a, b, y, n);
    } else {
      return BinaryInt<T>(instr, a, b, y, n);
    }
  });
}

// Walks n elements that start `phase` into a row of `row_length`:
// segment(i, m) for each run [i, i + m) within one row, rows in order.
template <typename Segment>
void ForEachRowSegment(int64_t row_length, int64_t phase, int64_t n,
                       Segment segment) {
  for (int64_t i = 0, left = row_length - phase; i < n; left = row_length) {
    const int64_t m = std::min(left, n - i);
    segment(i, m);
    i += m;
  }
}

absl::Status MultiplyAddRowElements(PrimitiveType type, bool negate_product,
                                    bool negate_addend, int row_operand,
                                    const void* first, const void* second,
                                    const void* rows, int64_t row_stride,
                                    int64_t row_length, int64_t phase,
                                    void* out, int64_t n) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(first);
    const T* y = static_cast<const T*>(second);
    const T* r = static_cast<const T*>(rows);
    T* o = static_cast<T*>(out);
    const int ps = negate_product ? -1 : 1;
    const int as = negate_addend ? -1 : 1;
    ForEachRowSegment(row_length, phase, n, [&](int64_t i, int64_t m) {
      const T v = *r;
      r += row_stride;
      if (row_operand == 2) {
        for (int64_t j = i; j < i + m; ++j) {
          o[j] = ContractedMultiplyAdd<T>(x[j], y[j], v, ps, as);
        }
      } else {
        // The product is exact inside the fused multiply-add, so it does
        // not matter which factor is the row's.
        for (int64_t j = i; j < i + m; ++j) {
          o[j] = ContractedMultiplyAdd<T>(x[j], v, y[j], ps, as);
        }
      }
    });
  };
  switch (type) {
    case PrimitiveType::kF32:
      run(float{});
      return absl::OkStatus();
    case PrimitiveType::kF64:
      run(double{});
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "a fused multiply-add of ", std::string(hlo::PrimitiveTypeName(type)),
          " elements reading a row broadcast (only f32 and f64)"));
  }
}

absl::Status BinaryRowElements(const Instruction& instr, const void* full,
                               const void* rows, int64_t row_stride,
                               int64_t row_length, int64_t phase,
                               bool rows_on_left, void* out, int64_t n) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    const T* a = static_cast<const T*>(full);
    const T* r = static_cast<const T*>(rows);
    T* y = static_cast<T*>(out);
    return WithBinaryFloatOp<T>(instr, [&](auto f) {
      ForEachRowSegment(row_length, phase, n, [&](int64_t i, int64_t m) {
        const C v = ToCompute(*r);
        r += row_stride;
        if (rows_on_left) {
          for (int64_t j = i; j < i + m; ++j) {
            y[j] = FromCompute<T>(f(v, ToCompute(a[j])));
          }
        } else {
          for (int64_t j = i; j < i + m; ++j) {
            y[j] = FromCompute<T>(f(ToCompute(a[j]), v));
          }
        }
      });
    });
  };
  switch (instr.shape.type()) {
    case PrimitiveType::kF32:
      return run(float{});
    case PrimitiveType::kF64:
      return run(double{});
    default:
      return Unsupported(instr, instr.shape.type());
  }
}

absl::Status MultiplyAddElements(PrimitiveType type, bool negate_product,
                                 bool negate_addend, const void* a,
                                 const void* b, const void* c, void* out,
                                 int64_t n) {
  auto loop = [&](auto tag, auto fma) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    const T* z = static_cast<const T*>(c);
    T* r = static_cast<T*>(out);
    const auto sign = [](bool negative) { return negative ? -1 : 1; };
    const int product_sign = sign(negate_product);
    const int addend_sign = sign(negate_addend);
    for (int64_t i = 0; i < n; ++i) {
      r[i] = fma(x[i], y[i], z[i], product_sign, addend_sign);
    }
  };
  switch (type) {
    case PrimitiveType::kF16:
      // The product of two halves is exact in double, and so is the sum
      // but where the addend is far below the product's last bit, which
      // then only decides a rounding the double sum already made the same
      // way: one rounding of the exact value, as the processor's own
      // half-precision FMA.
      loop(hlo::F16{}, [](hlo::F16 x, hlo::F16 y, hlo::F16 z, int ps, int as) {
        const double product = static_cast<double>(static_cast<float>(x)) *
                               static_cast<double>(static_cast<float>(y));
        hlo::F16 result;
        result.bits = hlo::F16::FromDouble(
            ps * product + as * static_cast<double>(static_cast<float>(z)));
        return result;
      });
      return absl::OkStatus();
    case PrimitiveType::kF32:
      loop(float{}, ContractedMultiplyAdd<float>);
      return absl::OkStatus();
    case PrimitiveType::kF64:
      loop(double{}, ContractedMultiplyAdd<double>);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("a fused multiply-add of ",
                       std::string(hlo::PrimitiveTypeName(type)),
                       " elements (only f16, f32 and f64 are contracted)"));
  }
}

absl::Status CompareElements(const Instruction& instr, PrimitiveType type,
                             const void* lhs, const void* rhs, bool* out,
                             int64_t n) {
  const ComparisonType ctype = instr.comparison_type;
  const ComparisonDirection direction = instr.comparison_direction;
  return hlo::VisitType(type, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(lhs);
    const T* b = static_cast<const T*>(rhs);
    if constexpr (hlo::kIsComplex<T>) {
      // Part by part: EQ when both are equal, NE when either differs (so
      // NaN parts are unequal), as XLA; shape inference refuses the rest.
      if (direction == ComparisonDirection::kEq) {
        for (int64_t i = 0; i < n; ++i) {
          out[i] = a[i].real() == b[i].real() && a[i].imag() == b[i].imag();
        }
      } else if (direction == ComparisonDirection::kNe) {
        for (int64_t i = 0; i < n; ++i) {
          out[i] = a[i].real() != b[i].real() || a[i].imag() != b[i].imag();
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(instr), ": complex values compare only for EQ and NE"));
      }
    } else if constexpr (hlo::kIsMinifloat<T>) {
      // By value (the widening is exact), as XLA compares them in f16.
      auto value = [](T v) { return static_cast<float>(v); };
      if (ctype == ComparisonType::kTotalOrder) {
        CompareLoop(direction, a, b, out, n,
                    [&](T v) { return TotalOrderKey(value(v)); });
      } else if (ctype == ComparisonType::kDefault ||
                 ctype == ComparisonType::kFloat) {
        CompareLoop(direction, a, b, out, n, value);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(instr), ": an integer comparison type on floats"));
      }
    } else if constexpr (hlo::kIsNarrowInt<T>) {
      constexpr int kBits = T::kBitWidth;
      if (ctype == ComparisonType::kFloat ||
          ctype == ComparisonType::kTotalOrder) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(instr), ": a float comparison type on integers"));
      }
      if (ctype == ComparisonType::kUnsigned) {
        CompareLoop(direction, a, b, out, n, [](T v) { return v.bits; });
      } else if (ctype == ComparisonType::kSigned) {
        CompareLoop(direction, a, b, out, n, [](T v) {
          return (v.bits >> (kBits - 1)) != 0
                     ? static_cast<int>(v.bits) - (1 << kBits)
                     : static_cast<int>(v.bits);
        });
      } else {
        CompareLoop(direction, a, b, out, n, [](T v) { return v.value(); });
      }
    } else if constexpr (kIsFloat<T>) {
      if (ctype == ComparisonType::kTotalOrder) {
        CompareLoop(direction, a, b, out, n,
                    [](T v) { return TotalOrderKey(v); });
      } else if (ctype == ComparisonType::kDefault ||
                 ctype == ComparisonType::kFloat) {
        CompareLoop(direction, a, b, out, n, [](T v) { return ToCompute(v); });
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(instr), ": an integer comparison type on floats"));
      }
    } else {
      if (ctype == ComparisonType::kFloat ||
          ctype == ComparisonType::kTotalOrder) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpName(instr), ": a float comparison type on integers"));
      }
      if constexpr (std::is_same_v<T, bool>) {
        CompareLoop(direction, a, b, out, n, [](T v) { return v; });
      } else if (ctype == ComparisonType::kSigned) {
        CompareLoop(direction, a, b, out, n,
                    [](T v) { return static_cast<std::make_signed_t<T>>(v); });
      } else if (ctype == ComparisonType::kUnsigned) {
        CompareLoop(direction, a, b, out, n,
                    [](T v) { return static_cast<std::make_unsigned_t<T>>(v); });
      } else {
        CompareLoop(direction, a, b, out, n, [](T v) { return v; });
      }
    }
    return absl::OkStatus();
  });
}

absl::Status SelectElements(int64_t byte_width, const bool* pred,
                            const void* on_true, const void* on_false,
                            void* out, int64_t n) {
  // Selection moves bits: dispatch on the element width only.
  auto select = [&](auto tag) {
    using U = decltype(tag);
    SelectBits<U>(pred, static_cast<const U*>(on_true),
                  static_cast<const U*>(on_false), static_cast<U*>(out), n);
  };
  switch (byte_width) {
    case 1: select(uint8_t{}); break;
    case 2: select(uint16_t{}); break;
    case 4: select(uint32_t{}); break;
    case 8: select(uint64_t{}); break;
    case 16: {
      // c128: two 8-byte halves per element.
      const uint64_t* t = static_cast<const uint64_t*>(on_true);
      const uint64_t* f = static_cast<const uint64_t*>(on_false);
      uint64_t* o = static_cast<uint64_t*>(out);
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t* from = pred[i] ? t : f;
        o[2 * i] = from[2 * i];
        o[2 * i + 1] = from[2 * i + 1];
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("select of ", byte_width, "-byte elements"));
  }
  return absl::OkStatus();
}

void ClampElements(PrimitiveType type, const void* lo, int64_t lo_step,
                   const void* x, const void* hi, int64_t hi_step, void* out,
                   int64_t n) {
  hlo::VisitType(type, [&](auto tag) {
    using T = decltype(tag);
    const T* l = static_cast<const T*>(lo);
    const T* v = static_cast<const T*>(x);
    const T* h = static_cast<const T*>(hi);
    T* y = static_cast<T*>(out);
    if constexpr (hlo::kIsNarrowInt<T>) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = std::min(std::max(v[i].value(), l[i * lo_step].value()),
                                   h[i * hi_step].value());
        y[i] = T::Wrap(c);
      }
    } else if constexpr (hlo::kIsMinifloat<T>) {
      // In float (exact), then back: the result is one of the inputs, or a
      // NaN.
      for (int64_t i = 0; i < n; ++i) {
        const float c = FloatMin(FloatMax(static_cast<float>(v[i]),
                                          static_cast<float>(l[i * lo_step])),
                                 static_cast<float>(h[i * hi_step]));
        y[i] = T::FromDouble(c);
      }
    } else if constexpr (!std::is_same_v<T, bool> && !hlo::kIsComplex<T>) {
      ClampLoop(l, lo_step, v, h, hi_step, y, n);
    }
  });
}

void ConvertElements(PrimitiveType from, PrimitiveType to, const void* in,
                     void* out, int64_t n) {
  hlo::VisitType(from, [&](auto from_tag) {
    using From = decltype(from_tag);
    const From* x = static_cast<const From*>(in);
    hlo::VisitType(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      To* y = static_cast<To*>(out);
      for (int64_t i = 0; i < n; ++i) y[i] = ConvertElement<To, From>(x[i]);
    });
  });
}

void ReducePrecisionElements(const Instruction& instr, const void* in,
                             void* out, int64_t n) {
  hlo::VisitType(instr.shape.type(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloat<T>) {
      const int exponent_bits = static_cast<int>(
          std::min<int64_t>(instr.exponent_bits, FloatFormat<T>::kExponentBits));
      const int mantissa_bits = static_cast<int>(
          std::min<int64_t>(instr.mantissa_bits, FloatFormat<T>::kMantissaBits));
      const T* x = static_cast<const T*>(in);
      T* y = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) {
        y[i] = ReducePrecisionElement(x[i], exponent_bits, mantissa_bits);
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Kernels.

absl::StatusOr<Literal> EvalUnary(const Instruction& instr,
                                  const Literal& operand) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = operand.shape().type();
  if (instr.opcode == Opcode::kIsFinite) {
    if (instr.shape.type() != PrimitiveType::kPred ||
        !(IsFloating(type) || hlo::IsMinifloat(type))) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpName(instr), " maps a float array to pred; got ",
          operand.shape().ToString(false), " -> ", instr.shape.ToString(false)));
    }
    CW_RETURN_IF_ERROR(CheckOperand(instr, operand, type, "operand"));
  } else if (instr.opcode == Opcode::kAbs && hlo::IsComplex(type)) {
    // |z| is of the component type.
    if (instr.shape.type() != hlo::ComplexComponentType(type)) {
      return Unsupported(instr, type);
    }
    CW_RETURN_IF_ERROR(CheckOperand(instr, operand, type, "operand"));
  } else {
    CW_RETURN_IF_ERROR(
        CheckOperand(instr, operand, instr.shape.type(), "operand"));
  }
  Literal result = Literal::Uninitialized(instr.shape);
  CW_RETURN_IF_ERROR(UnaryElements(instr, type, operand.untyped_data(),
                                   result.mutable_untyped_data(),
                                   instr.shape.ElementCount()));
  return result;
}

absl::StatusOr<Literal> EvalBinary(const Instruction& instr, const Literal& lhs,
                                   const Literal& rhs) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = instr.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(instr, lhs, type, "lhs"));
  CW_RETURN_IF_ERROR(CheckOperand(instr, rhs, type, "rhs"));
  Literal result = Literal::Uninitialized(instr.shape);
  CW_RETURN_IF_ERROR(BinaryElements(instr, lhs.untyped_data(),
                                    rhs.untyped_data(),
                                    result.mutable_untyped_data(),
                                    instr.shape.ElementCount()));
  return result;
}

absl::StatusOr<Literal> EvalMultiplyAdd(const Instruction& add,
                                        const MultiplyAdd& contraction,
                                        const Literal& a, const Literal& b,
                                        const Literal& c) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(add));
  const PrimitiveType type = add.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(add, a, type, "the multiply's lhs"));
  CW_RETURN_IF_ERROR(CheckOperand(add, b, type, "the multiply's rhs"));
  CW_RETURN_IF_ERROR(CheckOperand(add, c, type, "the addend"));
  Literal result = Literal::Uninitialized(add.shape);
  CW_RETURN_IF_ERROR(MultiplyAddElements(
      type, contraction.negate_product, contraction.negate_addend,
      a.untyped_data(), b.untyped_data(), c.untyped_data(),
      result.mutable_untyped_data(), add.shape.ElementCount()));
  return result;
}

absl::StatusOr<Literal> EvalCompare(const Instruction& instr,
                                    const Literal& lhs, const Literal& rhs) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = lhs.shape().type();
  if (instr.shape.type() != PrimitiveType::kPred) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(instr), " must produce pred, not ",
                     instr.shape.ToString(false)));
  }
  CW_RETURN_IF_ERROR(CheckOperand(instr, lhs, type, "lhs"));
  CW_RETURN_IF_ERROR(CheckOperand(instr, rhs, type, "rhs"));
  Literal result = Literal::Uninitialized(instr.shape);
  CW_RETURN_IF_ERROR(CompareElements(instr, type, lhs.untyped_data(),
                                     rhs.untyped_data(),
                                     MutableDataPtr<bool>(result),
                                     instr.shape.ElementCount()));
  return result;
}

absl::StatusOr<Literal> EvalSelect(const Instruction& instr,
                                   const Literal& pred, const Literal& on_true,
                                   const Literal& on_false) {
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = instr.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(instr, on_true, type, "on_true"));
  CW_RETURN_IF_ERROR(CheckOperand(instr, on_false, type, "on_false"));
  if (pred.shape().type() != PrimitiveType::kPred ||
      (pred.shape().rank() != 0 && pred.shape().dims() != instr.shape.dims())) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(instr), ": the predicate must be pred[] or pred with the "
        "result's dims; got ", pred.shape().ToString(false)));
  }
  if (pred.shape().rank() == 0 && instr.shape.rank() != 0) {
    const bool choice = DataPtr<bool>(pred)[0];
    return (choice ? on_true : on_false).WithShape(instr.shape);
  }
  const int64_t width = hlo::ByteWidth(type);
  if (width != 1 && width != 2 && width != 4 && width != 8 && width != 16) {
    return Unsupported(instr, type);
  }
  Literal result = Literal::Uninitialized(instr.shape);
  CW_RETURN_IF_ERROR(SelectElements(
      width, DataPtr<bool>(pred), on_true.untyped_data(),
      on_false.untyped_data(), result.mutable_untyped_data(),
      instr.shape.ElementCount()));
  return result;
}

absl::StatusOr<Literal> EvalClamp(const Instruction& instr, const Literal& min,
                                  const Literal& operand, const Literal& max) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = instr.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(instr, operand, type, "operand"));
  for (const Literal* bound : {&min, &max}) {
    if (bound->shape().type() != type ||
        (bound->shape().rank() != 0 &&
         bound->shape().dims() != instr.shape.dims())) {
      return absl::InvalidArgumentError(absl::StrCat(
          OpName(instr), ": bounds must be scalars or have the operand's "
          "shape; got ", bound->shape().ToString(false)));
    }
  }
  if (type == PrimitiveType::kPred || hlo::IsComplex(type)) {
    return Unsupported(instr, type);
  }
  const int64_t lo_step = min.shape().rank() == 0 ? 0 : 1;
  const int64_t hi_step = max.shape().rank() == 0 ? 0 : 1;
  Literal result = Literal::Uninitialized(instr.shape);
  ClampElements(type, min.untyped_data(), lo_step, operand.untyped_data(),
                max.untyped_data(), hi_step, result.mutable_untyped_data(),
                instr.shape.ElementCount());
  return result;
}

absl::StatusOr<Literal> EvalConvert(const Instruction& instr,
                                    const Literal& operand) {
  ScopedFlushDenormals flush_denormals;
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType from = operand.shape().type();
  const PrimitiveType to = instr.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(instr, operand, from, "operand"));
  if (!hlo::IsArrayType(from)) return Unsupported(instr, from);
  if (from == to) return operand.WithShape(instr.shape);
  Literal result = Literal::Uninitialized(instr.shape);
  ConvertElements(from, to, operand.untyped_data(),
                  result.mutable_untyped_data(), instr.shape.ElementCount());
  return result;
}

absl::StatusOr<Literal> EvalRealOrImag(const Instruction& instr,
                                       const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType from = operand.shape().type();
  const bool imag = instr.opcode == Opcode::kImag;
  CW_RETURN_IF_ERROR(CheckOperand(instr, operand, from, "operand"));
  const PrimitiveType part =
      hlo::IsComplex(from) ? hlo::ComplexComponentType(from) : from;
  if (instr.shape.type() != part) return Unsupported(instr, from);
  if (!hlo::IsComplex(from)) {
    // Of a real value: the value itself, or zeros.
    if (!imag) return operand.WithShape(instr.shape);
    return Literal(instr.shape);
  }
  Literal result = Literal::Uninitialized(instr.shape);
  ComplexPartElements(imag, from, operand.untyped_data(),
                      result.mutable_untyped_data(),
                      instr.shape.ElementCount());
  return result;
}

absl::StatusOr<Literal> EvalComplex(const Instruction& instr,
                                    const Literal& real, const Literal& imag) {
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType part = hlo::ComplexComponentType(instr.shape.type());
  if (part == PrimitiveType::kInvalid) {
    return Unsupported(instr, instr.shape.type());
  }
  CW_RETURN_IF_ERROR(CheckOperand(instr, real, part, "real part"));
  CW_RETURN_IF_ERROR(CheckOperand(instr, imag, part, "imaginary part"));
  Literal result = Literal::Uninitialized(instr.shape);
  ComplexFromPartsElements(part, real.untyped_data(), imag.untyped_data(),
                           result.mutable_untyped_data(),
                           instr.shape.ElementCount());
  return result;
}

absl::StatusOr<Literal> EvalBitcastConvert(const Instruction& instr,
                                           const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const Shape& in = operand.shape();
  const Shape& out = instr.shape;
  const int64_t in_width = hlo::ByteWidth(in.type());
  const int64_t out_width = hlo::ByteWidth(out.type());
  bool dims_ok;
  if (in_width == out_width) {
    dims_ok = in.dims() == out.dims();
  } else if (in_width > out_width) {
    // A trailing dim of in_width / out_width elements is added.
    dims_ok = out.rank() == in.rank() + 1 &&
              std::equal(in.dims().begin(), in.dims().end(), out.dims().begin()) &&
              out.dims().back() * out_width == in_width;
  } else {
    // The trailing dim of out_width / in_width elements is removed.
    dims_ok = in.rank() == out.rank() + 1 &&
              std::equal(out.dims().begin(), out.dims().end(), in.dims().begin()) &&
              in.dims().back() * in_width == out_width;
  }
  if (!in.IsArray() || !dims_ok || in.ByteSize() != out.ByteSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(instr), " cannot reinterpret ", in.ToString(false), " as ",
        out.ToString(false)));
  }
  // Row-major little-endian storage: the bytes are already right.
  return operand.WithShape(out);
}


absl::StatusOr<Literal> EvalReducePrecision(const Instruction& instr,
                                            const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckArrayResult(instr));
  const PrimitiveType type = instr.shape.type();
  CW_RETURN_IF_ERROR(CheckOperand(instr, operand, type, "operand"));
  if (!IsFloating(type)) return Unsupported(instr, type);
  if (instr.exponent_bits < 1 || instr.mantissa_bits < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(instr), " needs exponent_bits >= 1 and mantissa_bits >= 0; got ",
        instr.exponent_bits, " and ", instr.mantissa_bits));
  }
  Literal result = Literal::Uninitialized(instr.shape);
  ReducePrecisionElements(instr, operand.untyped_data(),
                          result.mutable_untyped_data(),
                          instr.shape.ElementCount());
  return result;
}

// ---------------------------------------------------------------------------
// xla_math.h: the math functions above on arrays.

void ExpArray(const float* in, float* out, int64_t n) { ExpXla(in, out, n); }
void LogArray(const float* in, float* out, int64_t n) { LogXla(in, out, n); }
void Log1pArray(const float* in, float* out, int64_t n) {
  Log1pXla(in, out, n);
}
void Expm1Array(const float* in, float* out, int64_t n) {
  Expm1Xla(in, out, n, [](const ArrayF& v) -> const ArrayF& { return v; });
}
void TanhArray(const float* in, float* out, int64_t n) { TanhXla(in, out, n); }
void SqrtArray(const float* in, float* out, int64_t n) { SqrtF32(in, out, n); }
void RsqrtArray(const float* in, float* out, int64_t n) {
  RsqrtXla(in, out, n);
}
void RsqrtArray(const double* in, double* out, int64_t n) {
  RsqrtXla(in, out, n);
}
void SinArray(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::sin(in[i]);
}
void CosArray(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::cos(in[i]);
}
void Atan2Array(const float* y, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::atan2(y[i], x[i]);
}
void PowArray(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::pow(x[i], y[i]);
}

// f64: the C library, as UnaryScalarFloat<double> computes (rsqrt: RsqrtXla).
#define CW_DOUBLE_ARRAY_FN(name, expr)                         \
  void name(const double* in, double* out, int64_t n) {        \
    for (int64_t i = 0; i < n; ++i) {                          \
      const double x = in[i];                                  \
      out[i] = (expr);                                         \
    }                                                          \
  }
CW_DOUBLE_ARRAY_FN(ExpArray, std::exp(x))
CW_DOUBLE_ARRAY_FN(LogArray, std::log(x))
CW_DOUBLE_ARRAY_FN(Log1pArray, std::log1p(x))
CW_DOUBLE_ARRAY_FN(Expm1Array, std::expm1(x))
CW_DOUBLE_ARRAY_FN(TanhArray, std::tanh(x))
CW_DOUBLE_ARRAY_FN(SqrtArray, std::sqrt(x))
CW_DOUBLE_ARRAY_FN(SinArray, std::sin(x))
CW_DOUBLE_ARRAY_FN(CosArray, std::cos(x))
#undef CW_DOUBLE_ARRAY_FN
void Atan2Array(const double* y, const double* x, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::atan2(y[i], x[i]);
}
void PowArray(const double* x, const double* y, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::pow(x[i], y[i]);
}

}  // namespace causeway::exec
