// Complex elementwise kernels (c64, c128), with the formulas of XLA's
// elemental IR emitter (xla/service/elemental_ir_emitter.cc:
// EmitComplexUnaryOp, EmitComplexBinaryOp and their helpers): the same
// operations on the parts, in the same order, the same special cases, and
// the contractions LLVM makes in XLA's fused loops where we measured them
// (the multiply, docs/hlo.md "Complex numbers"). The real functions they
// call are XLA's own f32 formulas (xla_math.h). Only the multiply has been
// compared with XLA bit for bit; the rest are checked against std::complex
// within rounding and on XLA's special values (complex_test.cc). JAX
// itself lowers most complex functions into real arithmetic before XLA
// sees them, so these kernels serve hand-written HLO above all.
//
// Each kernel works through blocks of elements, part by part, calling the
// array functions of xla_math.h; callers hold a ScopedFlushDenormals.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/elementwise.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/xla_math.h"

namespace causeway::exec {
namespace {

using hlo::Opcode;
using hlo::PrimitiveType;

constexpr int64_t kBlock = 256;

template <typename F>
struct Block {
  F v[kBlock] = {};
  F& operator[](int64_t i) { return v[i]; }
  const F& operator[](int64_t i) const { return v[i]; }
  F* data() { return v; }
  const F* data() const { return v; }
};

template <typename F>
constexpr F kInf = std::numeric_limits<F>::infinity();
template <typename F>
constexpr F kNan = std::numeric_limits<F>::quiet_NaN();

absl::Status NotForComplex(const hlo::Instruction& instr, PrimitiveType type) {
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(hlo::OpcodeName(instr.opcode)), " '", instr.name,
      "' does not accept element type ",
      std::string(hlo::PrimitiveTypeName(type))));
}

// |a + bi| as XLA's EmitComplexAbs: max * sqrt(1 + (min/max)^2) (the add
// contracted), and where that is NaN ((0, 0), (inf, inf), NaN parts) max
// when max is a number, else min. Also the pieces EmitSqrtComplexAbs and
// EmitRsqrtComplexAbs start from.
template <typename F>
struct AbsParts {
  Block<F> min, max, one_plus_ratio_squared;
};

template <typename F>
void ComputeAbsParts(const F* re, const F* im, int64_t m, AbsParts<F>& p) {
  for (int64_t i = 0; i < m; ++i) {
    const F ar = std::fabs(re[i]), ai = std::fabs(im[i]);
    p.max[i] = FloatMax(ar, ai);
    p.min[i] = FloatMin(ar, ai);
    const F ratio = p.min[i] / p.max[i];
    p.one_plus_ratio_squared[i] = std::fma(ratio, ratio, F{1});
  }
}

template <typename F>
void ComplexAbs(const F* re, const F* im, F* out, int64_t m) {
  AbsParts<F> p;
  ComputeAbsParts(re, im, m, p);
  Block<F> root;
  SqrtArray(p.one_plus_ratio_squared.data(), root.data(), m);
  for (int64_t i = 0; i < m; ++i) {
    const F result = p.max[i] * root[i];
    out[i] = !std::isnan(result) ? result
             : !std::isnan(p.max[i]) ? p.max[i]
                                     : p.min[i];
  }
}

// The parts of a block of complex values.
template <typename F>
void Split(const std::complex<F>* in, int64_t m, F* re, F* im) {
  for (int64_t i = 0; i < m; ++i) {
    re[i] = in[i].real();
    im[i] = in[i].imag();
  }
}

template <typename F>
void Join(const F* re, const F* im, int64_t m, std::complex<F>* out) {
  for (int64_t i = 0; i < m; ++i) out[i] = std::complex<F>(re[i], im[i]);
}

// ---------------------------------------------------------------------------
// Unary.

template <typename F>
absl::Status UnaryBlock(const hlo::Instruction& instr, const F* a, const F* b,
                        F* re, F* im, int64_t m) {
  switch (instr.opcode) {
    case Opcode::kNegate:
      for (int64_t i = 0; i < m; ++i) {
        re[i] = -a[i];
        im[i] = -b[i];
      }
      return absl::OkStatus();
    case Opcode::kSign: {
      Block<F> abs;
      ComplexAbs(a, b, abs.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        if (abs[i] == F{0}) {
          re[i] = im[i] = F{0};
        } else {
          re[i] = a[i] / abs[i];
          im[i] = b[i] / abs[i];
        }
      }
      return absl::OkStatus();
    }
    case Opcode::kExp: {
      // e^a (cos b + i sin b); through e^(a/2) twice where e^a overflows;
      // an imaginary part of exactly 0 where b is 0.
      Block<F> exp_a, half_a, exp_half_a, cos_b, sin_b;
      ExpArray(a, exp_a.data(), m);
      for (int64_t i = 0; i < m; ++i) half_a[i] = a[i] * F{0.5};
      ExpArray(half_a.data(), exp_half_a.data(), m);
      CosArray(b, cos_b.data(), m);
      SinArray(b, sin_b.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        const bool overflow = exp_a[i] == kInf<F>;
        re[i] = overflow ? (exp_half_a[i] * cos_b[i]) * exp_half_a[i]
                         : exp_a[i] * cos_b[i];
        const F imag = overflow ? (exp_half_a[i] * sin_b[i]) * exp_half_a[i]
                                : exp_a[i] * sin_b[i];
        im[i] = b[i] == F{0} ? F{0} : imag;
      }
      return absl::OkStatus();
    }
    case Opcode::kExpm1: {
      // (expm1(a) cos b + cosm1(b)) + i e^a sin b, cosm1 by Cephes'
      // polynomial where b^2 <= (pi/4)^2.
      Block<F> expm1_a, sin_b, cos_b;
      Expm1Array(a, expm1_a.data(), m);
      SinArray(b, sin_b.data(), m);
      CosArray(b, cos_b.data(), m);
      static constexpr double kCosm1[] = {
          4.7377507964246204691685E-14, -1.1470284843425359765671E-11,
          2.0876754287081521758361E-9,  -2.7557319214999787979814E-7,
          2.4801587301570552304991E-5,  -1.3888888888888872993737E-3,
          4.1666666666666666609054E-2};
      for (int64_t i = 0; i < m; ++i) {
        const F x = b[i];
        const F xx = x * x;
        F poly = F{0};
        for (double c : kCosm1) poly = std::fma(poly, xx, static_cast<F>(c));
        const F small = std::fma(xx * xx, poly, F{-0.5} * xx);
        const F cosm1 = xx > F{0.61685} ? cos_b[i] - F{1} : small;
        const F cos = cosm1 + F{1};
        re[i] = std::fma(expm1_a[i], cos, cosm1);
        im[i] = x == F{0} ? F{0} : (expm1_a[i] + F{1}) * sin_b[i];
      }
      return absl::OkStatus();
    }
    case Opcode::kLog: {
      // log|z| + i atan2(b, a).
      Block<F> abs;
      ComplexAbs(a, b, abs.data(), m);
      LogArray(abs.data(), re, m);
      Atan2Array(b, a, im, m);
      return absl::OkStatus();
    }
    case Opcode::kLog1p: {
      // log(max(|a+1|, |b|)) through log1p, plus log1p((min/max)^2) / 2;
      // imaginary part atan2(b, a + 1).
      Block<F> a1, shifted, ratio_sq, log_max, log_ratio, min_v;
      for (int64_t i = 0; i < m; ++i) {
        a1[i] = a[i] + F{1};
        const F abs_a1 = std::fabs(a1[i]), abs_b = std::fabs(b[i]);
        const F max = FloatMax(abs_a1, abs_b);
        min_v[i] = FloatMin(abs_a1, abs_b);
        shifted[i] = a1[i] > abs_b ? a[i] : max - F{1};
        const F ratio = min_v[i] / max;
        ratio_sq[i] = ratio * ratio;
      }
      Log1pArray(shifted.data(), log_max.data(), m);
      Log1pArray(ratio_sq.data(), log_ratio.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        const F r = std::fma(F{0.5}, log_ratio[i], log_max[i]);
        re[i] = std::isnan(r) ? min_v[i] : r;
      }
      Atan2Array(b, a1.data(), im, m);
      return absl::OkStatus();
    }
    case Opcode::kSin:
    case Opcode::kCos: {
      // sin(x + iy) = sin x cosh y + i cos x sinh y,
      // cos(x + iy) = cos x cosh y - i sin x sinh y.
      Block<F> exp_y, sin_x, cos_x;
      ExpArray(b, exp_y.data(), m);
      SinArray(a, sin_x.data(), m);
      CosArray(a, cos_x.data(), m);
      const bool sin = instr.opcode == Opcode::kSin;
      for (int64_t i = 0; i < m; ++i) {
        const F half_exp_y = F{0.5} * exp_y[i];
        const F half_exp_neg_y = F{0.5} / exp_y[i];
        const F sinh_y = half_exp_y - half_exp_neg_y;
        const F cosh_y = half_exp_y + half_exp_neg_y;
        if (sin) {
          re[i] = sin_x[i] * cosh_y;
          im[i] = cos_x[i] * sinh_y;
        } else {
          re[i] = cos_x[i] * cosh_y;
          im[i] = -(sin_x[i] * sinh_y);
        }
      }
      return absl::OkStatus();
    }
    case Opcode::kTan:
    case Opcode::kTanh: {
      // tanh(a + bi) = (e^2a - e^-2a + 4i cos b sin b) /
      //                (e^2a + e^-2a + 4 cos^2 b - 2), from expm1;
      // tan(x + iy) = -i tanh(-y + ix).
      const bool tan = instr.opcode == Opcode::kTan;
      Block<F> x, y, two_x, neg_two_x, e_plus, e_minus, cos_y, sin_y;
      for (int64_t i = 0; i < m; ++i) {
        x[i] = tan ? -b[i] : a[i];
        y[i] = tan ? a[i] : b[i];
        two_x[i] = x[i] + x[i];
        neg_two_x[i] = F{-1} * two_x[i];
      }
      Expm1Array(two_x.data(), e_plus.data(), m);
      Expm1Array(neg_two_x.data(), e_minus.data(), m);
      CosArray(y.data(), cos_y.data(), m);
      SinArray(y.data(), sin_y.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        const F real_numerator = e_plus[i] - e_minus[i];
        const F cos_sq = cos_y[i] * cos_y[i];
        const F imag_numerator = F{4} * (cos_y[i] * sin_y[i]);
        const F exp_sum_m2 = e_plus[i] + e_minus[i];
        const F denominator = std::fma(cos_sq, F{4}, exp_sum_m2);
        F real = exp_sum_m2 == kInf<F> ? std::copysign(F{1}, x[i])
                                        : real_numerator / denominator;
        F imag = imag_numerator / denominator;
        const bool x_inf = std::fabs(x[i]) == kInf<F>;
        const bool sin_2y_nan = std::isnan(imag_numerator);
        if (sin_2y_nan && !x_inf) real = kNan<F>;
        if (y[i] == F{0} || (x_inf && sin_2y_nan)) imag = F{0};
        if (tan) {
          re[i] = imag;
          im[i] = F{-1} * real;
        } else {
          re[i] = real;
          im[i] = imag;
        }
      }
      return absl::OkStatus();
    }
    case Opcode::kSqrt: {
      // sqrt|z| (cos t/2 + i sin t/2), t = atan2(b, a), |z|^(1/2) as
      // sqrt(max) * (1 + (min/max)^2)^(1/4); IEEE's special cases.
      AbsParts<F> p;
      ComputeAbsParts(a, b, m, p);
      Block<F> sqrt_max, quarter, pow, t, cos_v, sin_v;
      SqrtArray(p.max.data(), sqrt_max.data(), m);
      std::fill(quarter.v, quarter.v + m, F{0.25});
      PowArray(p.one_plus_ratio_squared.data(), quarter.data(), pow.data(), m);
      Atan2Array(b, a, t.data(), m);
      for (int64_t i = 0; i < m; ++i) t[i] = t[i] * F{0.5};
      CosArray(t.data(), cos_v.data(), m);
      SinArray(t.data(), sin_v.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        F r = sqrt_max[i] * pow[i];
        if (std::isnan(r)) r = !std::isnan(p.max[i]) ? sqrt_max[i] : p.min[i];
        const F abs_b = std::fabs(b[i]);
        if (r == F{0}) {
          re[i] = im[i] = F{0};
          continue;
        }
        re[i] = (abs_b == kInf<F> || a[i] == kInf<F>) ? kInf<F>
                : (a[i] == -kInf<F> && abs_b != kInf<F>) ? F{0}
                                                         : r * cos_v[i];
        im[i] = (abs_b == kInf<F> || a[i] == -kInf<F>)
                    ? std::copysign(kInf<F>, b[i])
                : std::isnan(r)      ? kNan<F>
                : sin_v[i] == F{0} ? sin_v[i]
                                     : r * sin_v[i];
      }
      return absl::OkStatus();
    }
    case Opcode::kRsqrt: {
      // rsqrt|z| (cos(-t/2) + i sin(-t/2)), |z|^(-1/2) as
      // rsqrt(max) * rsqrt(sqrt(1 + (min/max)^2)).
      AbsParts<F> p;
      ComputeAbsParts(a, b, m, p);
      Block<F> root, rsqrt_max, rsqrt_root, rsqrt_min, t, cos_v, sin_v;
      SqrtArray(p.one_plus_ratio_squared.data(), root.data(), m);
      RsqrtArray(p.max.data(), rsqrt_max.data(), m);
      RsqrtArray(root.data(), rsqrt_root.data(), m);
      RsqrtArray(p.min.data(), rsqrt_min.data(), m);
      Atan2Array(b, a, t.data(), m);
      for (int64_t i = 0; i < m; ++i) t[i] = t[i] * F{-0.5};
      CosArray(t.data(), cos_v.data(), m);
      SinArray(t.data(), sin_v.data(), m);
      for (int64_t i = 0; i < m; ++i) {
        F r = rsqrt_max[i] * rsqrt_root[i];
        if (std::isnan(r)) {
          r = !std::isnan(p.max[i]) ? rsqrt_max[i] : rsqrt_min[i];
        }
        const F abs_a = std::fabs(a[i]), abs_b = std::fabs(b[i]);
        const bool zero = b[i] == F{0} && a[i] == F{0};
        const bool signed_zero =
            (abs_b == kInf<F> && std::isnan(a[i])) || abs_a == kInf<F>;
        re[i] = zero          ? kInf<F>
                : signed_zero ? std::copysign(F{0}, a[i])
                              : r * cos_v[i];
        im[i] = zero          ? kNan<F>
                : signed_zero ? std::copysign(F{0}, b[i]) * F{-1}
                              : r * sin_v[i];
      }
      return absl::OkStatus();
    }
    default:
      return NotForComplex(instr, instr.shape.type());
  }
}

template <typename F>
absl::Status UnaryComplex(const hlo::Instruction& instr,
                          const std::complex<F>* in, void* out, int64_t n) {
  Block<F> a, b, re, im;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    Split(in + start, m, a.data(), b.data());
    if (instr.opcode == Opcode::kAbs) {
      ComplexAbs(a.data(), b.data(), static_cast<F*>(out) + start, m);
      continue;
    }
    CW_RETURN_IF_ERROR(
        UnaryBlock(instr, a.data(), b.data(), re.data(), im.data(), m));
    Join(re.data(), im.data(), m, static_cast<std::complex<F>*>(out) + start);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Binary.

// (a_r + a_i i) / (b_r + b_i i) by Smith's algorithm, then the corner cases
// of a zero or infinite denominator or an infinite numerator where that
// gave (NaN, NaN).
template <typename F>
std::complex<F> ComplexDivide(std::complex<F> lhs, std::complex<F> rhs) {
  const F a_r = lhs.real(), a_i = lhs.imag();
  const F b_r = rhs.real(), b_i = rhs.imag();
  const F ratio_ri = b_r / b_i;
  const F denom_ri = std::fma(ratio_ri, b_r, b_i);
  const F ratio_ir = b_i / b_r;
  const F denom_ir = std::fma(ratio_ir, b_i, b_r);
  const F b_r_abs = std::fabs(b_r), b_i_abs = std::fabs(b_i);
  const bool r_lt_i = b_r_abs < b_i_abs;
  const F c_r = r_lt_i ? std::fma(ratio_ri, a_r, a_i) / denom_ri
                       : std::fma(ratio_ir, a_i, a_r) / denom_ir;
  const F c_i = r_lt_i ? std::fma(ratio_ri, a_i, -a_r) / denom_ri
                       : std::fma(-ratio_ir, a_r, a_i) / denom_ir;
  if (!(std::isnan(c_r) && std::isnan(c_i))) return {c_r, c_i};
  const F inf = kInf<F>;
  if (b_r_abs == F{0} && b_i_abs == F{0} &&
      (!std::isnan(a_r) || !std::isnan(a_i))) {
    const F signed_inf = std::copysign(inf, b_r);
    return {signed_inf * a_r, signed_inf * a_i};
  }
  const F a_r_abs = std::fabs(a_r), a_i_abs = std::fabs(a_i);
  const bool a_r_inf = a_r_abs == inf, a_i_inf = a_i_abs == inf;
  const bool b_finite = b_r_abs != inf && b_i_abs != inf &&
                        !std::isnan(b_r) && !std::isnan(b_i);
  if ((a_r_inf || a_i_inf) && b_finite) {
    const F x = std::copysign(a_r_inf ? F{1} : F{0}, a_r);
    const F y = std::copysign(a_i_inf ? F{1} : F{0}, a_i);
    return {inf * std::fma(x, b_r, y * b_i), inf * std::fma(y, b_r, -(x * b_i))};
  }
  const bool b_r_inf = b_r_abs == inf, b_i_inf = b_i_abs == inf;
  const bool a_finite = a_r_abs != inf && a_i_abs != inf &&
                        !std::isnan(a_r) && !std::isnan(a_i);
  if ((b_r_inf || b_i_inf) && a_finite) {
    const F x = std::copysign(b_r_inf ? F{1} : F{0}, b_r);
    const F y = std::copysign(b_i_inf ? F{1} : F{0}, b_i);
    return {F{0} * std::fma(a_r, x, a_i * y),
            F{0} * std::fma(a_i, x, -(a_r * y))};
  }
  return {c_r, c_i};
}

template <typename F>
absl::Status BinaryComplex(const hlo::Instruction& instr,
                           const std::complex<F>* x, const std::complex<F>* y,
                           std::complex<F>* out, int64_t n) {
  switch (instr.opcode) {
    case Opcode::kAdd:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = {x[i].real() + y[i].real(), x[i].imag() + y[i].imag()};
      }
      return absl::OkStatus();
    case Opcode::kSubtract:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = {x[i].real() - y[i].real(), x[i].imag() - y[i].imag()};
      }
      return absl::OkStatus();
    case Opcode::kMultiply:
      for (int64_t i = 0; i < n; ++i) out[i] = ComplexMultiply(x[i], y[i]);
      return absl::OkStatus();
    case Opcode::kDivide:
      for (int64_t i = 0; i < n; ++i) out[i] = ComplexDivide(x[i], y[i]);
      return absl::OkStatus();
    case Opcode::kPower: {
      // |x|^c e^(-d arg x) (cos q + i sin q), q = c arg x + d log|x|,
      // with Kahan's cases for 0^y, x^0, 1^y and inf^c.
      Block<F> a, b, c, d, abs, abs_to_c, arg, neg_d_arg, e, ln_abs, q,
          cos_q, sin_q;
      for (int64_t start = 0; start < n; start += kBlock) {
        const int64_t m = std::min(kBlock, n - start);
        Split(x + start, m, a.data(), b.data());
        Split(y + start, m, c.data(), d.data());
        ComplexAbs(a.data(), b.data(), abs.data(), m);
        PowArray(abs.data(), c.data(), abs_to_c.data(), m);
        Atan2Array(b.data(), a.data(), arg.data(), m);
        for (int64_t i = 0; i < m; ++i) neg_d_arg[i] = -d[i] * arg[i];
        ExpArray(neg_d_arg.data(), e.data(), m);
        LogArray(abs.data(), ln_abs.data(), m);
        for (int64_t i = 0; i < m; ++i) {
          q[i] = std::fma(c[i], arg[i], d[i] * ln_abs[i]);
        }
        CosArray(q.data(), cos_q.data(), m);
        SinArray(q.data(), sin_q.data(), m);
        for (int64_t i = 0; i < m; ++i) {
          const F coeff = abs_to_c[i] * e[i];
          std::complex<F> r(coeff * cos_q[i], coeff * sin_q[i]);
          const F inf = kInf<F>;
          if (abs[i] == F{0} && d[i] == F{0} && F{0} <= c[i]) {
            r = {c[i] == F{0} ? F{1} : F{0}, F{0}};
          }
          if (c[i] == F{0} && d[i] == F{0}) r = {F{1}, F{0}};
          if (a[i] == F{1} && b[i] == F{0}) r = {F{1}, F{0}};
          if (a[i] == inf && b[i] == F{0} && d[i] == F{0} && c[i] > F{0}) {
            r = {inf, F{0}};
          }
          if (a[i] == inf && b[i] == F{0} && d[i] == F{0} && c[i] < F{0}) {
            r = {F{0}, F{0}};
          }
          out[start + i] = r;
        }
      }
      return absl::OkStatus();
    }
    default:
      return NotForComplex(instr, instr.shape.type());
  }
}

}  // namespace

absl::Status ComplexUnaryElements(const hlo::Instruction& instr,
                                  PrimitiveType type, const void* in,
                                  void* out, int64_t n) {
  if (type == PrimitiveType::kC64) {
    return UnaryComplex<float>(instr, static_cast<const hlo::C64*>(in), out, n);
  }
  return UnaryComplex<double>(instr, static_cast<const hlo::C128*>(in), out,
                              n);
}

absl::Status ComplexBinaryElements(const hlo::Instruction& instr,
                                   PrimitiveType type, const void* lhs,
                                   const void* rhs, void* out, int64_t n) {
  if (type == PrimitiveType::kC64) {
    return BinaryComplex<float>(instr, static_cast<const hlo::C64*>(lhs),
                                static_cast<const hlo::C64*>(rhs),
                                static_cast<hlo::C64*>(out), n);
  }
  return BinaryComplex<double>(instr, static_cast<const hlo::C128*>(lhs),
                               static_cast<const hlo::C128*>(rhs),
                               static_cast<hlo::C128*>(out), n);
}

void ComplexPartElements(bool imag, PrimitiveType type, const void* in,
                         void* out, int64_t n) {
  auto run = [&](auto tag) {
    using F = decltype(tag);
    const std::complex<F>* x = static_cast<const std::complex<F>*>(in);
    F* y = static_cast<F*>(out);
    for (int64_t i = 0; i < n; ++i) y[i] = imag ? x[i].imag() : x[i].real();
  };
  if (type == PrimitiveType::kC64) {
    run(float{});
  } else {
    run(double{});
  }
}

void ComplexFromPartsElements(PrimitiveType part_type, const void* re,
                              const void* im, void* out, int64_t n) {
  auto run = [&](auto tag) {
    using F = decltype(tag);
    const F* x = static_cast<const F*>(re);
    const F* y = static_cast<const F*>(im);
    std::complex<F>* z = static_cast<std::complex<F>*>(out);
    for (int64_t i = 0; i < n; ++i) z[i] = std::complex<F>(x[i], y[i]);
  };
  if (part_type == PrimitiveType::kF32) {
    run(float{});
  } else {
    run(double{});
  }
}

}  // namespace causeway::exec
