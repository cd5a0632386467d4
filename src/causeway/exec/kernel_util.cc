#include "causeway/exec/kernel_util.h"

#include <algorithm>
#include <cstring>

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

// dst[i * dst_row + j] = src[i + j * src_col] for i < rows, j < cols, in
// cache-sized tiles.
template <typename U>
void TransposeTile(const U* src, int64_t src_col, U* dst, int64_t dst_row,
                   int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 64 / sizeof(U) < 16 ? 16 : 64 / sizeof(U);
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    const int64_t i1 = std::min(rows, i0 + kBlock);
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      const int64_t j1 = std::min(cols, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) {
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

}  // namespace causeway::exec
