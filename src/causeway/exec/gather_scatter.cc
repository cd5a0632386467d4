// gather and scatter with XLA's full dimension-number semantics (offset /
// window dims, collapsed / inserted dims, start_index_map, index_vector_dim
// including the implicit trailing 1, batching dims).
//
// Out-of-range starts: gather clamps each start so that the slice fits;
// scatter skips a whole update window whose start does not fit (what XLA's
// CPU backend does).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/scalar_computation.h"

namespace causeway::exec {
namespace {

using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

bool Contains(std::span<const int64_t> list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Checks that `dims` are distinct, sorted if `sorted`, and in [0, rank).
bool ValidDims(std::span<const int64_t> dims, int64_t rank, bool sorted) {
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank || seen[dims[i]]) return false;
    if (sorted && i > 0 && dims[i] <= dims[i - 1]) return false;
    seen[dims[i]] = true;
  }
  return true;
}

// The start indices viewed as a batch of index vectors.
struct IndexBatch {
  const void* data = nullptr;
  PrimitiveType type = PrimitiveType::kS32;
  std::vector<int64_t> batch_dims;  // Indices dims other than the vector dim.
  std::vector<int64_t> batch_extents;  // Their sizes.
  std::vector<int64_t> batch_strides;  // Their strides in the indices array.
  int64_t vector_size = 1;
  int64_t vector_stride = 0;

  // Index element `i` (u64 values above INT64_MAX saturate).
  int64_t Read(int64_t i) const {
    switch (type) {
      case PrimitiveType::kS8:
        return static_cast<const int8_t*>(data)[i];
      case PrimitiveType::kS16:
        return static_cast<const int16_t*>(data)[i];
      case PrimitiveType::kS32:
        return static_cast<const int32_t*>(data)[i];
      case PrimitiveType::kS64:
        return static_cast<const int64_t*>(data)[i];
      case PrimitiveType::kU8:
        return static_cast<const uint8_t*>(data)[i];
      case PrimitiveType::kU16:
        return static_cast<const uint16_t*>(data)[i];
      case PrimitiveType::kU32:
        return static_cast<const uint32_t*>(data)[i];
      default: {
        const uint64_t v = static_cast<const uint64_t*>(data)[i];
        return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                    : static_cast<int64_t>(v);
      }
    }
  }

  // Position (among batch_dims) of indices dim `d`, or -1.
  int64_t BatchPosition(int64_t d) const {
    for (size_t i = 0; i < batch_dims.size(); ++i) {
      if (batch_dims[i] == d) return static_cast<int64_t>(i);
    }
    return -1;
  }
};

absl::StatusOr<IndexBatch> MakeIndexBatch(const Instruction& instr,
                                          const Literal& indices,
                                          int64_t index_vector_dim) {
  const Shape& shape = indices.shape();
  if (!shape.IsArray() || !hlo::IsInteger(shape.type())) {
    return Invalid(instr, absl::StrCat("indices must be an integer array, got ",
                                       shape.ToString()));
  }
  const int64_t rank = shape.rank();
  if (index_vector_dim < 0 || index_vector_dim > rank) {
    return Invalid(
        instr, absl::StrCat("index_vector_dim ", index_vector_dim,
                            " is out of range for indices ", shape.ToString()));
  }
  IndexBatch batch;
  batch.data = indices.untyped_data();
  batch.type = shape.type();
  std::vector<int64_t> strides = RowMajorStrides(shape.dims());
  for (int64_t d = 0; d < rank; ++d) {
    if (d == index_vector_dim) {
      batch.vector_size = shape.dim(d);
      batch.vector_stride = strides[d];
    } else {
      batch.batch_dims.push_back(d);
      batch.batch_extents.push_back(shape.dim(d));
      batch.batch_strides.push_back(strides[d]);
    }
  }
  return batch;
}

// Operand start positions for one batch element: index vector entries land
// on `index_map` dims, batching dims take the batch coordinate.
struct StartMapping {
  std::vector<int64_t> index_map;           // Vector entry k -> operand dim.
  std::vector<int64_t> operand_batch_dims;  // Operand dims ...
  std::vector<int64_t> batch_positions;     // ... and their batch positions.
};

// Walks the batch of index vectors in row-major order and gives, for each,
// the operand offset of its window start and the matching offset in a
// second array (the gather result / the scatter updates). Gather clamps
// each start so the window fits; scatter drops windows that do not fit.
class StartWalker {
 public:
  StartWalker(const IndexBatch& batch, const StartMapping& mapping,
              std::span<const int64_t> operand_dims,
              std::span<const int64_t> window,
              std::vector<int64_t> other_strides, bool clamp)
      : batch_(batch), other_strides_(std::move(other_strides)), clamp_(clamp) {
    const std::vector<int64_t> strides = RowMajorStrides(operand_dims);
    for (int64_t d : mapping.index_map) {
      index_strides_.push_back(strides[d]);
      index_limits_.push_back(operand_dims[d] - window[d]);
    }
    for (size_t i = 0; i < mapping.operand_batch_dims.size(); ++i) {
      const int64_t d = mapping.operand_batch_dims[i];
      batching_positions_.push_back(mapping.batch_positions[i]);
      batching_strides_.push_back(strides[d]);
      batching_limits_.push_back(operand_dims[d] - window[d]);
    }
  }

  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const std::vector<int64_t>& extents = batch_.batch_extents;
    const int64_t nb = static_cast<int64_t>(extents.size());
    int64_t count = 1;
    for (int64_t e : extents) count *= e;
    std::vector<int64_t> index(nb, 0);
    int64_t index_offset = 0, other_offset = 0;
    for (int64_t e = 0; e < count; ++e) {
      int64_t offset = 0;
      bool fits = true;
      for (size_t k = 0; k < index_strides_.size(); ++k) {
        int64_t v = batch_.Read(index_offset +
                                static_cast<int64_t>(k) * batch_.vector_stride);
        if (v < 0 || v > index_limits_[k]) {
          if (!clamp_) {
            fits = false;
            break;
          }
          v = std::clamp<int64_t>(v, 0, index_limits_[k]);
        }
        offset += v * index_strides_[k];
      }
      for (size_t i = 0; fits && i < batching_strides_.size(); ++i) {
        int64_t v = index[batching_positions_[i]];
        if (v > batching_limits_[i]) {
          if (!clamp_) {
            fits = false;
            break;
          }
          v = batching_limits_[i];
        }
        offset += v * batching_strides_[i];
      }
      if (fits) fn(offset, other_offset);
      for (int64_t j = nb - 1; j >= 0; --j) {
        if (++index[j] < extents[j]) {
          index_offset += batch_.batch_strides[j];
          other_offset += other_strides_[j];
          break;
        }
        index_offset -= (extents[j] - 1) * batch_.batch_strides[j];
        other_offset -= (extents[j] - 1) * other_strides_[j];
        index[j] = 0;
      }
    }
  }

 private:
  const IndexBatch& batch_;
  std::vector<int64_t> other_strides_;
  bool clamp_;
  std::vector<int64_t> index_strides_, index_limits_;
  std::vector<int64_t> batching_positions_, batching_strides_, batching_limits_;
};

absl::Status MakeStartMapping(const Instruction& instr, const IndexBatch& batch,
                              int64_t operand_rank,
                              const std::vector<int64_t>& index_map,
                              const std::vector<int64_t>& operand_batching,
                              const std::vector<int64_t>& indices_batching,
                              StartMapping& mapping) {
  if (static_cast<int64_t>(index_map.size()) != batch.vector_size ||
      !ValidDims(index_map, operand_rank, false)) {
    return Invalid(instr, absl::StrCat("index map ", DimsText(index_map),
                                       " does not fit index vectors of size ",
                                       batch.vector_size, " into a rank-",
                                       operand_rank, " operand"));
  }
  if (operand_batching.size() != indices_batching.size() ||
      !ValidDims(operand_batching, operand_rank, false)) {
    return Invalid(instr, "batching dims do not pair up");
  }
  mapping.index_map = index_map;
  mapping.operand_batch_dims = operand_batching;
  for (size_t i = 0; i < indices_batching.size(); ++i) {
    int64_t position = batch.BatchPosition(indices_batching[i]);
    if (position < 0 || Contains(index_map, operand_batching[i])) {
      return Invalid(instr,
                     absl::StrCat("indices batching dim ", indices_batching[i],
                                  " is not a batch dim of the indices"));
    }
    mapping.batch_positions.push_back(position);
  }
  return absl::OkStatus();
}

// Calls fn(a_offset, b_offset) for every index of `extents`, with offsets
// advancing by `a_strides` / `b_strides`.
template <typename Fn>
void ForEachWindow(std::span<const int64_t> extents,
                   std::span<const int64_t> a_strides,
                   std::span<const int64_t> b_strides, int64_t a_base,
                   int64_t b_base, Fn&& fn) {
  for (int64_t e : extents) {
    if (e == 0) return;
  }
  const int64_t rank = static_cast<int64_t>(extents.size());
  if (rank == 0) {
    fn(a_base, b_base);
    return;
  }
  const int64_t inner = extents[rank - 1];
  const int64_t sa = a_strides[rank - 1], sb = b_strides[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  std::span<const int64_t> outer(extents.data(), rank - 1);
  do {
    int64_t a = a_base, b = b_base;
    for (int64_t i = 0; i + 1 < rank; ++i) {
      a += index[i] * a_strides[i];
      b += index[i] * b_strides[i];
    }
    for (int64_t j = 0; j < inner; ++j) fn(a + j * sa, b + j * sb);
  } while (NextIndex(std::span<int64_t>(index), outer));
}

// True when `dims` with `strides` cover one contiguous row-major block.
bool IsContiguousBlock(std::span<const int64_t> dims,
                       std::span<const int64_t> strides) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i) {
    if (dims[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

// How a scatter combines values, when it has a typed loop.
enum class Combiner { kNone, kOverwrite, kKeep, kBinary };

Combiner MatchCombiner(const hlo::Computation& c, std::optional<Opcode>& op) {
  op = MatchBinaryReducer(c);
  if (op.has_value()) return Combiner::kBinary;
  const hlo::Instruction* root = c.root();
  if (c.parameter_count() == 2 && root != nullptr &&
      c.parameter(0) != nullptr && c.parameter(1) != nullptr &&
      root->opcode == Opcode::kParameter && root->shape.IsArray() &&
      root->shape.rank() == 0 &&
      c.parameter(0)->shape.type() == c.parameter(1)->shape.type()) {
    return root->parameter_number == 1 ? Combiner::kOverwrite : Combiner::kKeep;
  }
  return Combiner::kNone;
}

template <typename E, Opcode kOp>
void CombineTyped(E* out, const E* updates, std::span<const int64_t> extents,
                  std::span<const int64_t> out_strides,
                  std::span<const int64_t> update_strides, int64_t out_base,
                  int64_t update_base) {
  ForEachWindow(extents, out_strides, update_strides, out_base, update_base,
                [&](int64_t o, int64_t u) {
                  out[o] = ApplyBinaryElement<kOp>(out[o], updates[u]);
                });
}

}  // namespace

absl::StatusOr<Literal> EvalGather(const Instruction& instr,
                                   const Literal& operand,
                                   const Literal& start_indices) {
  const hlo::GatherDimensionNumbers& dn = instr.gather_dimension_numbers;
  const Shape& os = operand.shape();
  if (!os.IsArray() || !instr.shape.IsArray() ||
      instr.shape.type() != os.type()) {
    return Invalid(instr, absl::StrCat("operand ", os.ToString(),
                                       " does not match the result ",
                                       instr.shape.ToString()));
  }
  const int64_t rank = os.rank();
  const std::vector<int64_t>& slice_sizes = instr.gather_slice_sizes;
  if (static_cast<int64_t>(slice_sizes.size()) != rank) {
    return Invalid(instr,
                   absl::StrCat("slice_sizes ", DimsText(slice_sizes),
                                " do not match operand ", os.ToString()));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > os.dim(d)) {
      return Invalid(instr, absl::StrCat("slice size ", slice_sizes[d],
                                         " does not fit operand dim ", d,
                                         " of size ", os.dim(d)));
    }
  }
  CW_ASSIGN_OR_RETURN(IndexBatch batch, MakeIndexBatch(instr, start_indices,
                                                       dn.index_vector_dim));
  StartMapping mapping;
  CW_RETURN_IF_ERROR(MakeStartMapping(instr, batch, rank, dn.start_index_map,
                                      dn.operand_batching_dims,
                                      dn.start_indices_batching_dims, mapping));
  if (!ValidDims(dn.collapsed_slice_dims, rank, false)) {
    return Invalid(instr, "collapsed_slice_dims are not dims of the operand");
  }
  // Operand dims that appear in the output.
  std::vector<int64_t> window_dims;
  for (int64_t d = 0; d < rank; ++d) {
    const bool dropped = Contains(dn.collapsed_slice_dims, d) ||
                         Contains(dn.operand_batching_dims, d);
    if (dropped && slice_sizes[d] != 1) {
      return Invalid(instr, absl::StrCat("collapsed or batching dim ", d,
                                         " must have slice size 1"));
    }
    if (!dropped) window_dims.push_back(d);
  }
  const int64_t out_rank = instr.shape.rank();
  if (window_dims.size() != dn.offset_dims.size() ||
      !ValidDims(dn.offset_dims, out_rank, true)) {
    return Invalid(instr,
                   absl::StrCat("offset_dims ", DimsText(dn.offset_dims),
                                " do not match the ", window_dims.size(),
                                " slice dims kept in the output"));
  }
  std::vector<int64_t> out_batch_dims;
  for (int64_t d = 0; d < out_rank; ++d) {
    if (!Contains(dn.offset_dims, d)) out_batch_dims.push_back(d);
  }
  if (out_batch_dims.size() != batch.batch_dims.size()) {
    return Invalid(instr, absl::StrCat("result ", instr.shape.ToString(),
                                       " has ", out_batch_dims.size(),
                                       " batch dims but the indices have ",
                                       batch.batch_dims.size()));
  }
  for (size_t i = 0; i < out_batch_dims.size(); ++i) {
    if (instr.shape.dim(out_batch_dims[i]) != batch.batch_extents[i]) {
      return Invalid(instr, "result batch dims do not match the indices");
    }
  }
  for (size_t k = 0; k < window_dims.size(); ++k) {
    if (instr.shape.dim(dn.offset_dims[k]) != slice_sizes[window_dims[k]]) {
      return Invalid(instr, "result offset dims do not match slice_sizes");
    }
  }

  Literal result{Shape(instr.shape.type(), instr.shape.dims())};
  if (instr.shape.ElementCount() == 0) return result;
  const int64_t width = hlo::ByteWidth(os.type());
  const std::vector<int64_t> in_strides = RowMajorStrides(os.dims());
  const std::vector<int64_t> out_strides = RowMajorStrides(instr.shape.dims());
  std::vector<int64_t> copy_dims, src_strides, dst_strides;
  for (size_t k = 0; k < window_dims.size(); ++k) {
    copy_dims.push_back(slice_sizes[window_dims[k]]);
    src_strides.push_back(in_strides[window_dims[k]]);
    dst_strides.push_back(out_strides[dn.offset_dims[k]]);
  }
  const char* src = static_cast<const char*>(operand.untyped_data());
  char* dst = static_cast<char*>(result.mutable_untyped_data());
  // Most gathers copy one element or one contiguous run per index.
  int64_t slice_elements = 1;
  for (int64_t size : copy_dims) slice_elements *= size;
  const bool contiguous = IsContiguousBlock(copy_dims, src_strides) &&
                          IsContiguousBlock(copy_dims, dst_strides);
  std::vector<int64_t> dst_batch_strides;
  for (int64_t d : out_batch_dims) dst_batch_strides.push_back(out_strides[d]);
  StartWalker walker(batch, mapping, os.dims(), slice_sizes,
                     std::move(dst_batch_strides), /*clamp=*/true);
  walker.ForEach([&](int64_t src_offset, int64_t dst_offset) {
    if (slice_elements == 1) {
      StoreBits(dst, width, dst_offset, LoadBits(src, width, src_offset));
    } else if (contiguous) {
      std::memcpy(dst + dst_offset * width, src + src_offset * width,
                  slice_elements * width);
    } else {
      CopyStrided(width, copy_dims, src + src_offset * width, src_strides,
                  dst + dst_offset * width, dst_strides);
    }
  });
  return result;
}

absl::StatusOr<Literal> EvalScatter(const Instruction& instr,
                                    std::span<const Literal* const> operands,
                                    const ComputationRunner& run) {
  const hlo::ScatterDimensionNumbers& dn = instr.scatter_dimension_numbers;
  if (operands.size() < 3 || operands.size() % 2 != 1) {
    return Invalid(instr, absl::StrCat("needs N inputs, indices and N updates, "
                                       "got ",
                                       operands.size(), " operands"));
  }
  const size_t n = operands.size() / 2;
  const hlo::Computation* combiner_computation = instr.to_apply();
  if (combiner_computation == nullptr) {
    return Invalid(instr, "has no to_apply computation");
  }
  const Literal& indices = *operands[n];
  const Shape& os = operands[0]->shape();
  const Shape& us = operands[n + 1]->shape();
  std::vector<Shape> result_shapes = instr.shape.IsTuple()
                                         ? instr.shape.tuple_shapes()
                                         : std::vector<Shape>{instr.shape};
  if (result_shapes.size() != n || (n > 1) != instr.shape.IsTuple()) {
    return Invalid(instr, absl::StrCat("result ", instr.shape.ToString(),
                                       " does not have ", n, " arrays"));
  }
  std::vector<PrimitiveType> types;
  for (size_t i = 0; i < n; ++i) {
    const Shape& input = operands[i]->shape();
    const Shape& update = operands[n + 1 + i]->shape();
    if (!input.IsArray() || !update.IsArray() || input.dims() != os.dims() ||
        update.dims() != us.dims() || update.type() != input.type() ||
        !result_shapes[i].IsArray() ||
        result_shapes[i].type() != input.type() ||
        result_shapes[i].dims() != input.dims()) {
      return Invalid(instr, absl::StrCat("input ", i, " ", input.ToString(),
                                         " and update ", update.ToString(),
                                         " do not match the result ",
                                         instr.shape.ToString()));
    }
    types.push_back(input.type());
  }
  const int64_t rank = os.rank();
  CW_ASSIGN_OR_RETURN(IndexBatch batch,
                      MakeIndexBatch(instr, indices, dn.index_vector_dim));
  StartMapping mapping;
  CW_RETURN_IF_ERROR(MakeStartMapping(
      instr, batch, rank, dn.scatter_dims_to_operand_dims,
      dn.input_batching_dims, dn.scatter_indices_batching_dims, mapping));
  if (!ValidDims(dn.inserted_window_dims, rank, false) ||
      !ValidDims(dn.update_window_dims, us.rank(), true)) {
    return Invalid(instr,
                   "inserted_window_dims or update_window_dims are "
                   "not dims of the operand / updates");
  }
  std::vector<int64_t> operand_window_dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!Contains(dn.inserted_window_dims, d) &&
        !Contains(dn.input_batching_dims, d)) {
      operand_window_dims.push_back(d);
    }
  }
  if (operand_window_dims.size() != dn.update_window_dims.size()) {
    return Invalid(
        instr,
        absl::StrCat("update_window_dims ", DimsText(dn.update_window_dims),
                     " do not match the ", operand_window_dims.size(),
                     " window dims of the operand"));
  }
  std::vector<int64_t> update_scatter_dims;
  for (int64_t d = 0; d < us.rank(); ++d) {
    if (!Contains(dn.update_window_dims, d)) update_scatter_dims.push_back(d);
  }
  if (update_scatter_dims.size() != batch.batch_dims.size()) {
    return Invalid(instr, absl::StrCat("updates ", us.ToString(), " have ",
                                       update_scatter_dims.size(),
                                       " scatter dims but the indices have ",
                                       batch.batch_dims.size()));
  }
  for (size_t i = 0; i < update_scatter_dims.size(); ++i) {
    if (us.dim(update_scatter_dims[i]) != batch.batch_extents[i]) {
      return Invalid(instr, "update scatter dims do not match the indices");
    }
  }
  // Window extent per operand dim (1 for inserted and batching dims).
  std::vector<int64_t> window_size(rank, 1);
  std::vector<int64_t> extents;
  for (size_t k = 0; k < operand_window_dims.size(); ++k) {
    const int64_t size = us.dim(dn.update_window_dims[k]);
    if (size > os.dim(operand_window_dims[k])) {
      return Invalid(instr, absl::StrCat("update window dim of size ", size,
                                         " is larger than operand dim ",
                                         operand_window_dims[k]));
    }
    window_size[operand_window_dims[k]] = size;
    extents.push_back(size);
  }

  std::vector<Literal> results;
  for (size_t i = 0; i < n; ++i) results.push_back(*operands[i]);
  for (Literal& r : results) r.mutable_untyped_data();  // Own the storage.
  if (us.ElementCount() == 0 || os.ElementCount() == 0) {
    if (n == 1) return std::move(results[0]);
    return Literal::MakeTuple(std::move(results));
  }
  const std::vector<int64_t> in_strides = RowMajorStrides(os.dims());
  const std::vector<int64_t> up_strides = RowMajorStrides(us.dims());
  std::vector<int64_t> out_window_strides, up_window_strides;
  for (size_t k = 0; k < operand_window_dims.size(); ++k) {
    out_window_strides.push_back(in_strides[operand_window_dims[k]]);
    up_window_strides.push_back(up_strides[dn.update_window_dims[k]]);
  }

  std::optional<Opcode> binary;
  Combiner combiner =
      n == 1 ? MatchCombiner(*combiner_computation, binary) : Combiner::kNone;
  if (combiner != Combiner::kNone &&
      combiner_computation->root()->shape.type() != types[0]) {
    combiner = Combiner::kNone;
  }
  std::optional<ScalarFunction> f;
  if (combiner == Combiner::kNone) {
    f.emplace(*combiner_computation, run);
    std::vector<PrimitiveType> params(types);
    params.insert(params.end(), types.begin(), types.end());
    CW_RETURN_IF_ERROR(f->CheckSignature(params, types, "scatter"));
  }
  // Typed loop for the recognised combiners; false if none applies.
  auto combine_typed = [&](int64_t out_base, int64_t up_base) -> bool {
    return hlo::VisitType(types[0], [&](auto tag) -> bool {
      using E = decltype(tag);
      E* out = MutableDataPtr<E>(results[0]);
      const E* up = DataPtr<E>(*operands[n + 1]);
      if (combiner == Combiner::kOverwrite) {
        ForEachWindow(extents, out_window_strides, up_window_strides, out_base,
                      up_base, [&](int64_t o, int64_t u) { out[o] = up[u]; });
        return true;
      }
      if (combiner == Combiner::kKeep) return true;
      using C = ComputeType<E>;
      switch (*binary) {
#define CW_COMBINE_CASE(k)                                              \
  case Opcode::k:                                                       \
    if constexpr (kBinarySupported<Opcode::k, C>) {                     \
      CombineTyped<E, Opcode::k>(out, up, extents, out_window_strides,  \
                                 up_window_strides, out_base, up_base); \
      return true;                                                      \
    } else {                                                            \
      return false;                                                     \
    }
        CW_COMBINE_CASE(kAdd)
        CW_COMBINE_CASE(kMultiply)
        CW_COMBINE_CASE(kMaximum)
        CW_COMBINE_CASE(kMinimum)
        CW_COMBINE_CASE(kAnd)
        CW_COMBINE_CASE(kOr)
#undef CW_COMBINE_CASE
        default:
          return false;
      }
    });
  };

  std::vector<int64_t> widths(n);
  std::vector<void*> out(n);
  std::vector<const void*> up(n);
  for (size_t i = 0; i < n; ++i) {
    widths[i] = hlo::ByteWidth(types[i]);
    out[i] = results[i].mutable_untyped_data();
    up[i] = operands[n + 1 + i]->untyped_data();
  }
  std::vector<uint64_t> args(2 * n), combined(n);
  absl::Status status;
  std::vector<int64_t> up_batch_strides;
  for (int64_t d : update_scatter_dims)
    up_batch_strides.push_back(up_strides[d]);
  StartWalker walker(batch, mapping, os.dims(), window_size,
                     std::move(up_batch_strides), /*clamp=*/false);
  walker.ForEach([&](int64_t out_base, int64_t up_base) {
    if (!status.ok()) return;
    if (combiner != Combiner::kNone && combine_typed(out_base, up_base)) return;
    if (!f.has_value()) {
      f.emplace(*combiner_computation, run);
      combiner = Combiner::kNone;
    }
    ForEachWindow(extents, out_window_strides, up_window_strides, out_base,
                  up_base, [&](int64_t o, int64_t u) {
                    if (!status.ok()) return;
                    for (size_t i = 0; i < n; ++i) {
                      args[i] = LoadBits(out[i], widths[i], o);
                      args[n + i] = LoadBits(up[i], widths[i], u);
                    }
                    status = f->Call(args, combined);
                    for (size_t i = 0; i < n; ++i) {
                      StoreBits(out[i], widths[i], o, combined[i]);
                    }
                  });
  });
  CW_RETURN_IF_ERROR(status);
  if (n == 1) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

}  // namespace causeway::exec
