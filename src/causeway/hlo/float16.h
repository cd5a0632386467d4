// 16-bit floating types stored as their bits: bfloat16 and IEEE half.
// Arithmetic is done in float and rounded back (round to nearest even), as
// XLA's CPU backend does.
#ifndef CAUSEWAY_HLO_FLOAT16_H_
#define CAUSEWAY_HLO_FLOAT16_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace causeway::hlo {

struct BF16 {
  uint16_t bits = 0;
  BF16() = default;
  explicit BF16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  }
  static uint16_t FromFloat(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
    uint32_t rounding_bias = 0x7FFF + ((u >> 16) & 1);
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }
  friend bool operator==(BF16 a, BF16 b) { return a.bits == b.bits; }
};

struct F16 {
  uint16_t bits = 0;
  F16() = default;
  explicit F16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const { return ToFloat(bits); }

  static float ToFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1F;
    uint32_t mantissa = h & 0x3FF;
    uint32_t u;
    if (exponent == 0) {
      if (mantissa == 0) {
        u = sign;
      } else {  // Subnormal: normalize.
        exponent = 127 - 15 + 1;
        while ((mantissa & 0x400) == 0) {
          mantissa <<= 1;
          --exponent;
        }
        mantissa &= 0x3FF;
        u = sign | (exponent << 23) | (mantissa << 13);
      }
    } else if (exponent == 0x1F) {
      u = sign | 0x7F800000 | (mantissa << 13);
    } else {
      u = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
    return std::bit_cast<float>(u);
  }

  static uint16_t FromFloat(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
    u &= 0x7FFFFFFF;
    if (u >= 0x7F800000) {  // Inf or NaN.
      return sign | 0x7C00 | (u > 0x7F800000 ? 0x200 : 0);
    }
    if (u >= 0x477FF000) return sign | 0x7C00;  // Rounds to infinity.
    if (u < 0x38800000) {  // Result is subnormal or zero.
      float a = std::bit_cast<float>(u);
      // Scale so that the subnormal step 2^-24 becomes 1, round to even.
      float scaled = a * 16777216.0f;
      return sign | static_cast<uint16_t>(std::nearbyint(scaled));
    }
    uint32_t mantissa_odd = (u >> 13) & 1;
    u += 0xFFF + mantissa_odd;  // Round to nearest even.
    u -= (127 - 15) << 23;
    return sign | static_cast<uint16_t>(u >> 13);
  }

  // Rounds a double to half once (nearest even), as the processor's own
  // f64 -> f16 conversion does (rounding through float can round twice).
  static uint16_t FromDouble(double d) {
    uint64_t u = std::bit_cast<uint64_t>(d);
    const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000);
    u &= 0x7FFFFFFFFFFFFFFFull;
    if (u >= 0x7FF0000000000000ull) {  // Inf or NaN.
      return sign | 0x7C00 | (u > 0x7FF0000000000000ull ? 0x200 : 0);
    }
    // 65520 = 65504 + half an ulp: from there on the result is infinite.
    if (u >= 0x40EFFE0000000000ull) return sign | 0x7C00;
    if (u < 0x3F10000000000000ull) {  // Below 2^-14: subnormal or zero.
      // Exact scaling, so the subnormal step 2^-24 becomes 1.
      const double scaled = std::bit_cast<double>(u) * 16777216.0;
      return sign | static_cast<uint16_t>(std::nearbyint(scaled));
    }
    const uint64_t mantissa_odd = (u >> 42) & 1;
    u += (uint64_t{1} << 41) - 1 + mantissa_odd;  // Round to nearest even.
    u -= uint64_t{1023 - 15} << 52;
    return sign | static_cast<uint16_t>(u >> 42);
  }
  friend bool operator==(F16 a, F16 b) { return a.bits == b.bits; }
};

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_FLOAT16_H_
