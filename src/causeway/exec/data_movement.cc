// Shape and data movement kernels: copy, bitcast, broadcast, reshape,
// transpose, slice, concatenate, pad, iota, reverse, dynamic-slice and
// dynamic-update-slice.
//
// All of them but iota only move elements, so they work on element widths
// (not dtypes) through CopyStrided; reshapes, layout-only copies and
// default-layout bitcasts share the operand's storage.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"

namespace causeway::exec {
namespace {

using hlo::IsPermutation;
using hlo::PrimitiveType;
using hlo::Shape;

absl::Status CheckArrays(const Instruction& instr, const Literal& operand) {
  if (!instr.shape.IsArray() || !operand.shape().IsArray()) {
    return Invalid(instr, absl::StrCat("needs array shapes; got ",
                                       operand.shape().ToString(), " -> ",
                                       instr.shape.ToString()));
  }
  return absl::OkStatus();
}

absl::Status CheckSameType(const Instruction& instr, const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckArrays(instr, operand));
  if (operand.shape().type() != instr.shape.type()) {
    return Invalid(instr, absl::StrCat("operand type ",
                                       operand.shape().ToString(false),
                                       " differs from result type ",
                                       instr.shape.ToString(false)));
  }
  return absl::OkStatus();
}

// Writes the transpose of row-major `src` (dims `in_dims`) into `dst`:
// output dim i is input dim perm[i].
void TransposeInto(int64_t element_bytes, const std::vector<int64_t>& in_dims,
                   const std::vector<int64_t>& perm, const void* src,
                   void* dst) {
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  std::vector<int64_t> out_dims(perm.size()), src_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = in_dims[perm[i]];
    src_strides[i] = in_strides[perm[i]];
  }
  CopyStrided(element_bytes, out_dims, src, src_strides, dst,
              RowMajorStrides(out_dims));
}

// Fills every element of `result` with the element at `value`.
void FillWith(Literal& result, const void* value) {
  const int64_t n = result.shape().ElementCount();
  void* out = result.mutable_untyped_data();
  switch (hlo::ByteWidth(result.shape().type())) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, value, 1);
      std::memset(out, v, static_cast<size_t>(n));
      return;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, value, 2);
      std::fill_n(static_cast<uint16_t*>(out), n, v);
      return;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      std::fill_n(static_cast<uint32_t*>(out), n, v);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      std::fill_n(static_cast<uint64_t*>(out), n, v);
      return;
    }
    default:
      return;
  }
}

const std::byte* Bytes(const Literal& literal) {
  return static_cast<const std::byte*>(literal.untyped_data());
}
std::byte* MutableBytes(Literal& literal) {
  return static_cast<std::byte*>(literal.mutable_untyped_data());
}

// A scalar start index as XLA's CPU backend reads it: sign-extended from
// its own width whatever its signedness (so u8 200 is -56, then clamped).
int64_t ReadStartIndex(const Literal& index) {
  return hlo::VisitType(index.shape().type(), [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (kIsInt<T>) {
      return static_cast<int64_t>(
          static_cast<std::make_signed_t<T>>(DataPtr<T>(index)[0]));
    } else {
      return 0;  // Callers accept integer indices only.
    }
  });
}

// Reads scalar start indices and clamps each into [0, dim - size].
absl::StatusOr<std::vector<int64_t>> ClampedStarts(
    const Instruction& instr, const std::vector<int64_t>& dims,
    const std::vector<int64_t>& sizes,
    std::span<const Literal* const> start_indices) {
  if (start_indices.size() != dims.size()) {
    return Invalid(instr, absl::StrCat("needs ", dims.size(),
                                       " start indices, one per dim; got ",
                                       start_indices.size()));
  }
  std::vector<int64_t> starts(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const Shape& shape = start_indices[i]->shape();
    if (!shape.IsArray() || shape.rank() != 0 || !hlo::IsInteger(shape.type())) {
      return Invalid(instr, absl::StrCat("start index ", i,
                                         " must be an integer scalar; got ",
                                         shape.ToString(false)));
    }
    if (sizes[i] < 0 || sizes[i] > dims[i]) {
      return Invalid(instr, absl::StrCat("slice size ", sizes[i], " of dim ",
                                         i, " exceeds the operand's ",
                                         dims[i]));
    }
    starts[i] = std::clamp<int64_t>(ReadStartIndex(*start_indices[i]), 0,
                                    dims[i] - sizes[i]);
  }
  return starts;
}

}  // namespace

absl::StatusOr<Literal> EvalCopy(const Instruction& instr,
                                 const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  if (operand.shape().dims() != instr.shape.dims()) {
    return Invalid(instr, absl::StrCat("copy cannot change dims ",
                                       DimsText(operand.shape().dims()),
                                       " to ", DimsText(instr.shape.dims())));
  }
  // Values are row-major whatever the layout: a copy keeps them.
  return operand.WithShape(instr.shape);
}

absl::StatusOr<Literal> EvalBitcast(const Instruction& instr,
                                    const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckArrays(instr, operand));
  const Shape& in = operand.shape();
  const Shape& out = instr.shape;
  if (in.ByteSize() != out.ByteSize() ||
      hlo::ByteWidth(in.type()) != hlo::ByteWidth(out.type())) {
    return Invalid(instr, absl::StrCat("cannot bitcast ", in.ToString(),
                                       " to ", out.ToString(),
                                       ": sizes differ"));
  }
  const std::vector<int64_t> in_m2m = MinorToMajorOrDefault(in);
  const std::vector<int64_t> out_m2m = MinorToMajorOrDefault(out);
  if (!IsPermutation(in_m2m, in.rank()) || !IsPermutation(out_m2m, out.rank())) {
    return Invalid(instr, absl::StrCat("invalid layout in ", in.ToString(),
                                       " -> ", out.ToString()));
  }
  if (LayoutIsRowMajor(in) && LayoutIsRowMajor(out)) {
    return operand.WithShape(out);  // Same bytes in the same order.
  }
  const int64_t width = hlo::ByteWidth(in.type());
  // Logical (row-major) → physical: physical dim j (major to minor) is
  // logical dim m2m[rank - 1 - j].
  std::vector<int64_t> in_perm(in_m2m.rbegin(), in_m2m.rend());
  Literal result(out);
  if (out.ElementCount() == 0) return result;
  // Scratch as large as the operand: charged like a Literal.
  const MemoryCharge scratch_charge(in.ByteSize());
  std::vector<std::byte> physical(static_cast<size_t>(in.ByteSize()));
  TransposeInto(width, in.dims(), in_perm, operand.untyped_data(),
                physical.data());
  // Physical → logical for the result: the buffer is the result's physical
  // array (dims out.dims()[out_perm]); undo that permutation.
  std::vector<int64_t> out_perm(out_m2m.rbegin(), out_m2m.rend());
  std::vector<int64_t> physical_dims(out_perm.size());
  std::vector<int64_t> inverse(out_perm.size());
  for (size_t i = 0; i < out_perm.size(); ++i) {
    physical_dims[i] = out.dims()[out_perm[i]];
    inverse[out_perm[i]] = static_cast<int64_t>(i);
  }
  TransposeInto(width, physical_dims, inverse, physical.data(),
                result.mutable_untyped_data());
  return result;
}

absl::StatusOr<Literal> EvalBroadcast(const Instruction& instr,
                                      const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  const std::vector<int64_t>& out_dims = instr.shape.dims();
  const std::vector<int64_t>& map = instr.dimensions;
  if (map.size() != in_dims.size()) {
    return Invalid(instr, absl::StrCat("dimensions={", absl::StrJoin(map, ","),
                                       "} must name one output dim per "
                                       "operand dim (operand ",
                                       DimsText(in_dims), ")"));
  }
  if (map.empty()) {  // A scalar: fill.
    Literal result(instr.shape);
    if (instr.shape.ElementCount() > 0) FillWith(result, operand.untyped_data());
    return result;
  }
  const int64_t out_rank = instr.shape.rank();
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  absl::InlinedVector<int64_t, 8> src_strides(out_rank, 0);
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0 || map[i] >= out_rank || out_dims[map[i]] != in_dims[i] ||
        src_strides[map[i]] != 0) {
      return Invalid(instr, absl::StrCat("dimensions={", absl::StrJoin(map, ","),
                                         "} does not map operand ",
                                         DimsText(in_dims), " into ",
                                         DimsText(out_dims)));
    }
    // A unit dim gets a non-zero stride too, so that a repeated mapping
    // is caught above; its stride never matters.
    src_strides[map[i]] = in_dims[i] == 1 ? 1 : in_strides[i];
  }
  if (operand.shape().ElementCount() == instr.shape.ElementCount() &&
      std::is_sorted(map.begin(), map.end())) {
    return operand.WithShape(instr.shape);  // Only unit dims added.
  }
  Literal result(instr.shape);
  absl::InlinedVector<int64_t, 8> out_strides(out_rank);
  int64_t stride = 1;
  for (int64_t i = out_rank - 1; i >= 0; --i) {
    out_strides[i] = stride;
    stride *= out_dims[i];
  }
  CopyStrided(hlo::ByteWidth(instr.shape.type()), out_dims,
              operand.untyped_data(), src_strides, result.mutable_untyped_data(),
              out_strides);
  return result;
}

absl::StatusOr<Literal> EvalReshape(const Instruction& instr,
                                    const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  if (operand.shape().ElementCount() != instr.shape.ElementCount()) {
    return Invalid(instr, absl::StrCat("cannot reshape ",
                                       operand.shape().ToString(false), " to ",
                                       instr.shape.ToString(false)));
  }
  return operand.WithShape(instr.shape);
}

absl::StatusOr<Literal> EvalTranspose(const Instruction& instr,
                                      const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& perm = instr.dimensions;
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  bool dims_ok = IsPermutation(perm, operand.shape().rank()) &&
                 instr.shape.rank() == operand.shape().rank();
  for (size_t i = 0; dims_ok && i < perm.size(); ++i) {
    dims_ok = instr.shape.dim(i) == in_dims[perm[i]];
  }
  if (!dims_ok) {
    return Invalid(instr, absl::StrCat("dimensions={", absl::StrJoin(perm, ","),
                                       "} does not permute ", DimsText(in_dims),
                                       " into ",
                                       DimsText(instr.shape.dims())));
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == int64_t(i);
  if (identity) return operand.WithShape(instr.shape);
  Literal result(instr.shape);
  TransposeInto(hlo::ByteWidth(instr.shape.type()), in_dims, perm,
                operand.untyped_data(), result.mutable_untyped_data());
  return result;
}

absl::StatusOr<Literal> EvalSlice(const Instruction& instr,
                                  const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  const int64_t rank = operand.shape().rank();
  if (static_cast<int64_t>(instr.slice.size()) != rank ||
      instr.shape.rank() != rank) {
    return Invalid(instr, absl::StrCat("needs one [start:limit:stride] per dim "
                                       "of ", DimsText(in_dims)));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  std::vector<int64_t> src_strides(rank);
  int64_t offset = 0;
  for (int64_t i = 0; i < rank; ++i) {
    const hlo::SliceDimension& s = instr.slice[i];
    if (s.start < 0 || s.start > s.limit || s.limit > in_dims[i] ||
        s.stride < 1 ||
        instr.shape.dim(i) != (s.limit - s.start + s.stride - 1) / s.stride) {
      return Invalid(instr, absl::StrCat("slice [", s.start, ":", s.limit, ":",
                                         s.stride, "] of dim ", i, " (size ",
                                         in_dims[i], ") does not give ",
                                         instr.shape.dim(i), " elements"));
    }
    offset += s.start * in_strides[i];
    src_strides[i] = s.stride * in_strides[i];
  }
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  Literal result(instr.shape);
  if (instr.shape.ElementCount() == 0) return result;
  CopyStrided(width, instr.shape.dims(), Bytes(operand) + offset * width,
              src_strides, result.mutable_untyped_data(),
              RowMajorStrides(instr.shape.dims()));
  return result;
}

absl::StatusOr<Literal> EvalConcatenate(
    const Instruction& instr, std::span<const Literal* const> operands) {
  if (operands.empty()) return Invalid(instr, "needs at least one operand");
  if (instr.dimensions.size() != 1) {
    return Invalid(instr, "needs exactly one concatenation dimension");
  }
  const int64_t dim = instr.dimensions[0];
  const int64_t rank = instr.shape.rank();
  if (dim < 0 || dim >= rank) {
    return Invalid(instr, absl::StrCat("dimension ", dim, " is out of range"));
  }
  int64_t total = 0;
  for (const Literal* operand : operands) {
    CW_RETURN_IF_ERROR(CheckSameType(instr, *operand));
    const Shape& shape = operand->shape();
    bool ok = shape.rank() == rank;
    for (int64_t i = 0; ok && i < rank; ++i) {
      ok = i == dim || shape.dim(i) == instr.shape.dim(i);
    }
    if (!ok) {
      return Invalid(instr, absl::StrCat("operand ", shape.ToString(false),
                                         " does not fit ",
                                         instr.shape.ToString(false),
                                         " along dimension ", dim));
    }
    total += shape.dim(dim);
  }
  if (total != instr.shape.dim(dim)) {
    return Invalid(instr, absl::StrCat("operands add up to ", total,
                                       " along dimension ", dim, ", not ",
                                       instr.shape.dim(dim)));
  }
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  const std::vector<int64_t> out_strides = RowMajorStrides(instr.shape.dims());
  Literal result(instr.shape);
  if (instr.shape.ElementCount() == 0) return result;
  std::byte* out = MutableBytes(result);
  int64_t position = 0;
  for (const Literal* operand : operands) {
    const std::vector<int64_t>& dims = operand->shape().dims();
    CopyStrided(width, dims, operand->untyped_data(), RowMajorStrides(dims),
                out + position * out_strides[dim] * width, out_strides);
    position += dims[dim];
  }
  return result;
}

absl::StatusOr<Literal> EvalPad(const Instruction& instr,
                                const Literal& operand,
                                const Literal& padding_value) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  const int64_t rank = operand.shape().rank();
  if (padding_value.shape().type() != instr.shape.type() ||
      padding_value.shape().rank() != 0) {
    return Invalid(instr, absl::StrCat("padding value must be a scalar of the "
                                       "operand's type; got ",
                                       padding_value.shape().ToString(false)));
  }
  if (static_cast<int64_t>(instr.padding.size()) != rank ||
      instr.shape.rank() != rank) {
    return Invalid(instr, absl::StrCat("needs one lo_hi_interior per dim of ",
                                       DimsText(in_dims)));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  const std::vector<int64_t> out_strides = RowMajorStrides(instr.shape.dims());
  std::vector<int64_t> counts(rank), src_strides(rank), dst_strides(rank);
  int64_t src_offset = 0, dst_offset = 0;
  bool empty = false;
  for (int64_t i = 0; i < rank; ++i) {
    const hlo::PaddingDimension& p = instr.padding[i];
    const int64_t n = in_dims[i];
    const int64_t expected =
        n == 0 ? p.low + p.high : p.low + p.high + n + (n - 1) * p.interior;
    if (p.interior < 0 || instr.shape.dim(i) != expected ||
        instr.shape.dim(i) < 0) {
      return Invalid(instr, absl::StrCat("padding ", p.low, "_", p.high, "_",
                                         p.interior, " of dim ", i, " (size ",
                                         n, ") does not give ",
                                         instr.shape.dim(i)));
    }
    // Operand elements land at low + k * (interior + 1); keep those inside
    // [0, out_dim) (negative padding crops).
    const int64_t step = p.interior + 1;
    const int64_t first = p.low >= 0 ? 0 : (-p.low + step - 1) / step;
    const int64_t out_dim = instr.shape.dim(i);
    int64_t last = n - 1;
    if (out_dim - 1 - p.low < 0) {
      last = -1;
    } else {
      last = std::min(last, (out_dim - 1 - p.low) / step);
    }
    counts[i] = std::max<int64_t>(0, last - first + 1);
    if (counts[i] == 0) empty = true;
    src_offset += first * in_strides[i];
    dst_offset += (p.low + first * step) * out_strides[i];
    src_strides[i] = in_strides[i];
    dst_strides[i] = out_strides[i] * step;
  }
  Literal result(instr.shape);
  if (instr.shape.ElementCount() == 0) return result;
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  FillWith(result, padding_value.untyped_data());
  if (!empty) {
    CopyStrided(width, counts, Bytes(operand) + src_offset * width,
                src_strides, MutableBytes(result) + dst_offset * width,
                dst_strides);
  }
  return result;
}

absl::StatusOr<Literal> EvalIota(const Instruction& instr) {
  if (!instr.shape.IsArray()) {
    return Invalid(instr, "needs an array shape");
  }
  const int64_t dim = instr.iota_dimension;
  if (dim < 0 || dim >= instr.shape.rank()) {
    return Invalid(instr, absl::StrCat("iota_dimension=", dim,
                                       " is out of range for ",
                                       instr.shape.ToString(false)));
  }
  const std::vector<int64_t>& dims = instr.shape.dims();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= dims[i];
  for (int64_t i = dim + 1; i < instr.shape.rank(); ++i) inner *= dims[i];
  const int64_t extent = dims[dim];
  Literal result(instr.shape);
  hlo::VisitType(instr.shape.type(), [&](auto tag) {
    using T = decltype(tag);
    T* out = MutableDataPtr<T>(result);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < extent; ++k) {
        const T value = ConvertElement<T, int64_t>(k);
        std::fill_n(out + (o * extent + k) * inner, inner, value);
      }
    }
  });
  return result;
}

absl::StatusOr<Literal> EvalReverse(const Instruction& instr,
                                    const Literal& operand) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& dims = operand.shape().dims();
  if (dims != instr.shape.dims()) {
    return Invalid(instr, "result dims must equal the operand's");
  }
  std::vector<int64_t> src_strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (int64_t d : instr.dimensions) {
    if (d < 0 || d >= operand.shape().rank()) {
      return Invalid(instr, absl::StrCat("dimension ", d, " is out of range"));
    }
    if (src_strides[d] > 0) {
      offset += (dims[d] - 1) * src_strides[d];
      src_strides[d] = -src_strides[d];
    }
  }
  Literal result(instr.shape);
  if (instr.shape.ElementCount() == 0) return result;
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  CopyStrided(width, dims, Bytes(operand) + offset * width, src_strides,
              result.mutable_untyped_data(), RowMajorStrides(dims));
  return result;
}

absl::StatusOr<Literal> EvalDynamicSlice(
    const Instruction& instr, const Literal& operand,
    std::span<const Literal* const> start_indices) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  const std::vector<int64_t>& in_dims = operand.shape().dims();
  const std::vector<int64_t>& sizes = instr.shape.dims();
  if (instr.shape.rank() != operand.shape().rank() ||
      (!instr.dynamic_slice_sizes.empty() &&
       instr.dynamic_slice_sizes != sizes)) {
    return Invalid(instr, absl::StrCat("slice sizes ", DimsText(sizes),
                                       " do not fit operand ",
                                       DimsText(in_dims)));
  }
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                      ClampedStarts(instr, in_dims, sizes, start_indices));
  const std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  Literal result(instr.shape);
  if (instr.shape.ElementCount() == 0) return result;
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  CopyStrided(width, sizes,
              Bytes(operand) + LinearIndex(starts, in_strides) * width,
              in_strides, result.mutable_untyped_data(),
              RowMajorStrides(sizes));
  return result;
}

absl::Status DynamicUpdateSliceInPlace(
    const Instruction& instr, Literal& operand, const Literal& update,
    std::span<const Literal* const> start_indices) {
  CW_RETURN_IF_ERROR(CheckSameType(instr, operand));
  CW_RETURN_IF_ERROR(CheckSameType(instr, update));
  const std::vector<int64_t> dims = operand.shape().dims();
  const std::vector<int64_t>& sizes = update.shape().dims();
  if (dims != instr.shape.dims() || update.shape().rank() != instr.shape.rank()) {
    return Invalid(instr, absl::StrCat("update ", DimsText(sizes),
                                       " does not fit operand ",
                                       DimsText(dims)));
  }
  CW_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                      ClampedStarts(instr, dims, sizes, start_indices));
  if (!(operand.shape() == instr.shape)) operand = operand.WithShape(instr.shape);
  if (update.shape().ElementCount() == 0) return absl::OkStatus();
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  const int64_t width = hlo::ByteWidth(instr.shape.type());
  std::byte* out = MutableBytes(operand);  // Copies only shared storage.
  CopyStrided(width, sizes, update.untyped_data(), RowMajorStrides(sizes),
              out + LinearIndex(starts, strides) * width, strides);
  return absl::OkStatus();
}

absl::StatusOr<Literal> EvalDynamicUpdateSlice(
    const Instruction& instr, const Literal& operand, const Literal& update,
    std::span<const Literal* const> start_indices) {
  Literal result = operand;
  CW_RETURN_IF_ERROR(
      DynamicUpdateSliceInPlace(instr, result, update, start_indices));
  return result;
}

}  // namespace causeway::exec
