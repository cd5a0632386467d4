// Helpers shared by the CPU kernels: element-type traits, 16-bit float
// compute helpers, XLA's element conversion rules, row-major index
// arithmetic and a strided block copy that moves elements by their width
// (the core of transpose, slice, broadcast, pad, concatenate, reverse and
// dynamic-(update-)slice).
//
// Everything here is a pure function; thread-safe.
#ifndef CAUSEWAY_EXEC_KERNEL_UTIL_H_
#define CAUSEWAY_EXEC_KERNEL_UTIL_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "absl/status/status.h"
#include "causeway/hlo/float16.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::exec {

// ---------------------------------------------------------------------------
// Element-type traits.

// True for the 16-bit float storage types (hlo::BF16, hlo::F16).
template <typename T>
inline constexpr bool kIsHalf =
    std::is_same_v<T, hlo::BF16> || std::is_same_v<T, hlo::F16>;

// True for every floating storage type (f16, bf16, f32, f64).
template <typename T>
inline constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;

// True for integer storage types other than pred (bool).
template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

namespace kernel_util_internal {
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<hlo::BF16> {
  using type = float;
};
template <>
struct ComputeTypeOf<hlo::F16> {
  using type = float;
};
template <hlo::MinifloatKind kKind>
struct ComputeTypeOf<hlo::Minifloat<kKind>> {
  using type = float;
};
template <int kBits, bool kSigned>
struct ComputeTypeOf<hlo::NarrowInt<kBits, kSigned>> {
  using type = int64_t;
};
}  // namespace kernel_util_internal

// The type arithmetic is done in: float for f16, bf16 and the minifloats,
// int64_t for the sub-byte integers, T otherwise (complex included).
template <typename T>
using ComputeType = typename kernel_util_internal::ComputeTypeOf<T>::type;

// Storage → compute type (widens f16/bf16 and minifloats to float, a
// sub-byte integer to its value; identity otherwise).
template <typename T>
inline ComputeType<T> ToCompute(T value) {
  if constexpr (kIsHalf<T> || hlo::kIsMinifloat<T>) {
    return static_cast<float>(value);
  } else if constexpr (hlo::kIsNarrowInt<T>) {
    return value.value();
  } else {
    return value;
  }
}

// A float storage value as float or double (f16/bf16 widened).
template <typename T>
inline auto ToComputeAny(T value) {
  if constexpr (kIsHalf<T>) {
    return static_cast<float>(value);
  } else {
    return value;
  }
}

// Compute → storage type: rounds float to f16/bf16 (nearest even); to a
// minifloat through f16, as XLA computes minifloat ops in f16 (f8e8m0fnu,
// beyond f16's range, directly); wraps a sub-byte integer.
template <typename T>
inline T FromCompute(ComputeType<T> value) {
  if constexpr (kIsHalf<T>) {
    return T(value);
  } else if constexpr (std::is_same_v<T, hlo::F8E8M0FNU>) {
    return T::FromDouble(value);
  } else if constexpr (hlo::kIsMinifloat<T>) {
    return T::FromDouble(static_cast<float>(hlo::F16(value)));
  } else if constexpr (hlo::kIsNarrowInt<T>) {
    return T::Wrap(value);
  } else {
    return value;
  }
}

// The unsigned integer type of the same width as a float storage type (its
// bit pattern), e.g. uint32_t for float, uint16_t for BF16.
template <typename T>
using FloatBitsType = std::conditional_t<
    sizeof(T) == 2, uint16_t,
    std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;

// Bit-level description of a float storage type.
template <typename T>
struct FloatFormat;
template <>
struct FloatFormat<hlo::F16> {
  static constexpr int kExponentBits = 5, kMantissaBits = 10;
};
template <>
struct FloatFormat<hlo::BF16> {
  static constexpr int kExponentBits = 8, kMantissaBits = 7;
};
template <>
struct FloatFormat<float> {
  static constexpr int kExponentBits = 8, kMantissaBits = 23;
};
template <>
struct FloatFormat<double> {
  static constexpr int kExponentBits = 11, kMantissaBits = 52;
};

// The bits of a float storage value.
template <typename T>
inline FloatBitsType<T> FloatToBits(T value) {
  if constexpr (kIsHalf<T>) {
    return value.bits;
  } else {
    return std::bit_cast<FloatBitsType<T>>(value);
  }
}
template <typename T>
inline T FloatFromBits(FloatBitsType<T> bits) {
  if constexpr (kIsHalf<T>) {
    T value;
    value.bits = bits;
    return value;
  } else {
    return std::bit_cast<T>(bits);
  }
}

// ---------------------------------------------------------------------------
// Element conversion with XLA's `convert` semantics:
//  - float → integer truncates toward zero and saturates: NaN → 0, values
//    beyond the range → the type's min/max (unsigned: negatives → 0);
//  - anything → pred is `value != 0` (NaN → true);
//  - pred → anything is 0 or 1;
//  - narrowing float conversions round to nearest even: f64 -> f16 once
//    (the processor's own conversion), f64 -> bf16 through f32 (twice), as
//    XLA's CPU backend does.

namespace kernel_util_internal {

template <typename To, typename From>
inline To FloatToInt(From value) {
  using Limits = std::numeric_limits<To>;
  if (std::isnan(value)) return To{0};
  // Exact bounds: min is a power of two (or 0); max + 1 is a power of two.
  constexpr From kMin = static_cast<From>(Limits::min());
  constexpr From kMaxPlusOne =
      static_cast<From>(static_cast<From>(Limits::max() / 2 + 1) * From{2});
  if (value <= kMin) return Limits::min();
  if (value >= kMaxPlusOne) return Limits::max();
  return static_cast<To>(value);
}

}  // namespace kernel_util_internal

// A minifloat, sub-byte integer or complex element widened to the type the
// conversion rules below treat it as: float (minifloats, exact), int64_t
// (sub-byte integers), the real part's type (complex).
template <typename T>
inline auto WidenForConvert(T value) {
  if constexpr (hlo::kIsMinifloat<T>) {
    return static_cast<float>(value);
  } else if constexpr (hlo::kIsNarrowInt<T>) {
    return value.value();
  } else {
    return value;
  }
}

template <typename To, typename From>
inline To ConvertElement(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (hlo::kIsComplex<To>) {
    // Part by part; a real value gets an imaginary part of 0. (XLA has no
    // convert from complex to real: that is `real`.)
    using Part = typename To::value_type;
    if constexpr (hlo::kIsComplex<From>) {
      return To(static_cast<Part>(value.real()), static_cast<Part>(value.imag()));
    } else {
      return To(ConvertElement<Part>(value), Part{0});
    }
  } else if constexpr (hlo::kIsComplex<From>) {
    return ConvertElement<To>(value.real());  // Refused by shape inference.
  } else if constexpr (hlo::kIsMinifloat<From> || hlo::kIsNarrowInt<From>) {
    return ConvertElement<To>(WidenForConvert(value));
  } else if constexpr (hlo::kIsMinifloat<To>) {
    // Rounded once from the exact value (every source but s64/u64 beyond
    // 2^53 is exact in double; those overflow every minifloat anyway).
    if constexpr (std::is_same_v<From, bool>) {
      return To::FromDouble(value ? 1.0 : 0.0);
    } else if constexpr (kIsHalf<From>) {
      return To::FromDouble(static_cast<float>(value));
    } else {
      return To::FromDouble(static_cast<double>(value));
    }
  } else if constexpr (hlo::kIsNarrowInt<To>) {
    // Integers wrap; floats truncate toward zero and saturate at the
    // type's bounds (NaN -> 0), as XLA converts to any integer.
    if constexpr (std::is_same_v<From, bool>) {
      return To::Wrap(value ? 1 : 0);
    } else if constexpr (std::is_integral_v<From>) {
      return To::Wrap(static_cast<int64_t>(value));
    } else {
      const double x = static_cast<double>(ToComputeAny(value));
      if (std::isnan(x)) return To::Wrap(0);
      if (x <= static_cast<double>(To::kMin)) return To::Wrap(To::kMin);
      if (x >= static_cast<double>(To::kMax)) return To::Wrap(To::kMax);
      return To::Wrap(static_cast<int64_t>(x));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsFloat<From>) {
      return ToCompute(value) != 0;  // NaN != 0: true.
    } else {
      return value != 0;
    }
  } else if constexpr (std::is_same_v<From, bool>) {
    if constexpr (kIsHalf<To>) {
      return To(value ? 1.0f : 0.0f);
    } else {
      return static_cast<To>(value ? 1 : 0);
    }
  } else if constexpr (kIsFloat<From> && kIsInt<To>) {
    return kernel_util_internal::FloatToInt<To, ComputeType<From>>(
        ToCompute(value));
  } else if constexpr (std::is_same_v<To, hlo::F16> &&
                       std::is_same_v<From, double>) {
    // The processor converts f64 to f16 directly, rounding once.
    To result;
    result.bits = hlo::F16::FromDouble(value);
    return result;
  } else if constexpr (kIsHalf<To>) {
    // XLA's CPU backend converts to bf16 through f32 (so f64 rounds twice,
    // exactly as it does); integers reach f16 exactly or overflow either
    // way.
    return To(static_cast<float>(value));
  } else if constexpr (kIsHalf<From>) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    // Integer ↔ integer wraps (two's complement); integer → f32/f64 and
    // f64 ↔ f32 round to nearest even: C++ conversions do exactly this.
    return static_cast<To>(value);
  }
}

// ---------------------------------------------------------------------------
// Denormals.

// While alive, flushes denormal results to zero and treats denormal inputs
// as zero (x86 MXCSR FTZ and DAZ) on this thread, as XLA's CPU backend runs
// its kernels; restores the previous mode when destroyed. A no-op on other
// architectures.
class ScopedFlushDenormals {
 public:
#if defined(__SSE__) || defined(__x86_64__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

  // While alive, the thread is back in the mode `flush` found (a kernel
  // that runs in the caller's mode, called inside a flushed loop); `flush`
  // must outlive it.
  class Paused {
   public:
#if defined(__SSE__) || defined(__x86_64__)
    explicit Paused(const ScopedFlushDenormals& flush) : flush_(flush) {
      _mm_setcsr(flush_.saved_);
    }
    ~Paused() { _mm_setcsr(flush_.saved_ | kFlushToZero | kDenormalsAreZero); }
#else
    explicit Paused(const ScopedFlushDenormals&) {}
#endif
    Paused(const Paused&) = delete;
    Paused& operator=(const Paused&) = delete;

#if defined(__SSE__) || defined(__x86_64__)
   private:
    const ScopedFlushDenormals& flush_;
#endif
  };

 private:
#if defined(__SSE__) || defined(__x86_64__)
  static constexpr unsigned kFlushToZero = 0x8000;
  static constexpr unsigned kDenormalsAreZero = 0x0040;
  unsigned saved_;
#endif
};

// ---------------------------------------------------------------------------
// Typed access to literal storage.

template <typename T>
inline const T* DataPtr(const hlo::Literal& literal) {
  return static_cast<const T*>(literal.untyped_data());
}
template <typename T>
inline T* MutableDataPtr(hlo::Literal& literal) {
  return static_cast<T*>(literal.mutable_untyped_data());
}

// Element `i` of an integer (or pred) array as int64_t; u64 values above
// INT64_MAX saturate. For index operands of any integer type.
inline int64_t ReadIndexElement(const hlo::Literal& literal, int64_t i) {
  return hlo::VisitType(literal.shape().type(), [&](auto tag) -> int64_t {
    using E = decltype(tag);
    E value = DataPtr<E>(literal)[i];
    if constexpr (std::is_same_v<E, uint64_t>) {
      return value > static_cast<uint64_t>(INT64_MAX)
                 ? INT64_MAX
                 : static_cast<int64_t>(value);
    } else if constexpr (hlo::kIsNarrowInt<E>) {
      return value.value();
    } else if constexpr (hlo::kIsComplex<E> || hlo::kIsMinifloat<E>) {
      return 0;  // Not an index type: shape inference refuses it.
    } else if constexpr (kIsInt<E> || std::is_same_v<E, bool>) {
      return static_cast<int64_t>(value);
    } else {
      return ConvertElement<int64_t>(value);
    }
  });
}

// ---------------------------------------------------------------------------
// Row-major index arithmetic.

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

// Advances `index` to the next index of `dims` in row-major order. Returns
// false (with `index` all zeros again) after the last index.
inline bool NextIndex(std::span<int64_t> index, std::span<const int64_t> dims) {
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    if (++index[i] < dims[i]) return true;
    index[i] = 0;
  }
  return false;
}

// Calls fn(std::span<const int64_t> index) for every index of `dims` in
// row-major order (once for rank 0; never when an extent is zero).
template <typename Fn>
inline void ForEachIndex(std::span<const int64_t> dims, Fn&& fn) {
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  std::vector<int64_t> index(dims.size(), 0);
  do {
    fn(std::span<const int64_t>(index));
  } while (NextIndex(std::span<int64_t>(index), dims));
}

// Dot product of an index with strides.
inline int64_t LinearIndex(std::span<const int64_t> index,
                           std::span<const int64_t> strides) {
  int64_t offset = 0;
  for (size_t i = 0; i < index.size(); ++i) offset += index[i] * strides[i];
  return offset;
}

// ---------------------------------------------------------------------------
// Layouts.

// The shape's minor-to-major order, or the default descending one
// ({rank-1, ..., 0}) when the shape gives none.
inline std::vector<int64_t> MinorToMajorOrDefault(const hlo::Shape& shape) {
  if (!shape.minor_to_major().empty()) return shape.minor_to_major();
  std::vector<int64_t> m2m(shape.rank());
  for (int64_t i = 0; i < shape.rank(); ++i) m2m[i] = shape.rank() - 1 - i;
  return m2m;
}

// True when the layout is absent or descending (row-major).
inline bool HasDefaultLayout(const hlo::Shape& shape) {
  const std::vector<int64_t>& m2m = shape.minor_to_major();
  for (size_t i = 0; i < m2m.size(); ++i) {
    if (m2m[i] != static_cast<int64_t>(m2m.size() - 1 - i)) return false;
  }
  return true;
}

// True when the layout is a valid one (absent, or a permutation of the
// dims) that stores the elements in row-major order: the dims of extent > 1
// appear major to minor in increasing order (unit dims may sit anywhere), so
// a bitcast or a fused loop may read the buffer as row-major.
inline bool LayoutIsRowMajor(const hlo::Shape& shape) {
  const std::vector<int64_t>& m2m = shape.minor_to_major();
  if (m2m.empty()) return true;
  if (!hlo::IsPermutation(m2m, shape.rank())) return false;
  int64_t previous = -1;
  for (auto it = m2m.rbegin(); it != m2m.rend(); ++it) {
    if (shape.dim(*it) == 1) continue;
    if (*it < previous) return false;
    previous = *it;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Strided block copy.
//
// For every index `i` of `dims`:
//   dst[sum(i * dst_strides)] = src[sum(i * src_strides)]
// moving `element_bytes` bytes per element (1, 2, 4 or 8; any other width
// is copied bytewise). Strides are in elements and may be zero (src only:
// broadcast) or negative (reverse); `src`/`dst` point at index 0. Adjacent
// dims that are contiguous in both are merged, contiguous rows are moved
// with memcpy, leading broadcast dims are replicated with memcpy, and a
// transposing copy is tiled for the cache. Ranges must not overlap.
void CopyStrided(int64_t element_bytes, std::span<const int64_t> dims,
                 const void* src, std::span<const int64_t> src_strides,
                 void* dst, std::span<const int64_t> dst_strides);

// Checks that `literal` is an array of `type` with `dims`; InvalidArgument
// naming `what` otherwise.
absl::Status CheckArray(const hlo::Literal& literal, hlo::PrimitiveType type,
                        std::span<const int64_t> dims, const char* what);

// ---------------------------------------------------------------------------
// Messages.

// "[2,3]".
std::string DimsText(std::span<const int64_t> dims);
// InvalidArgument "gather 'g': <why>": a kernel refusing its operands.
absl::Status Invalid(const hlo::Instruction& instr, std::string_view why);
// "in instruction 'c' (line 14) of computation 'main'".
std::string Where(const hlo::Instruction& instruction,
                  const hlo::Computation& computation);
// `status` with Where(...) in front of its message.
absl::Status Annotate(const absl::Status& status,
                      const hlo::Instruction& instruction,
                      const hlo::Computation& computation);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_KERNEL_UTIL_H_
