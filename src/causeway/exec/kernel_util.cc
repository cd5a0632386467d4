#include "causeway/exec/kernel_util.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace causeway::exec {
namespace {

// One dimension of a strided copy: extent and the two strides (elements).
struct CopyDim {
  int64_t size;
  int64_t src;
  int64_t dst;
};

using CopyDims = absl::InlinedVector<CopyDim, 8>;

// Drops unit dims and merges each dim into its outer neighbour when the
// pair is contiguous in both source and destination.
CopyDims SimplifyDims(std::span<const int64_t> dims,
                      std::span<const int64_t> src_strides,
                      std::span<const int64_t> dst_strides) {
  CopyDims out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    CopyDim d{dims[i], src_strides[i], dst_strides[i]};
    if (!out.empty()) {
      CopyDim& prev = out.back();
      if (prev.src == d.src * d.size && prev.dst == d.dst * d.size) {
        prev = CopyDim{prev.size * d.size, d.src, d.dst};
        continue;
      }
    }
    out.push_back(d);
  }
  return out;
}

// True when the destination of `d` is dense row-major.
bool DestinationIsDense(std::span<const CopyDim> d) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(d.size()) - 1; i >= 0; --i) {
    if (d[i].dst != expected) return false;
    expected *= d[i].size;
  }
  return true;
}

template <typename U>
void CopyRow(const U* src, int64_t src_stride, U* dst, int64_t dst_stride,
             int64_t n) {
  if (dst_stride == 1) {
    if (src_stride == 1) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(U));
    } else if (src_stride == 0) {
      std::fill_n(dst, n, *src);
    } else if (src_stride == -1) {
      for (int64_t j = 0; j < n; ++j) dst[j] = src[-j];
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = src[j * src_stride];
    }
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j * dst_stride] = src[j * src_stride];
  }
}

// Micro-kernels: d[a * ds + b] = s[a + b * ss] for a, b < K, with K = 8
// (2- and 4-byte elements) or 4 (8-byte elements).
#if defined(__AVX2__)
inline void Transpose8x8(const uint32_t* s, int64_t ss, uint32_t* d,
                         int64_t ds) {
  const float* f = reinterpret_cast<const float*>(s);
  __m256 r0 = _mm256_loadu_ps(f + 0 * ss), r1 = _mm256_loadu_ps(f + 1 * ss);
  __m256 r2 = _mm256_loadu_ps(f + 2 * ss), r3 = _mm256_loadu_ps(f + 3 * ss);
  __m256 r4 = _mm256_loadu_ps(f + 4 * ss), r5 = _mm256_loadu_ps(f + 5 * ss);
  __m256 r6 = _mm256_loadu_ps(f + 6 * ss), r7 = _mm256_loadu_ps(f + 7 * ss);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  float* o = reinterpret_cast<float*>(d);
  _mm256_storeu_ps(o + 0 * ds, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(o + 1 * ds, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(o + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(o + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(o + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(o + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(o + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(o + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

inline void Transpose8x8(const uint16_t* s, int64_t ss, uint16_t* d,
                         int64_t ds) {
  auto load = [&](int64_t k) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k * ss));
  };
  __m128i a0 = load(0), a1 = load(1), a2 = load(2), a3 = load(3);
  __m128i a4 = load(4), a5 = load(5), a6 = load(6), a7 = load(7);
  __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
  __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
  __m128i b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5);
  __m128i b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
  __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2);
  __m128i c2 = _mm_unpacklo_epi32(b1, b3), c3 = _mm_unpackhi_epi32(b1, b3);
  __m128i c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6);
  __m128i c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
  auto store = [&](int64_t k, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k * ds), v);
  };
  store(0, _mm_unpacklo_epi64(c0, c4));
  store(1, _mm_unpackhi_epi64(c0, c4));
  store(2, _mm_unpacklo_epi64(c1, c5));
  store(3, _mm_unpackhi_epi64(c1, c5));
  store(4, _mm_unpacklo_epi64(c2, c6));
  store(5, _mm_unpackhi_epi64(c2, c6));
  store(6, _mm_unpacklo_epi64(c3, c7));
  store(7, _mm_unpackhi_epi64(c3, c7));
}

inline void Transpose4x4(const uint64_t* s, int64_t ss, uint64_t* d,
                         int64_t ds) {
  const double* f = reinterpret_cast<const double*>(s);
  __m256d r0 = _mm256_loadu_pd(f + 0 * ss), r1 = _mm256_loadu_pd(f + 1 * ss);
  __m256d r2 = _mm256_loadu_pd(f + 2 * ss), r3 = _mm256_loadu_pd(f + 3 * ss);
  __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
  __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
  double* o = reinterpret_cast<double*>(d);
  _mm256_storeu_pd(o + 0 * ds, _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(o + 1 * ds, _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(o + 2 * ds, _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(o + 3 * ds, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#endif  // __AVX2__

template <typename U>
inline void Transpose8x8Or4x4(const U* s, int64_t ss, U* d, int64_t ds) {
#if defined(__AVX2__)
  if constexpr (sizeof(U) == 8) {
    Transpose4x4(reinterpret_cast<const uint64_t*>(s), ss,
                 reinterpret_cast<uint64_t*>(d), ds);
  } else if constexpr (sizeof(U) == 4 || sizeof(U) == 2) {
    Transpose8x8(s, ss, d, ds);
  }
#endif
}

// The micro-kernel size for elements of type U (0: none, use scalar code).
template <typename U>
constexpr int64_t MicroTile() {
#if defined(__AVX2__)
  if constexpr (sizeof(U) == 2 || sizeof(U) == 4) return 8;
  if constexpr (sizeof(U) == 8) return 4;
#endif
  return 0;
}

// dst[i * dst_row + j] = src[i + j * src_col] for i < rows, j < cols: a
// cache-blocked transpose built from SIMD micro-tiles, scalar at the edges.
template <typename U>
void TransposeTile(const U* src, int64_t src_col, U* dst, int64_t dst_row,
                   int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 32;
  constexpr int64_t kMicro = MicroTile<U>();
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    const int64_t i1 = std::min(rows, i0 + kBlock);
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      const int64_t j1 = std::min(cols, j0 + kBlock);
      int64_t i = i0;
      if constexpr (kMicro > 0) {
        for (; i + kMicro <= i1; i += kMicro) {
          int64_t j = j0;
          for (; j + kMicro <= j1; j += kMicro) {
            Transpose8x8Or4x4(src + i + j * src_col, src_col,
                              dst + i * dst_row + j, dst_row);
          }
          for (int64_t a = i; a < i + kMicro; ++a) {
            for (int64_t b = j; b < j1; ++b) {
              dst[a * dst_row + b] = src[a + b * src_col];
            }
          }
        }
      }
      for (; i < i1; ++i) {
        U* out = dst + i * dst_row;
        const U* in = src + i;
        for (int64_t j = j0; j < j1; ++j) out[j] = in[j * src_col];
      }
    }
  }
}

template <typename U>
void CopyTyped(std::span<const CopyDim> d, const U* src, U* dst) {
  const int64_t rank = static_cast<int64_t>(d.size());
  if (rank == 0) {
    *dst = *src;
    return;
  }
  // Leading broadcast dims into a dense destination: fill one block, then
  // replicate it.
  if (rank >= 2 && d[0].src == 0 && DestinationIsDense(d)) {
    CopyTyped(d.subspan(1), src, dst);
    const int64_t block = d[0].dst;
    for (int64_t k = 1; k < d[0].size; ++k) {
      std::memcpy(dst + k * block, dst, static_cast<size_t>(block) * sizeof(U));
    }
    return;
  }
  const CopyDim inner = d[rank - 1];
  // A transposing copy: the destination's inner dim is strided in the
  // source while another dim is contiguous there; tile the pair.
  int64_t tile_dim = -1;
  if (inner.dst == 1 && inner.src != 1 && inner.src != 0 && inner.size >= 4) {
    for (int64_t i = rank - 2; i >= 0; --i) {
      if (d[i].src == 1 && d[i].size >= 4) {
        tile_dim = i;
        break;
      }
    }
  }
  CopyDims outer;
  for (int64_t i = 0; i + 1 < rank; ++i) {
    if (i != tile_dim) outer.push_back(d[i]);
  }
  const int64_t outer_rank = static_cast<int64_t>(outer.size());
  absl::InlinedVector<int64_t, 8> index(outer.size(), 0);
  const U* s = src;
  U* t = dst;
  while (true) {
    if (tile_dim >= 0) {
      TransposeTile(s, inner.src, t, d[tile_dim].dst, d[tile_dim].size,
                    inner.size);
    } else {
      CopyRow(s, inner.src, t, inner.dst, inner.size);
    }
    int64_t i = outer_rank - 1;
    for (; i >= 0; --i) {
      if (++index[i] < outer[i].size) {
        s += outer[i].src;
        t += outer[i].dst;
        break;
      }
      s -= outer[i].src * (outer[i].size - 1);
      t -= outer[i].dst * (outer[i].size - 1);
      index[i] = 0;
    }
    if (i < 0) break;
  }
}

}  // namespace

void CopyStrided(int64_t element_bytes, std::span<const int64_t> dims,
                 const void* src, std::span<const int64_t> src_strides,
                 void* dst, std::span<const int64_t> dst_strides) {
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  CopyDims simple = SimplifyDims(dims, src_strides, dst_strides);
  switch (element_bytes) {
    case 1:
      CopyTyped(std::span<const CopyDim>(simple),
                static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst));
      return;
    case 2:
      CopyTyped(std::span<const CopyDim>(simple),
                static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst));
      return;
    case 4:
      CopyTyped(std::span<const CopyDim>(simple),
                static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst));
      return;
    case 8:
      CopyTyped(std::span<const CopyDim>(simple),
                static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst));
      return;
    default: {
      // Any other width: a byte copy with strides scaled to bytes.
      CopyDims bytes = simple;
      for (CopyDim& dim : bytes) {
        dim.src *= element_bytes;
        dim.dst *= element_bytes;
      }
      bytes.push_back(CopyDim{element_bytes, 1, 1});
      CopyTyped(std::span<const CopyDim>(bytes),
                static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst));
      return;
    }
  }
}

absl::Status CheckArray(const hlo::Literal& literal, hlo::PrimitiveType type,
                        std::span<const int64_t> dims, const char* what) {
  const hlo::Shape& shape = literal.shape();
  if (!shape.IsArray() || shape.type() != type ||
      !std::equal(shape.dims().begin(), shape.dims().end(), dims.begin(),
                  dims.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has shape ", shape.ToString(/*with_layout=*/false),
        "; expected ", std::string(hlo::PrimitiveTypeName(type)), "[",
        absl::StrJoin(dims, ","), "]"));
  }
  return absl::OkStatus();
}

std::string DimsText(std::span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::Status Invalid(const hlo::Instruction& instr, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(hlo::OpcodeName(instr.opcode)), " '",
                   instr.name, "': ", std::string(why)));
}

std::string Where(const hlo::Instruction& instruction,
                  const hlo::Computation& computation) {
  return absl::StrCat("in instruction '", instruction.name, "' (line ",
                      instruction.line, ") of computation '",
                      computation.name(), "'");
}

absl::Status Annotate(const absl::Status& status,
                      const hlo::Instruction& instruction,
                      const hlo::Computation& computation) {
  return absl::Status(
      status.code(),
      absl::StrCat(Where(instruction, computation), ": ", status.message()));
}

}  // namespace causeway::exec
