// The element types beyond the IEEE basics (float16.h), in the C++ types
// that store them: complex numbers, the sub-byte integers s2/s4/u2/u4 and
// the minifloats f8e5m2, f8e4m3, f8e4m3fn, f8e4m3b11fnuz, f8e5m2fnuz,
// f8e4m3fnuz, f8e3m4, f8e8m0fnu and f4e2m1fn.
//
// Storage is what XLA's host literals (and numpy with ml_dtypes) hold:
//  - c64/c128: std::complex<float/double>, the real part first;
//  - s2/s4/u2/u4: one element per byte, the bits in the low bits of the
//    byte and zeros above (ml_dtypes' layout). XLA:CPU packs them two (or four) to a byte in device buffers
//    (`s4[8]{0:E(4)}`); Causeway keeps the layout for printing only, as it
//    does every layout, and stores values unpacked (docs/hlo.md);
//  - minifloats: one byte each, their bits (f4e2m1fn in the low nibble).
//
// Conversions round to nearest even, once, from any float source, with
// each format's overflow rule, as XLA:CPU converts (measured against JAX
// 0.10.2 bit for bit, tests in element_types_test.cc and
// python/tests/test_dtypes_vs_jax.py). Value types; thread-compatible.
#ifndef CAUSEWAY_HLO_ELEMENT_TYPES_H_
#define CAUSEWAY_HLO_ELEMENT_TYPES_H_

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace causeway::hlo {

using C64 = std::complex<float>;
using C128 = std::complex<double>;

// ---------------------------------------------------------------------------
// Sub-byte integers.

template <int kBits, bool kSigned>
struct NarrowInt {
  static constexpr int kBitWidth = kBits;
  static constexpr bool kIsSigned = kSigned;
  static constexpr int64_t kMin = kSigned ? -(int64_t{1} << (kBits - 1)) : 0;
  static constexpr int64_t kMax =
      kSigned ? (int64_t{1} << (kBits - 1)) - 1 : (int64_t{1} << kBits) - 1;
  static constexpr uint8_t kMask = static_cast<uint8_t>((1u << kBits) - 1);

  // The kBits-wide pattern in the low bits, the rest zero (as ml_dtypes
  // stores int4 and XLA's host literals hold it).
  uint8_t bits = 0;

  NarrowInt() = default;
  // `v` wrapped (Wrap), for generic code that casts numbers to element
  // types.
  template <typename V>
    requires std::is_arithmetic_v<V>
  explicit NarrowInt(V v) : bits(Wrap(static_cast<int64_t>(v)).bits) {}

  // `v` modulo 2^kBits, as two's complement (what an integer convert to a
  // narrower type does).
  static NarrowInt Wrap(int64_t v) {
    NarrowInt result;
    result.bits = static_cast<uint8_t>(static_cast<uint64_t>(v) & kMask);
    return result;
  }
  // The value, sign- or zero-extended.
  int64_t value() const {
    const int64_t low = bits & kMask;
    if (kSigned && (low >> (kBits - 1)) != 0) return low - (int64_t{1} << kBits);
    return low;
  }
  friend bool operator==(NarrowInt a, NarrowInt b) {
    return (a.bits & kMask) == (b.bits & kMask);
  }
};

using S2 = NarrowInt<2, true>;
using S4 = NarrowInt<4, true>;
using U2 = NarrowInt<2, false>;
using U4 = NarrowInt<4, false>;

// ---------------------------------------------------------------------------
// Minifloats.

// How a format spells NaN.
enum class NanEncoding {
  kIeee,          // exponent all ones, mantissa non-zero (and infinities)
  kAllOnes,       // "fn": only exponent and mantissa all ones; no infinities
  kNegativeZero,  // "fnuz": the bits of -0 (0x80); no infinities, no -0
  kOnlyAllOnes,   // f8e8m0fnu: 0xFF, the only non-number of an unsigned type
  kNone,          // f4e2m1fn: no NaN (XLA writes -0 for one)
};

struct MinifloatFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_sign;
  NanEncoding nan;
  // Stored bits of the largest finite magnitude.
  uint8_t max_finite;
};

enum class MinifloatKind {
  kF8E5M2,
  kF8E4M3,
  kF8E4M3FN,
  kF8E4M3B11FNUZ,
  kF8E5M2FNUZ,
  kF8E4M3FNUZ,
  kF8E3M4,
  kF8E8M0FNU,
  kF4E2M1FN,
};

constexpr MinifloatFormat FormatOf(MinifloatKind kind) {
  switch (kind) {
    case MinifloatKind::kF8E5M2: return {5, 2, 15, true, NanEncoding::kIeee, 0x7B};
    case MinifloatKind::kF8E4M3: return {4, 3, 7, true, NanEncoding::kIeee, 0x77};
    case MinifloatKind::kF8E4M3FN: return {4, 3, 7, true, NanEncoding::kAllOnes, 0x7E};
    case MinifloatKind::kF8E4M3B11FNUZ:
      return {4, 3, 11, true, NanEncoding::kNegativeZero, 0x7F};
    case MinifloatKind::kF8E5M2FNUZ:
      return {5, 2, 16, true, NanEncoding::kNegativeZero, 0x7F};
    case MinifloatKind::kF8E4M3FNUZ:
      return {4, 3, 8, true, NanEncoding::kNegativeZero, 0x7F};
    case MinifloatKind::kF8E3M4: return {3, 4, 3, true, NanEncoding::kIeee, 0x6F};
    case MinifloatKind::kF8E8M0FNU:
      return {8, 0, 127, false, NanEncoding::kOnlyAllOnes, 0xFE};
    case MinifloatKind::kF4E2M1FN: return {2, 1, 1, true, NanEncoding::kNone, 0x07};
  }
  return {};
}

namespace element_types_internal {

// The value of minifloat bits `bits` of `f`, exactly (every minifloat
// value is a float).
constexpr float DecodeMinifloat(const MinifloatFormat& f, uint8_t bits) {
  const int value_bits = f.exponent_bits + f.mantissa_bits;
  const uint32_t magnitude_mask = (1u << value_bits) - 1;
  const bool negative = f.has_sign && ((bits >> value_bits) & 1) != 0;
  const uint32_t magnitude = bits & magnitude_mask;
  const uint32_t exponent = magnitude >> f.mantissa_bits;
  const uint32_t mantissa = magnitude & ((1u << f.mantissa_bits) - 1);
  const uint32_t exponent_all_ones = (1u << f.exponent_bits) - 1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (f.nan) {
    case NanEncoding::kIeee:
      if (exponent == exponent_all_ones) {
        if (mantissa != 0) return negative ? -nan : nan;
        return negative ? -std::numeric_limits<float>::infinity()
                        : std::numeric_limits<float>::infinity();
      }
      break;
    case NanEncoding::kAllOnes:
      if (magnitude == magnitude_mask) return negative ? -nan : nan;
      break;
    case NanEncoding::kNegativeZero:
      if (bits == 0x80) return nan;
      break;
    case NanEncoding::kOnlyAllOnes:
      if (bits == 0xFF) return nan;
      break;
    case NanEncoding::kNone:
      break;
  }
  float value;
  if (exponent == 0 && f.mantissa_bits > 0) {
    value = std::ldexp(static_cast<float>(mantissa),
                       1 - f.bias - f.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>((1u << f.mantissa_bits) | mantissa),
                       static_cast<int>(exponent) - f.bias - f.mantissa_bits);
  }
  return negative ? -value : value;
}

// `x` rounded to nearest even into format `f`, once. Overflow gives
// infinity where the format has one, else NaN (saturating instead for
// f4e2m1fn, which has neither), as XLA:CPU and ml_dtypes convert.
inline uint8_t EncodeMinifloat(const MinifloatFormat& f, double x) {
  const int value_bits = f.exponent_bits + f.mantissa_bits;
  const uint8_t sign_bit =
      f.has_sign ? static_cast<uint8_t>(1u << value_bits) : 0;
  const bool negative = std::signbit(x);
  const uint8_t exponent_field_max =
      static_cast<uint8_t>((1u << f.exponent_bits) - 1);
  auto nan_bits = [&]() -> uint8_t {
    switch (f.nan) {
      case NanEncoding::kIeee:
        // The quiet NaN: top mantissa bit set; the sign kept.
        return static_cast<uint8_t>(
            (negative ? sign_bit : 0) |
            (exponent_field_max << f.mantissa_bits) |
            (1u << (f.mantissa_bits - 1)));
      case NanEncoding::kAllOnes:
        return static_cast<uint8_t>((negative ? sign_bit : 0) |
                                    ((1u << value_bits) - 1));
      case NanEncoding::kNegativeZero:
        return 0x80;
      case NanEncoding::kOnlyAllOnes:
        return 0xFF;
      case NanEncoding::kNone:
        return sign_bit;  // -0, as XLA writes a NaN into f4e2m1fn.
    }
    return 0;
  };
  if (std::isnan(x)) return nan_bits();
  if (!f.has_sign && negative && x != 0) return nan_bits();
  const double magnitude = std::fabs(x);
  auto overflow = [&]() -> uint8_t {
    switch (f.nan) {
      case NanEncoding::kIeee:
        return static_cast<uint8_t>((negative ? sign_bit : 0) |
                                    (exponent_field_max << f.mantissa_bits));
      case NanEncoding::kNone:
        return static_cast<uint8_t>((negative ? sign_bit : 0) | f.max_finite);
      default:
        return nan_bits();
    }
  };
  if (std::isinf(magnitude)) return overflow();
  const int min_normal_exponent = 1 - f.bias;
  uint32_t encoded;
  if (magnitude == 0) {
    // f8e8m0fnu has no zero: it is not a number there.
    if (f.nan == NanEncoding::kOnlyAllOnes) return nan_bits();
    encoded = 0;
  } else {
    int exponent = std::ilogb(magnitude);  // floor(log2), exact.
    if (f.mantissa_bits == 0) {
      // f8e8m0fnu: powers of two only, 2^-127 the smallest.
      if (exponent < min_normal_exponent - 1) exponent = min_normal_exponent - 1;
    }
    const bool subnormal =
        exponent < min_normal_exponent && f.mantissa_bits > 0;
    const int scale = (subnormal ? min_normal_exponent : exponent) -
                      f.mantissa_bits;
    // Exact: a power-of-two scaling of a double.
    const double q = std::nearbyint(std::ldexp(magnitude, -scale));
    if (subnormal) {
      // q <= 2^m; 2^m is the smallest normal, whose bits are q too.
      encoded = static_cast<uint32_t>(q);
    } else {
      uint32_t significand = static_cast<uint32_t>(q);
      int biased = exponent + f.bias;
      if (significand == (2u << f.mantissa_bits)) {
        significand >>= 1;
        ++biased;
      }
      if (biased > static_cast<int>(exponent_field_max)) return overflow();
      encoded = (static_cast<uint32_t>(biased) << f.mantissa_bits) |
                (significand & ((1u << f.mantissa_bits) - 1));
    }
  }
  if (encoded > f.max_finite) return overflow();
  if (f.nan == NanEncoding::kNegativeZero && encoded == 0) return 0;  // No -0.
  return static_cast<uint8_t>((negative ? sign_bit : 0) | encoded);
}

}  // namespace element_types_internal

template <MinifloatKind kKind>
struct Minifloat {
  static constexpr MinifloatKind kind = kKind;
  static constexpr MinifloatFormat kFormat = FormatOf(kKind);

  uint8_t bits = 0;

  Minifloat() = default;
  // `v` rounded to nearest even (FromDouble), for generic code that casts
  // numbers to element types.
  template <typename V>
    requires std::is_arithmetic_v<V>
  explicit Minifloat(V v)
      : bits(element_types_internal::EncodeMinifloat(kFormat,
                                                     static_cast<double>(v))) {}
  static Minifloat FromBits(uint8_t b) {
    Minifloat m;
    m.bits = b;
    return m;
  }
  // Rounds to nearest even, once.
  static Minifloat FromDouble(double x) {
    return FromBits(element_types_internal::EncodeMinifloat(kFormat, x));
  }
  explicit operator float() const {
    return element_types_internal::DecodeMinifloat(kFormat, bits);
  }
  friend bool operator==(Minifloat a, Minifloat b) { return a.bits == b.bits; }
};

using F8E5M2 = Minifloat<MinifloatKind::kF8E5M2>;
using F8E4M3 = Minifloat<MinifloatKind::kF8E4M3>;
using F8E4M3FN = Minifloat<MinifloatKind::kF8E4M3FN>;
using F8E4M3B11FNUZ = Minifloat<MinifloatKind::kF8E4M3B11FNUZ>;
using F8E5M2FNUZ = Minifloat<MinifloatKind::kF8E5M2FNUZ>;
using F8E4M3FNUZ = Minifloat<MinifloatKind::kF8E4M3FNUZ>;
using F8E3M4 = Minifloat<MinifloatKind::kF8E3M4>;
using F8E8M0FNU = Minifloat<MinifloatKind::kF8E8M0FNU>;
using F4E2M1FN = Minifloat<MinifloatKind::kF4E2M1FN>;

// ---------------------------------------------------------------------------
// Traits.

template <typename T>
inline constexpr bool kIsComplex =
    std::is_same_v<T, C64> || std::is_same_v<T, C128>;

template <typename T>
struct IsNarrowIntT : std::false_type {};
template <int kBits, bool kSigned>
struct IsNarrowIntT<NarrowInt<kBits, kSigned>> : std::true_type {};
template <typename T>
inline constexpr bool kIsNarrowInt = IsNarrowIntT<T>::value;

template <typename T>
struct IsMinifloatT : std::false_type {};
template <MinifloatKind kKind>
struct IsMinifloatT<Minifloat<kKind>> : std::true_type {};
template <typename T>
inline constexpr bool kIsMinifloat = IsMinifloatT<T>::value;

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_ELEMENT_TYPES_H_
