// reduce, reduce-window, select-and-scatter and sort.
//
// Each kernel has a typed loop for the common computations (a reducer that
// is `ROOT add/multiply/maximum/minimum/and/or(p0, p1)`; a comparator that
// orders by a per-element key) and otherwise calls its computation per
// element through ScalarFunction (compiled scalar program, or the
// evaluator's runner).
//
// Reduction order: every output element combines its inputs in row-major
// order of the reduced (or window) positions, starting from the init value,
// as XLA's reference evaluator does; except that a typed reduce over a long
// contiguous row keeps 32 independent partial results (as XLA:CPU's
// vectorized loops do), which only changes float rounding. f16/bf16
// reducers compute each step in float and round.
//
// A reducer that compiles to a scalar program but is not one binary op
// (argmax) runs ScalarComputation::kBatch outputs per step; anything the
// scalar interpreter lacks goes through the runner one element at a time.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/reduction.h"
#include "causeway/exec/scalar_computation.h"

namespace causeway::exec {
namespace {

using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// The shapes of a variadic result: the tuple elements, or the one array.
std::vector<Shape> ResultShapes(const Shape& shape) {
  if (shape.IsTuple()) return shape.tuple_shapes();
  return {shape};
}

Literal PackResults(std::vector<Literal> results, bool tuple) {
  if (!tuple) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

// Splits `operands` into N inputs and N scalar init values and checks them
// against the result shape(s) of `instr`.
struct VariadicOperands {
  std::vector<const Literal*> inputs, inits;
  std::vector<PrimitiveType> types;
};

absl::StatusOr<VariadicOperands> SplitVariadic(
    const Instruction& instr, std::span<const Literal* const> operands) {
  if (operands.empty() || operands.size() % 2 != 0) {
    return Invalid(instr, absl::StrCat("needs N inputs and N init values, got ",
                                       operands.size(), " operands"));
  }
  VariadicOperands v;
  const size_t n = operands.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    const Literal* input = operands[i];
    const Literal* init = operands[n + i];
    if (!input->shape().IsArray() || !init->shape().IsArray() ||
        init->shape().rank() != 0) {
      return Invalid(instr, absl::StrCat("operand ", i,
                                         " must be an array with a scalar "
                                         "init value"));
    }
    if (input->shape().dims() != operands[0]->shape().dims()) {
      return Invalid(instr, absl::StrCat("inputs differ in dims: ",
                                         input->shape().ToString(), " vs ",
                                         operands[0]->shape().ToString()));
    }
    if (init->shape().type() != input->shape().type()) {
      return Invalid(
          instr,
          absl::StrCat("init value ", init->shape().ToString(),
                       " does not match input ", input->shape().ToString()));
    }
    v.inputs.push_back(input);
    v.inits.push_back(init);
    v.types.push_back(input->shape().type());
  }
  std::vector<Shape> results = ResultShapes(instr.shape);
  if (results.size() != n || (n > 1) != instr.shape.IsTuple()) {
    return Invalid(instr, absl::StrCat("result ", instr.shape.ToString(),
                                       " does not have ", n, " arrays"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!results[i].IsArray() || results[i].type() != v.types[i]) {
      return Invalid(instr, absl::StrCat("result ", instr.shape.ToString(),
                                         " does not match the input types"));
    }
  }
  return v;
}

// Signature of a reducer over `types`: (acc..., x...) -> (acc...).
absl::Status CheckReducer(const ScalarFunction& f,
                          const std::vector<PrimitiveType>& types,
                          const char* what) {
  std::vector<PrimitiveType> params(types);
  params.insert(params.end(), types.begin(), types.end());
  return f.CheckSignature(params, types, what);
}

// ---------------------------------------------------------------------------
// reduce

// The input's dims merged into runs of reduced / kept dims.
struct ReduceLoops {
  std::vector<int64_t> extent, in_stride, out_stride;
  bool inner_reduced = false;
};

ReduceLoops MakeReduceLoops(const std::vector<int64_t>& dims,
                            const std::vector<bool>& reduced) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> in_strides = RowMajorStrides(dims);
  std::vector<int64_t> out_strides(rank, 0);
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (reduced[i]) continue;
    out_strides[i] = stride;
    stride *= dims[i];
  }
  ReduceLoops loops;
  std::vector<bool> kinds;
  for (int64_t i = 0; i < rank; ++i) {
    if (dims[i] == 1) continue;  // Size-1 dims add nothing.
    // Adjacent dims of one kind merge (row-major strides stay contiguous
    // across skipped size-1 dims).
    if (!loops.extent.empty() && kinds.back() == reduced[i]) {
      loops.extent.back() *= dims[i];
      loops.in_stride.back() = in_strides[i];
      loops.out_stride.back() = out_strides[i];
    } else {
      loops.extent.push_back(dims[i]);
      loops.in_stride.push_back(in_strides[i]);
      loops.out_stride.push_back(out_strides[i]);
      kinds.push_back(reduced[i]);
    }
  }
  if (loops.extent.empty()) {
    loops.extent = {1};
    loops.in_stride = {1};
    loops.out_stride = {0};
    kinds = {true};
  }
  loops.inner_reduced = kinds.back();
  return loops;
}

// Calls body(in_offset, out_offset, count) for every innermost run.
template <typename Body>
void ForEachRun(const ReduceLoops& loops, Body&& body) {
  const int64_t outer_rank = static_cast<int64_t>(loops.extent.size()) - 1;
  std::vector<int64_t> index(outer_rank, 0);
  std::span<const int64_t> outer(loops.extent.data(), outer_rank);
  for (int64_t e : outer) {
    if (e == 0) return;
  }
  if (loops.extent.back() == 0) return;
  do {
    int64_t in = 0, out = 0;
    for (int64_t i = 0; i < outer_rank; ++i) {
      in += index[i] * loops.in_stride[i];
      out += index[i] * loops.out_stride[i];
    }
    body(in, out, loops.extent.back());
  } while (NextIndex(std::span<int64_t>(index), outer));
}

// One innermost run of ReduceTyped: `n` inputs from in[i] (stride
// inner_in) into out[o] (a reduced run) or out[o + j * inner_out]. Not
// inlined, so that the kernel and the fused loop's pieces
// (ReduceRowElements, ReduceColumnElements) run the same machine code: a
// compiler may order a commutative op's operands differently in each
// copy, and x86 returns the first NaN operand, so NaN payloads would
// differ.
template <typename E, Opcode kOp>
[[gnu::noinline]] void ReduceRunTyped(bool inner_reduced, int64_t inner_in,
                           int64_t inner_out, const E* in, E* out, int64_t i,
                           int64_t o, int64_t n) {
  if constexpr (std::is_same_v<ComputeType<E>, E>) {
    // A long contiguous run: independent partial results per lane, so
    // the loop vectorizes (the order differs from a sequential sum only
    // by rounding; f16/bf16 and the minifloats keep their per-step
    // rounding below).
    constexpr int64_t kLanes = 32;
    if (inner_reduced && inner_in == 1 && n >= 2 * kLanes) {
      E lanes[kLanes];
      for (int64_t k = 0; k < kLanes; ++k) lanes[k] = in[i + k];
      int64_t j = kLanes;
      for (; j + kLanes <= n; j += kLanes) {
        for (int64_t k = 0; k < kLanes; ++k) {
          lanes[k] = ApplyBinary<kOp>(lanes[k], in[i + j + k]);
        }
      }
      for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
        for (int64_t k = 0; k < width; ++k) {
          lanes[k] = ApplyBinary<kOp>(lanes[k], lanes[k + width]);
        }
      }
      E acc = ApplyBinary<kOp>(out[o], lanes[0]);
      for (; j < n; ++j) acc = ApplyBinary<kOp>(acc, in[i + j]);
      out[o] = acc;
      return;
    }
  }
  if (inner_reduced) {
    E acc = out[o];
    for (int64_t j = 0; j < n; ++j) {
      acc = ApplyBinaryElement<kOp>(acc, in[i + j * inner_in]);
    }
    out[o] = acc;
  } else if (inner_in == 1 && inner_out == 1) {
    for (int64_t j = 0; j < n; ++j) {
      out[o + j] = ApplyBinaryElement<kOp>(out[o + j], in[i + j]);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      E& acc = out[o + j * inner_out];
      acc = ApplyBinaryElement<kOp>(acc, in[i + j * inner_in]);
    }
  }
}

template <typename E, Opcode kOp>
void ReduceTyped(const ReduceLoops& loops, const E* in, E* out) {
  const int64_t inner_in = loops.in_stride.back();
  const int64_t inner_out = loops.out_stride.back();
  ForEachRun(loops, [&](int64_t i, int64_t o, int64_t n) {
    ReduceRunTyped<E, kOp>(loops.inner_reduced, inner_in, inner_out, in, out,
                           i, o, n);
  });
}

// Runs `fn` with the typed loop for reducer opcode `op` on element type E;
// false when the combination has no typed loop.
template <typename E, typename Fn>
bool WithTypedReducer(Opcode op, Fn&& fn) {
  using C = ComputeType<E>;
  switch (op) {
#define CW_REDUCER_CASE(k)                             \
  case Opcode::k:                                      \
    if constexpr (kBinarySupported<Opcode::k, C>) {    \
      fn(std::integral_constant<Opcode, Opcode::k>{}); \
      return true;                                     \
    } else {                                           \
      return false;                                    \
    }
    CW_REDUCER_CASE(kAdd)
    CW_REDUCER_CASE(kMultiply)
    CW_REDUCER_CASE(kMaximum)
    CW_REDUCER_CASE(kMinimum)
    CW_REDUCER_CASE(kAnd)
    CW_REDUCER_CASE(kOr)
#undef CW_REDUCER_CASE
    default:
      return false;
  }
}

// Fills an array of `shape` with the scalar `init`.
Literal FilledWith(const Shape& shape, const Literal& init) {
  Literal out{Shape(shape.type(), shape.dims())};
  const int64_t width = hlo::ByteWidth(shape.type());
  const uint64_t bits = LoadBits(init.untyped_data(), width, 0);
  void* data = out.mutable_untyped_data();
  const int64_t n = shape.ElementCount();
  for (int64_t i = 0; i < n; ++i) StoreBits(data, width, i, bits);
  return out;
}

// column[i] = element (base[i] + add) of an array of `width`-byte elements.
void GatherColumn(const void* data, int64_t width, const int64_t* base,
                  int64_t add, int64_t count, uint64_t* column) {
  auto gather = [&](auto tag) {
    using U = decltype(tag);
    const U* typed = static_cast<const U*>(data) + add;
    for (int64_t i = 0; i < count; ++i) column[i] = typed[base[i]];
  };
  switch (width) {
    case 1:
      gather(uint8_t{});
      break;
    case 2:
      gather(uint16_t{});
      break;
    case 4:
      gather(uint32_t{});
      break;
    default:
      gather(uint64_t{});
      break;
  }
}

// reduce with a compiled reducer that is not a single binary op (argmax,
// variadic reducers): runs ScalarComputation::kBatch output elements
// through each reduction step at once. `out` holds the init values.
void ReduceBatched(const ScalarComputation& program,
                   const std::vector<int64_t>& dims,
                   const std::vector<bool>& reduced,
                   const std::vector<int64_t>& widths,
                   const std::vector<const void*>& in,
                   const std::vector<void*>& out) {
  constexpr int64_t kBatch = ScalarComputation::kBatch;
  const size_t n = in.size();
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < dims.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(dims[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  std::vector<int64_t> red_offsets;
  ForEachIndex(red_dims, [&](std::span<const int64_t> index) {
    red_offsets.push_back(LinearIndex(index, red_strides));
  });
  int64_t out_count = 1;
  for (int64_t d : kept_dims) out_count *= d;
  std::vector<uint64_t> frame = program.NewBatchFrame();
  std::vector<int64_t> base(kBatch);
  std::vector<int64_t> kept_index(kept_dims.size(), 0);
  for (int64_t o0 = 0; o0 < out_count; o0 += kBatch) {
    const int64_t count = std::min(kBatch, out_count - o0);
    for (int64_t i = 0; i < count; ++i) {
      base[i] = LinearIndex(kept_index, kept_strides);
      NextIndex(std::span<int64_t>(kept_index), kept_dims);
    }
    for (size_t k = 0; k < n; ++k) {
      uint64_t* acc = frame.data() + k * kBatch;
      for (int64_t i = 0; i < count; ++i) {
        acc[i] = LoadBits(out[k], widths[k], o0 + i);
      }
    }
    for (int64_t r : red_offsets) {
      for (size_t k = 0; k < n; ++k) {
        GatherColumn(in[k], widths[k], base.data(), r, count,
                     frame.data() + (n + k) * kBatch);
      }
      program.RunBatch(frame, count);
      for (size_t k = 0; k < n; ++k) {
        const uint64_t* result = program.ResultColumn(frame, k);
        std::copy(result, result + count, frame.data() + k * kBatch);
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const uint64_t* acc = frame.data() + k * kBatch;
      for (int64_t i = 0; i < count; ++i) {
        StoreBits(out[k], widths[k], o0 + i, acc[i]);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// reduce-window geometry

struct WindowGeometry {
  std::vector<int64_t> in_dims, out_dims, window_dims;
};

absl::StatusOr<WindowGeometry> ComputeWindowGeometry(
    const Instruction& instr, const std::vector<int64_t>& in_dims) {
  WindowGeometry g;
  g.in_dims = in_dims;
  if (instr.window.size() != in_dims.size()) {
    return Invalid(instr,
                   absl::StrCat("window has ", instr.window.size(),
                                " dims for a rank-", in_dims.size(), " input"));
  }
  for (size_t i = 0; i < in_dims.size(); ++i) {
    const hlo::WindowDimension& w = instr.window[i];
    if (w.size < 0 || w.stride < 1 || w.base_dilation < 1 ||
        w.window_dilation < 1) {
      return Invalid(instr, absl::StrCat("window dim ", i, " is malformed"));
    }
    const int64_t padded =
        (in_dims[i] == 0 ? 0 : (in_dims[i] - 1) * w.base_dilation + 1) +
        w.padding_low + w.padding_high;
    const int64_t dilated_window =
        w.size == 0 ? 0 : (w.size - 1) * w.window_dilation + 1;
    g.out_dims.push_back(padded >= dilated_window
                             ? (padded - dilated_window) / w.stride + 1
                             : 0);
    g.window_dims.push_back(w.size);
  }
  return g;
}

// Walks the outputs of a windowed op in row-major order and, for each, the
// input offsets its window covers, in row-major window order, skipping
// padding and base-dilation holes. Per-dim offset lists are rebuilt only
// for the dims whose output coordinate changed.
class WindowWalker {
 public:
  // `g` must have at least one output.
  WindowWalker(const Instruction& instr, const WindowGeometry& g)
      : instr_(instr),
        g_(g),
        in_strides_(RowMajorStrides(g.in_dims)),
        out_index_(g.out_dims.size(), 0) {
    Rebuild(0);
  }

  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (int64_t a : prefix_) {
      for (int64_t b : last_) fn(a + b);
    }
  }

  // Moves to the last output of the current innermost row (the next call
  // to Next starts the following row).
  void SkipToRowEnd() {
    if (!out_index_.empty()) out_index_.back() = g_.out_dims.back() - 1;
  }

  // Advances to the next output; false after the last one.
  bool Next() {
    const int64_t rank = static_cast<int64_t>(out_index_.size());
    for (int64_t i = rank - 1; i >= 0; --i) {
      if (++out_index_[i] < g_.out_dims[i]) {
        Rebuild(i);
        return true;
      }
      out_index_[i] = 0;
    }
    return false;
  }

 private:
  // Offsets along dim `d` for the current output coordinate.
  void DimOffsets(int64_t d, std::vector<int64_t>& list) const {
    list.clear();
    const hlo::WindowDimension& w = instr_.window[d];
    const int64_t base = out_index_[d] * w.stride - w.padding_low;
    for (int64_t k = 0; k < g_.window_dims[d]; ++k) {
      const int64_t x = base + k * w.window_dilation;
      if (x < 0 || x % w.base_dilation != 0) continue;
      const int64_t i = x / w.base_dilation;
      if (i >= g_.in_dims[d]) continue;
      list.push_back(i * in_strides_[d]);
    }
  }

  void Rebuild(int64_t changed_from) {
    const int64_t rank = static_cast<int64_t>(out_index_.size());
    if (rank == 0) {
      prefix_ = {0};
      last_ = {0};
      return;
    }
    DimOffsets(rank - 1, last_);
    if (changed_from < rank - 1 || prefix_.empty()) {
      prefix_ = {0};
      for (int64_t d = 0; d + 1 < rank; ++d) {
        DimOffsets(d, scratch_);
        std::vector<int64_t> next;
        next.reserve(prefix_.size() * scratch_.size());
        for (int64_t a : prefix_) {
          for (int64_t b : scratch_) next.push_back(a + b);
        }
        prefix_ = std::move(next);
      }
    }
  }

  const Instruction& instr_;
  const WindowGeometry& g_;
  std::vector<int64_t> in_strides_;
  std::vector<int64_t> out_index_;
  std::vector<int64_t> prefix_, last_, scratch_;
};

bool IsTrivialWindowDim(const hlo::WindowDimension& w) {
  return w.size == 1 && w.stride == 1 && w.padding_low == 0 &&
         w.padding_high == 0 && w.base_dilation == 1 && w.window_dilation == 1;
}

// The dim of a prefix scan (cumsum, cumprod, cummax: a window over a whole
// dim, padded below by its size - 1, every other dim trivial), or -1.
int64_t ScanDim(const Instruction& instr, const WindowGeometry& g) {
  int64_t scan = -1;
  for (size_t d = 0; d < g.in_dims.size(); ++d) {
    const hlo::WindowDimension& w = instr.window[d];
    if (IsTrivialWindowDim(w)) continue;
    if (scan >= 0 || w.stride != 1 || w.base_dilation != 1 ||
        w.window_dilation != 1 || w.padding_high != 0 ||
        w.padding_low != w.size - 1 || w.size < g.in_dims[d]) {
      return -1;
    }
    scan = static_cast<int64_t>(d);
  }
  return scan;
}

// reduce-window with a typed reducer. `out` holds the init value.
template <typename E, Opcode kOp>
void ReduceWindowTyped(const Instruction& instr, const WindowGeometry& g,
                       const E* in, E* out) {
  const int64_t rank = static_cast<int64_t>(g.in_dims.size());
  const int64_t scan = ScanDim(instr, g);
  if (scan >= 0) {
    // out[i] = init op in[0] op ... op in[i]: a running fold, in the same
    // order as the window walk.
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < scan; ++d) outer *= g.in_dims[d];
    for (int64_t d = scan + 1; d < rank; ++d) inner *= g.in_dims[d];
    const int64_t length = g.in_dims[scan];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * length * inner + i;
        E acc = out[base];
        for (int64_t j = 0; j < length; ++j) {
          acc = ApplyBinaryElement<kOp>(acc, in[base + j * inner]);
          out[base + j * inner] = acc;
        }
      }
    }
    return;
  }
  WindowWalker walker(instr, g);
  if (rank > 0 && IsTrivialWindowDim(instr.window[rank - 1])) {
    // Whole innermost rows at a time (pooling over spatial dims with the
    // channels innermost): vectorizable.
    const int64_t row = g.out_dims[rank - 1];
    int64_t o = 0;
    do {
      E* acc = out + o;
      walker.ForEach([&](int64_t offset) {
        const E* x = in + offset;
        for (int64_t c = 0; c < row; ++c) {
          acc[c] = ApplyBinaryElement<kOp>(acc[c], x[c]);
        }
      });
      o += row;
      walker.SkipToRowEnd();
    } while (walker.Next());
    return;
  }
  int64_t o = 0;
  do {
    E acc = out[o];
    walker.ForEach([&](int64_t offset) {
      acc = ApplyBinaryElement<kOp>(acc, in[offset]);
    });
    out[o++] = acc;
  } while (walker.Next());
}

// ---------------------------------------------------------------------------
// sort

// How a comparator orders elements, when it does so by a key per element.
struct SortKeyOrder {
  int64_t operand = 0;      // Which operand the key comes from.
  bool descending = false;  // GT instead of LT.
  // The key computation (identity when the comparator compares the
  // parameters directly).
  std::optional<ScalarComputation> key;
  PrimitiveType key_type = PrimitiveType::kInvalid;
  hlo::ComparisonType comparison = hlo::ComparisonType::kDefault;
};

// True when `a` (reading parameter pa) and `b` (reading parameter pb)
// compute the same function of their parameter.
bool Mirrored(const hlo::Instruction* a, const hlo::Instruction* b, int64_t pa,
              int64_t pb, int depth = 0) {
  if (depth > 64) return false;
  if (a->opcode != b->opcode || !(a->shape == b->shape) ||
      a->operand_count() != b->operand_count()) {
    return false;
  }
  switch (a->opcode) {
    case Opcode::kParameter:
      return a->parameter_number == pa && b->parameter_number == pb;
    case Opcode::kConstant:
      return a == b || (a->literal.has_value() && b->literal.has_value() &&
                        *a->literal == *b->literal);
    case Opcode::kCompare:
      if (a->comparison_direction != b->comparison_direction ||
          a->comparison_type != b->comparison_type) {
        return false;
      }
      break;
    default:
      if (!a->called_computations.empty() || !b->called_computations.empty()) {
        return false;
      }
      break;
  }
  for (int64_t i = 0; i < a->operand_count(); ++i) {
    if (!Mirrored(a->operand(i), b->operand(i), pa, pb, depth + 1)) {
      return false;
    }
  }
  return true;
}

// Recognises `ROOT compare(f(p[2k]), f(p[2k+1])), direction=LT|GT` (or with
// the parameters swapped), f a scalar computation of one parameter.
std::optional<SortKeyOrder> MatchKeyComparator(const hlo::Computation& c) {
  const hlo::Instruction* root = c.root();
  if (root == nullptr || root->opcode != Opcode::kCompare ||
      root->operand_count() != 2) {
    return std::nullopt;
  }
  if (root->comparison_direction != hlo::ComparisonDirection::kLt &&
      root->comparison_direction != hlo::ComparisonDirection::kGt) {
    return std::nullopt;
  }
  for (int64_t k = 0; 2 * k + 1 < c.parameter_count(); ++k) {
    for (int swapped = 0; swapped < 2; ++swapped) {
      const int64_t pa = 2 * k + swapped, pb = 2 * k + 1 - swapped;
      if (!Mirrored(root->operand(0), root->operand(1), pa, pb)) continue;
      SortKeyOrder order;
      order.operand = k;
      order.descending = (root->comparison_direction ==
                          hlo::ComparisonDirection::kGt) != (swapped == 1);
      order.key_type = root->operand(0)->shape.type();
      order.comparison = root->comparison_type;
      if (root->operand(0)->opcode != Opcode::kParameter) {
        order.key = ScalarComputation::CompileValue(c, *root->operand(0));
        if (!order.key.has_value()) return std::nullopt;
      }
      return order;
    }
  }
  return std::nullopt;
}

}  // namespace

ReduceWalk ReduceWalkOf(const std::vector<int64_t>& dims,
                        const std::vector<bool>& reduced) {
  // The kernel's own merged loops (one element: a row of one).
  const ReduceLoops loops = MakeReduceLoops(dims, reduced);
  const size_t rank = loops.extent.size();
  ReduceWalk walk;
  // One run of reduced (kept) elements, or runs of one kind after runs of
  // the other; longer alternations are kNone.
  if (rank > 2) return walk;
  walk.kind = loops.inner_reduced ? ReduceWalk::kRows : ReduceWalk::kColumns;
  walk.length = loops.extent.back();
  return walk;
}

bool HasTypedReducer(Opcode op, PrimitiveType type) {
  if (!hlo::IsArrayType(type)) return false;
  return hlo::VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    return WithTypedReducer<E>(op, [](auto) {});
  });
}

void ReduceRowElements(Opcode op, PrimitiveType type, const void* in,
                       int64_t rows, int64_t length, void* out) {
  hlo::VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    return WithTypedReducer<E>(op, [&](auto reducer) {
      // The kernel's run of a contiguous reduced row, row by row.
      for (int64_t r = 0; r < rows; ++r) {
        ReduceRunTyped<E, decltype(reducer)::value>(
            /*inner_reduced=*/true, /*inner_in=*/1, /*inner_out=*/0,
            static_cast<const E*>(in), static_cast<E*>(out), r * length, r,
            length);
      }
    });
  });
}

void ReduceColumnElements(Opcode op, PrimitiveType type, const void* in,
                          int64_t n, int64_t length, int64_t phase,
                          void* out) {
  hlo::VisitType(type, [&](auto tag) {
    using E = decltype(tag);
    return WithTypedReducer<E>(op, [&](auto reducer) {
      constexpr Opcode kOp = decltype(reducer)::value;
      // The kernel's run over a row's kept elements (inner_in ==
      // inner_out == 1), one piece of a row at a time.
      int64_t j = phase % length;
      for (int64_t i = 0; i < n;) {
        const int64_t m = std::min(length - j, n - i);
        ReduceRunTyped<E, kOp>(/*inner_reduced=*/false, /*inner_in=*/1,
                               /*inner_out=*/1, static_cast<const E*>(in),
                               static_cast<E*>(out), i, j, m);
        i += m;
        j = 0;
      }
    });
  });
}

absl::StatusOr<Literal> EvalReduce(const Instruction& instr,
                                   std::span<const Literal* const> operands,
                                   const ComputationRunner& run) {
  CW_ASSIGN_OR_RETURN(VariadicOperands v, SplitVariadic(instr, operands));
  const hlo::Computation* reducer = instr.to_apply();
  if (reducer == nullptr) return Invalid(instr, "has no to_apply computation");
  const std::vector<int64_t>& dims = v.inputs[0]->shape().dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t d : instr.dimensions) {
    if (d < 0 || d >= rank || reduced[d]) {
      return Invalid(instr,
                     absl::StrCat("dimensions ", DimsText(instr.dimensions),
                                  " are not distinct dims of rank ", rank));
    }
    reduced[d] = true;
  }
  std::vector<int64_t> out_dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) out_dims.push_back(dims[i]);
  }
  std::vector<Shape> result_shapes = ResultShapes(instr.shape);
  for (const Shape& s : result_shapes) {
    if (s.dims() != out_dims) {
      return Invalid(
          instr, absl::StrCat("result ", instr.shape.ToString(),
                              " should have dims ", DimsText(out_dims)));
    }
  }
  const size_t n = v.inputs.size();
  std::vector<Literal> results;
  for (size_t i = 0; i < n; ++i) {
    results.push_back(FilledWith(result_shapes[i], *v.inits[i]));
  }
  ReduceLoops loops = MakeReduceLoops(dims, reduced);

  std::optional<Opcode> binary = MatchBinaryReducer(*reducer);
  if (n == 1 && binary.has_value() &&
      reducer->root()->shape.type() == v.types[0]) {
    bool done = hlo::VisitType(v.types[0], [&](auto tag) {
      using E = decltype(tag);
      return WithTypedReducer<E>(*binary, [&](auto op) {
        ReduceTyped<E, decltype(op)::value>(loops, DataPtr<E>(*v.inputs[0]),
                                            MutableDataPtr<E>(results[0]));
      });
    });
    if (done) return PackResults(std::move(results), false);
  }

  ScalarFunction f(*reducer, run);
  CW_RETURN_IF_ERROR(CheckReducer(f, v.types, "reduce"));
  std::vector<int64_t> widths(n);
  std::vector<const void*> in(n);
  std::vector<void*> out(n);
  for (size_t i = 0; i < n; ++i) {
    widths[i] = hlo::ByteWidth(v.types[i]);
    in[i] = v.inputs[i]->untyped_data();
    out[i] = results[i].mutable_untyped_data();
  }
  if (f.program() != nullptr && result_shapes[0].ElementCount() >= 8) {
    ReduceBatched(*f.program(), dims, reduced, widths, in, out);
    return PackResults(std::move(results), instr.shape.IsTuple());
  }
  std::vector<uint64_t> args(2 * n), acc(n);
  absl::Status status;
  const int64_t inner_in = loops.in_stride.back();
  const int64_t inner_out = loops.out_stride.back();
  ForEachRun(loops, [&](int64_t i0, int64_t o0, int64_t count) {
    for (int64_t j = 0; j < count && status.ok(); ++j) {
      const int64_t o = o0 + j * inner_out;
      const int64_t i = i0 + j * inner_in;
      for (size_t k = 0; k < n; ++k) {
        args[k] = LoadBits(out[k], widths[k], o);
        args[n + k] = LoadBits(in[k], widths[k], i);
      }
      status = f.Call(args, acc);
      for (size_t k = 0; k < n; ++k) StoreBits(out[k], widths[k], o, acc[k]);
    }
  });
  CW_RETURN_IF_ERROR(status);
  return PackResults(std::move(results), instr.shape.IsTuple());
}

absl::StatusOr<Literal> EvalReduceWindow(
    const Instruction& instr, std::span<const Literal* const> operands,
    const ComputationRunner& run) {
  CW_ASSIGN_OR_RETURN(VariadicOperands v, SplitVariadic(instr, operands));
  const hlo::Computation* reducer = instr.to_apply();
  if (reducer == nullptr) return Invalid(instr, "has no to_apply computation");
  CW_ASSIGN_OR_RETURN(
      WindowGeometry g,
      ComputeWindowGeometry(instr, v.inputs[0]->shape().dims()));
  std::vector<Shape> result_shapes = ResultShapes(instr.shape);
  for (const Shape& s : result_shapes) {
    if (s.dims() != g.out_dims) {
      return Invalid(
          instr, absl::StrCat("result ", instr.shape.ToString(),
                              " should have dims ", DimsText(g.out_dims)));
    }
  }
  const size_t n = v.inputs.size();
  std::vector<Literal> results;
  for (size_t i = 0; i < n; ++i) {
    results.push_back(FilledWith(result_shapes[i], *v.inits[i]));
  }
  const int64_t out_count = result_shapes[0].ElementCount();
  if (out_count == 0)
    return PackResults(std::move(results), instr.shape.IsTuple());

  std::optional<Opcode> binary = MatchBinaryReducer(*reducer);
  if (n == 1 && binary.has_value() &&
      reducer->root()->shape.type() == v.types[0]) {
    bool done = hlo::VisitType(v.types[0], [&](auto tag) {
      using E = decltype(tag);
      return WithTypedReducer<E>(*binary, [&](auto op) {
        ReduceWindowTyped<E, decltype(op)::value>(
            instr, g, DataPtr<E>(*v.inputs[0]), MutableDataPtr<E>(results[0]));
      });
    });
    if (done) return PackResults(std::move(results), false);
  }

  ScalarFunction f(*reducer, run);
  CW_RETURN_IF_ERROR(CheckReducer(f, v.types, "reduce-window"));
  std::vector<int64_t> widths(n);
  std::vector<const void*> in(n);
  std::vector<void*> out(n);
  for (size_t i = 0; i < n; ++i) {
    widths[i] = hlo::ByteWidth(v.types[i]);
    in[i] = v.inputs[i]->untyped_data();
    out[i] = results[i].mutable_untyped_data();
  }
  std::vector<uint64_t> args(2 * n), acc(n);
  absl::Status status;
  int64_t o = 0;
  WindowWalker walker(instr, g);
  do {
    for (size_t k = 0; k < n; ++k) acc[k] = LoadBits(out[k], widths[k], o);
    walker.ForEach([&](int64_t offset) {
      if (!status.ok()) return;
      for (size_t k = 0; k < n; ++k) {
        args[k] = acc[k];
        args[n + k] = LoadBits(in[k], widths[k], offset);
      }
      status = f.Call(args, acc);
    });
    CW_RETURN_IF_ERROR(status);
    for (size_t k = 0; k < n; ++k) StoreBits(out[k], widths[k], o, acc[k]);
    ++o;
  } while (walker.Next());
  return PackResults(std::move(results), instr.shape.IsTuple());
}

absl::StatusOr<Literal> EvalSelectAndScatter(const Instruction& instr,
                                             const Literal& operand,
                                             const Literal& source,
                                             const Literal& init_value,
                                             const ComputationRunner& run) {
  if (instr.called_computations.size() != 2) {
    return Invalid(instr, "needs select and scatter computations");
  }
  if (!operand.shape().IsArray() || !source.shape().IsArray() ||
      !init_value.shape().IsArray() || init_value.shape().rank() != 0) {
    return Invalid(instr, "operands must be arrays and a scalar init value");
  }
  const PrimitiveType type = operand.shape().type();
  if (source.shape().type() != type || init_value.shape().type() != type ||
      !instr.shape.IsArray() || instr.shape.type() != type ||
      instr.shape.dims() != operand.shape().dims()) {
    return Invalid(instr, absl::StrCat("types or shapes differ: operand ",
                                       operand.shape().ToString(), ", source ",
                                       source.shape().ToString(), ", result ",
                                       instr.shape.ToString()));
  }
  CW_ASSIGN_OR_RETURN(WindowGeometry g,
                      ComputeWindowGeometry(instr, operand.shape().dims()));
  if (source.shape().dims() != g.out_dims) {
    return Invalid(
        instr, absl::StrCat("source ", source.shape().ToString(),
                            " should have dims ", DimsText(g.out_dims)));
  }
  ScalarFunction select(*instr.called_computations[0], run);
  ScalarFunction scatter(*instr.called_computations[1], run);
  const PrimitiveType pair[] = {type, type};
  const PrimitiveType pred[] = {PrimitiveType::kPred};
  const PrimitiveType one[] = {type};
  CW_RETURN_IF_ERROR(
      select.CheckSignature(pair, pred, "select-and-scatter select"));
  CW_RETURN_IF_ERROR(
      scatter.CheckSignature(pair, one, "select-and-scatter scatter"));

  Literal result = FilledWith(instr.shape, init_value);
  const int64_t width = hlo::ByteWidth(type);
  const void* in = operand.untyped_data();
  const void* src = source.untyped_data();
  void* out = result.mutable_untyped_data();
  if (source.shape().ElementCount() == 0) return result;

  // Typed loop for `select = compare(p0, p1)` and a binary scatter (the
  // max-pool gradient: GE and add).
  const hlo::Computation& select_c = *instr.called_computations[0];
  const hlo::Instruction* select_root = select_c.root();
  std::optional<Opcode> scatter_op =
      MatchBinaryReducer(*instr.called_computations[1]);
  if (scatter_op.has_value() && select_root != nullptr &&
      select_c.parameter_count() == 2 &&
      select_root->opcode == Opcode::kCompare &&
      select_root->operand_count() == 2 &&
      select_root->operand(0) == select_c.parameter(0) &&
      select_root->operand(1) == select_c.parameter(1) &&
      type != PrimitiveType::kPred) {
    const hlo::ComparisonDirection direction =
        select_root->comparison_direction;
    const hlo::ComparisonType comparison = select_root->comparison_type;
    bool done = hlo::VisitType(type, [&](auto tag) {
      using E = decltype(tag);
      if constexpr (hlo::kIsComplex<E>) {
        return false;  // Complex values have no order to select by.
      } else {
      return WithTypedReducer<E>(*scatter_op, [&](auto op) {
        const E* x = DataPtr<E>(operand);
        const E* source_data = DataPtr<E>(source);
        E* acc = MutableDataPtr<E>(result);
        const bool total = comparison == hlo::ComparisonType::kTotalOrder ||
                           !(hlo::IsFloating(type) || hlo::IsMinifloat(type)) ||
                           comparison == hlo::ComparisonType::kSigned ||
                           comparison == hlo::ComparisonType::kUnsigned;
        // keep(a, b): the select computation's verdict.
        auto keep = [&](E a, E b) {
          if (total) {
            return CompareBits(type, comparison, direction, ToBits(a),
                               ToBits(b));
          }
          const auto ca = ToCompute(a), cb = ToCompute(b);
          switch (direction) {
            case hlo::ComparisonDirection::kGe:
              return ca >= cb;
            case hlo::ComparisonDirection::kGt:
              return ca > cb;
            case hlo::ComparisonDirection::kLe:
              return ca <= cb;
            case hlo::ComparisonDirection::kLt:
              return ca < cb;
            case hlo::ComparisonDirection::kEq:
              return ca == cb;
            case hlo::ComparisonDirection::kNe:
              return ca != cb;
          }
          return false;
        };
        WindowWalker walker(instr, g);
        int64_t s = 0;
        do {
          int64_t selected = -1;
          E best{};
          walker.ForEach([&](int64_t offset) {
            if (selected < 0 || !keep(best, x[offset])) {
              selected = offset;
              best = x[offset];
            }
          });
          if (selected >= 0) {
            acc[selected] = ApplyBinaryElement<decltype(op)::value>(
                acc[selected], source_data[s]);
          }
          ++s;
        } while (walker.Next());
      });
      }
    });
    if (done) return result;
  }

  absl::Status status;
  uint64_t args[2], verdict, combined;
  int64_t s = 0;
  WindowWalker walker(instr, g);
  do {
    int64_t selected = -1;
    uint64_t selected_bits = 0;
    walker.ForEach([&](int64_t offset) {
      if (!status.ok()) return;
      const uint64_t current = LoadBits(in, width, offset);
      if (selected < 0) {
        selected = offset;
        selected_bits = current;
        return;
      }
      args[0] = selected_bits;
      args[1] = current;
      status = select.Call(args, std::span<uint64_t>(&verdict, 1));
      if ((verdict & 1) == 0) {
        selected = offset;
        selected_bits = current;
      }
    });
    CW_RETURN_IF_ERROR(status);
    if (selected >= 0) {
      args[0] = LoadBits(out, width, selected);
      args[1] = LoadBits(src, width, s);
      CW_RETURN_IF_ERROR(scatter.Call(args, std::span<uint64_t>(&combined, 1)));
      StoreBits(out, width, selected, combined);
    }
    ++s;
  } while (walker.Next());
  return result;
}

absl::StatusOr<Literal> EvalSort(const Instruction& instr,
                                 std::span<const Literal* const> operands,
                                 const ComputationRunner& run) {
  if (operands.empty()) return Invalid(instr, "needs at least one operand");
  if (instr.dimensions.size() != 1) {
    return Invalid(instr, "needs exactly one sort dimension");
  }
  const hlo::Computation* comparator = instr.to_apply();
  if (comparator == nullptr) return Invalid(instr, "has no comparator");
  const std::vector<int64_t>& dims = operands[0]->shape().dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t d = instr.dimensions[0];
  if (d < 0 || d >= rank) {
    return Invalid(instr, absl::StrCat("sort dimension ", d,
                                       " is out of range for rank ", rank));
  }
  std::vector<Shape> result_shapes = ResultShapes(instr.shape);
  if (result_shapes.size() != operands.size() ||
      (operands.size() > 1) != instr.shape.IsTuple()) {
    return Invalid(instr, absl::StrCat("result ", instr.shape.ToString(),
                                       " does not have one array per operand"));
  }
  const size_t n = operands.size();
  std::vector<PrimitiveType> types;
  std::vector<int64_t> widths;
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = operands[i]->shape();
    if (!s.IsArray() || s.dims() != dims || !result_shapes[i].IsArray() ||
        result_shapes[i].type() != s.type() ||
        result_shapes[i].dims() != dims) {
      return Invalid(instr, absl::StrCat("operand ", i, " ", s.ToString(),
                                         " does not match the result ",
                                         instr.shape.ToString()));
    }
    types.push_back(s.type());
    widths.push_back(hlo::ByteWidth(s.type()));
  }
  std::vector<PrimitiveType> param_types;
  for (PrimitiveType t : types) {
    param_types.push_back(t);
    param_types.push_back(t);
  }

  const int64_t length = dims[d];
  int64_t inner = 1, outer = 1;
  for (int64_t i = d + 1; i < rank; ++i) inner *= dims[i];
  for (int64_t i = 0; i < d; ++i) outer *= dims[i];
  std::vector<Literal> results;
  for (size_t i = 0; i < n; ++i) {
    results.emplace_back(Shape(types[i], dims));
  }
  if (length == 0 || inner == 0 || outer == 0) {
    return PackResults(std::move(results), instr.shape.IsTuple());
  }

  std::optional<SortKeyOrder> key_order = MatchKeyComparator(*comparator);
  if (key_order.has_value()) {
    bool params_ok =
        comparator->parameter_count() == static_cast<int64_t>(2 * n);
    for (int64_t i = 0; params_ok && i < comparator->parameter_count(); ++i) {
      params_ok = comparator->parameter(i) != nullptr &&
                  comparator->parameter(i)->shape.IsArray() &&
                  comparator->parameter(i)->shape.rank() == 0 &&
                  comparator->parameter(i)->shape.type() == param_types[i];
    }
    if (!params_ok) key_order.reset();
  }
  std::optional<ScalarFunction> f;
  if (!key_order.has_value()) {
    f.emplace(*comparator, run);
    const PrimitiveType pred[] = {PrimitiveType::kPred};
    CW_RETURN_IF_ERROR(f->CheckSignature(param_types, pred, "sort comparator"));
  }

  // One row's permutation, keys and float values: charged like a Literal.
  const MemoryCharge scratch_charge(
      length * static_cast<int64_t>(sizeof(int64_t) + sizeof(uint64_t) +
                                    sizeof(double)));
  std::vector<int64_t> perm(length);
  std::vector<uint64_t> keys(length);
  std::vector<uint64_t> args(2 * n);
  std::vector<uint64_t> frame;
  if (key_order.has_value() && key_order->key.has_value()) {
    frame = key_order->key->NewFrame();
  }
  // Floats compared without total order use their values (NaN is
  // unordered: a merge sort stays well-defined on such a comparator).
  const bool float_keys =
      key_order.has_value() &&
      (hlo::IsFloating(key_order->key_type) ||
       hlo::IsMinifloat(key_order->key_type)) &&
      key_order->comparison != hlo::ComparisonType::kTotalOrder &&
      key_order->comparison != hlo::ComparisonType::kSigned &&
      key_order->comparison != hlo::ComparisonType::kUnsigned;
  std::vector<double> float_values(float_keys ? length : 0);
  absl::Status status;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * length * inner + in;
      std::iota(perm.begin(), perm.end(), 0);
      if (key_order.has_value()) {
        const int64_t k = key_order->operand;
        const void* data = operands[k]->untyped_data();
        for (int64_t j = 0; j < length; ++j) {
          uint64_t bits = LoadBits(data, widths[k], base + j * inner);
          if (key_order->key.has_value()) {
            args[2 * k] = bits;
            for (size_t p = 0; p < 2 * n; ++p) {
              if (p != static_cast<size_t>(2 * k)) args[p] = 0;
            }
            bits = key_order->key->Run1(frame, args);
          }
          if (float_keys) {
            float_values[j] =
                hlo::VisitType(key_order->key_type, [&](auto tag) {
                  using E = decltype(tag);
                  if constexpr (kIsFloat<E> || hlo::kIsMinifloat<E>) {
                    return static_cast<double>(ToCompute(BitsTo<E>(bits)));
                  } else {
                    return 0.0;
                  }
                });
          } else {
            const PrimitiveType kt = key_order->key_type;
            const bool as_signed =
                key_order->comparison == hlo::ComparisonType::kSigned ||
                (key_order->comparison != hlo::ComparisonType::kUnsigned &&
                 (hlo::IsSignedInteger(kt) || hlo::IsFloating(kt)));
            keys[j] = TotalOrderKey(kt, as_signed, bits);
          }
        }
        const bool desc = key_order->descending;
        if (float_keys) {
          auto less = [&](int64_t a, int64_t b) {
            return desc ? float_values[a] > float_values[b]
                        : float_values[a] < float_values[b];
          };
          std::stable_sort(perm.begin(), perm.end(), less);
        } else {
          auto less = [&](int64_t a, int64_t b) {
            return desc ? keys[a] > keys[b] : keys[a] < keys[b];
          };
          if (instr.is_stable) {
            std::stable_sort(perm.begin(), perm.end(), less);
          } else {
            std::sort(perm.begin(), perm.end(), less);
          }
        }
      } else {
        // General comparator: a merge sort only ever calls it on two
        // distinct elements and cannot run out of bounds whatever it says.
        uint64_t verdict = 0;
        auto less = [&](int64_t a, int64_t b) {
          if (!status.ok()) return false;
          for (size_t p = 0; p < n; ++p) {
            const void* data = operands[p]->untyped_data();
            args[2 * p] = LoadBits(data, widths[p], base + a * inner);
            args[2 * p + 1] = LoadBits(data, widths[p], base + b * inner);
          }
          status = f->Call(args, std::span<uint64_t>(&verdict, 1));
          return (verdict & 1) != 0;
        };
        std::stable_sort(perm.begin(), perm.end(), less);
        CW_RETURN_IF_ERROR(status);
      }
      for (size_t p = 0; p < n; ++p) {
        const void* src = operands[p]->untyped_data();
        void* dst = results[p].mutable_untyped_data();
        for (int64_t j = 0; j < length; ++j) {
          StoreBits(dst, widths[p], base + j * inner,
                    LoadBits(src, widths[p], base + perm[j] * inner));
        }
      }
    }
  }
  return PackResults(std::move(results), instr.shape.IsTuple());
}

}  // namespace causeway::exec
