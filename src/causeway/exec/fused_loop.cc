#include "causeway/exec/fused_loop.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/exec/elementwise.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/multiply_add.h"
#include "causeway/exec/reduction.h"
#include "causeway/exec/scalar_computation.h"

namespace causeway::exec {
namespace {

using hlo::IsPermutation;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Elements per chunk. A multiple of 512, so that chunks start where the
// op-by-op kernels' own blocks (f16/bf16 widening) and vector loops start.
constexpr int64_t kChunk = 512;
// Nodes that depend only on constants are folded at Compile up to this
// many elements (broadcasts are never folded: they stay cheap to read).
constexpr int64_t kFoldLimit = 4096;
// A loop that feeds a reduce of rows whose length does not divide kChunk
// runs chunks of the least common multiple (still a multiple of kChunk),
// up to this many elements.
constexpr int64_t kMaxReduceChunk = 8192;

bool ShapesAgree(const Shape& expected, const Shape& actual) {
  if (expected.IsArray()) {
    return actual.IsArray() && expected.type() == actual.type() &&
           expected.dims() == actual.dims();
  }
  return expected.Compatible(actual);
}

bool SameArray(const Shape& a, const Shape& b) {
  return a.IsArray() && b.IsArray() && a.type() == b.type() &&
         a.dims() == b.dims();
}

// Opcodes a fused program never runs: the evaluator owns them.
bool EvaluatorOnly(Opcode opcode) {
  switch (opcode) {
    case Opcode::kFusion:
    case Opcode::kCall:
    case Opcode::kWhile:
    case Opcode::kConditional:
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
    case Opcode::kAfterAll:
    case Opcode::kOptimizationBarrier:
    case Opcode::kCustomCall:
    case Opcode::kUnknown:
      return true;
    default:
      return hlo::IsCollective(opcode);
  }
}

// Opcodes folded at Compile when every operand is a constant (none needs a
// ComputationRunner or is costly).
bool Foldable(Opcode opcode) {
  if (hlo::IsElementwiseUnary(opcode) || hlo::IsElementwiseBinary(opcode)) {
    return true;
  }
  switch (opcode) {
    case Opcode::kCompare:
    case Opcode::kSelect:
    case Opcode::kClamp:
    case Opcode::kConvert:
    case Opcode::kBitcastConvert:
    case Opcode::kReducePrecision:
    case Opcode::kCopy:
    case Opcode::kBitcast:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kConcatenate:
    case Opcode::kPad:
    case Opcode::kIota:
    case Opcode::kReverse:
      return true;
    default:
      return false;
  }
}

// Runs one instruction on full operand values: tuples here, every data op
// through the kernels' shared dispatch (EvalKernel in kernels.h).
absl::StatusOr<Literal> EvalFullValue(const Instruction& instr,
                                      std::span<const Literal* const> operands,
                                      const ComputationRunner& runner) {
  switch (instr.opcode) {
    case Opcode::kTuple: {
      std::vector<Literal> elements;
      elements.reserve(operands.size());
      for (const Literal* element : operands) elements.push_back(*element);
      return Literal::MakeTuple(std::move(elements));
    }
    case Opcode::kGetTupleElement: {
      const Literal& tuple = *operands[0];
      if (!tuple.shape().IsTuple() || instr.tuple_index < 0 ||
          instr.tuple_index >= static_cast<int64_t>(tuple.elements().size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("index ", instr.tuple_index, " is out of range for ",
                         tuple.shape().ToString(false)));
      }
      return tuple.elements()[instr.tuple_index];
    }
    default:
      return EvalKernel(instr, operands, runner);
  }
}

enum class NodeKind : uint8_t {
  kParameter,  // A full value: the argument.
  kConstant,   // A full value: the module's literal or a folded one.
  kAlias,      // The same elements as another node (reshape, bitcast, ...).
  kLoopOp,     // Computed chunk by chunk inside a loop.
  kKernel,     // A full value computed by a kernel.
};

enum class OpKind : uint8_t {
  kUnary,
  kBinary,
  kCompare,
  kSelect,
  kSelectScalar,  // select with a pred[] predicate: picks a whole operand.
  kClamp,
  kConvert,
  kReducePrecision,
  kGather,  // broadcast, transpose, slice: reads a full value by strides.
  kSplat,   // broadcast of a scalar.
  kMultiplyAdd,  // A contracted add: in[0] * in[1] + in[2] (multiply_add.h).
};

// Where a loop op reads its chunk: a register, or a full value (at the
// chunk's offset, or its only element for a scalar read).
struct ChunkSource {
  int32_t slot = -1;
  int32_t value = -1;
  bool scalar = false;
  int32_t width = 0;
};

struct LoopOp {
  OpKind kind = OpKind::kUnary;
  const Instruction* instr = nullptr;
  PrimitiveType type = PrimitiveType::kInvalid;  // Operand element type.
  int32_t dst_slot = -1;                         // -1: the loop's output.
  int32_t out_width = 0;
  int32_t input_count = 0;
  std::array<ChunkSource, 3> in;
  const MultiplyAdd* multiply_add = nullptr;  // kMultiplyAdd.
  // kGather: element i of the op (row-major over `dims`) is element
  // offset + sum(index[d] * strides[d]) of full value in[0].
  int64_t offset = 0;
  absl::InlinedVector<int64_t, 6> dims;
  absl::InlinedVector<int64_t, 6> strides;
  // kGather of a transposing read: chunks that are boxes of whole rows
  // from dim box_dim on (box_block elements each step along it) are copied
  // tiled (GatherBox); -1 when none are.
  int64_t box_dim = -1;
  int64_t box_block = 0;
  // A kept register, filled once per run (before the first chunk): a
  // splat, or a kGather whose every chunk holds the same elements (a row
  // broadcast whose rows divide a chunk, as a layer norm's scale).
  bool kept = false;
  // A kGather read only by a kBinary op that reads its rows itself (below):
  // not run.
  bool skipped = false;
  // kBinary and kMultiplyAdd (f32, f64): operand row_operand is a
  // broadcast along rows read in place: its element i is full value
  // in[row_operand] at row_offset + (i / row_length) * row_stride
  // (BinaryRowElements, MultiplyAddRowElements), not a register filled by
  // a gather; -1 when none.
  int32_t row_operand = -1;
  int64_t row_offset = 0;
  int64_t row_stride = 0;
  int64_t row_length = 0;
};

// Computes one full node (the root) chunk by chunk, or feeds the root's
// chunks to a reduce.
struct Loop {
  int32_t root = -1;
  int64_t elements = 0;
  // Elements per chunk: kChunk, or a multiple of it (a reduce's rows).
  int64_t chunk = kChunk;
  int32_t slot_count = 0;
  int64_t slot_bytes = 0;
  std::vector<LoopOp> ops;
  // A reduce of the root that nothing else reads (the reduce node, else
  // -1): the root is computed into register reduce_slot chunk by chunk and
  // each chunk reduced into the reduce's value (reduction.h), which the
  // loop produces instead of the root's. A chunk holds whole rows of a
  // kRows walk.
  int32_t reduce = -1;
  int32_t reduce_init = -1;  // The node of its init value (a full value).
  int32_t reduce_slot = -1;
  Opcode reduce_op = Opcode::kUnknown;
  PrimitiveType reduce_type = PrimitiveType::kInvalid;
  ReduceWalk walk;
};

struct Stage {
  bool is_loop = false;
  int32_t index = 0;  // Into loops, or the node index of a kernel.
};

// Per-thread scratch for loop registers. A nested Run on the same thread
// (a reducer that calls a fused computation) gets its own allocation.
class Scratch {
 public:
  explicit Scratch(int64_t bytes) {
    if (bytes == 0) return;
    Arena& arena = ThreadArena();
    if (!arena.in_use) {
      if (arena.size < bytes) {
        arena.Reset(std::max<int64_t>(bytes, 64 * 1024));
      }
      arena.in_use = true;
      arena_ = &arena;
      data_ = arena.data;
    } else {
      own_.Reset(bytes);
      data_ = own_.data;
    }
  }
  ~Scratch() {
    if (arena_ != nullptr) arena_->in_use = false;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::byte* data() const { return data_; }

 private:
  struct Arena {
    std::byte* data = nullptr;
    int64_t size = 0;
    bool in_use = false;
    void Reset(int64_t bytes) {
      Free();
      data = static_cast<std::byte*>(
          ::operator new(static_cast<size_t>(bytes), std::align_val_t(64)));
      size = bytes;
    }
    void Free() {
      if (data != nullptr) ::operator delete(data, std::align_val_t(64));
      data = nullptr;
      size = 0;
    }
    ~Arena() { Free(); }
  };
  static Arena& ThreadArena() {
    thread_local Arena arena;
    return arena;
  }
  Arena* arena_ = nullptr;
  Arena own_;
  std::byte* data_ = nullptr;
};

// A transposing read (the inner dim strided in the source, another dim
// contiguous there) of a chunk that is a box of the view: whole rows of
// the dims after `op.box_dim`, consecutive along it. Then the chunk is
// one tiled strided copy (kernel_util.h's CopyStrided) instead of an
// element-by-element walk down the source's columns. Returns false when
// the chunk is not such a box.
bool GatherBox(int32_t width, const void* src, const LoopOp& op,
               int64_t start, int64_t n, void* out) {
  const int64_t k = op.box_dim;
  const int64_t block = op.box_block;  // Elements per step along dim k.
  if (start % block != 0 || n % block != 0) return false;
  const int64_t rows = n / block;
  int64_t rest = start / block;
  const int64_t along = rest % op.dims[k];
  if (along + rows > op.dims[k]) return false;
  int64_t at = op.offset + along * op.strides[k];
  rest /= op.dims[k];
  for (int64_t d = k - 1; d >= 0; --d) {
    at += (rest % op.dims[d]) * op.strides[d];
    rest /= op.dims[d];
  }
  const int64_t rank = static_cast<int64_t>(op.dims.size());
  absl::InlinedVector<int64_t, 6> dims = {rows};
  absl::InlinedVector<int64_t, 6> strides = {op.strides[k]};
  for (int64_t d = k + 1; d < rank; ++d) {
    dims.push_back(op.dims[d]);
    strides.push_back(op.strides[d]);
  }
  const std::vector<int64_t> dst_strides =
      RowMajorStrides(std::span<const int64_t>(dims));
  CopyStrided(width, dims, static_cast<const std::byte*>(src) + at * width,
              strides, out, dst_strides);
  return true;
}

// Copies the elements of a strided view: out[i] for i in [start, start+n)
// (row-major over dims) = src[offset + sum(index[d] * strides[d])].
template <typename U>
void GatherChunk(const U* src, const LoopOp& op, int64_t start, int64_t n,
                 U* out) {
  const int64_t rank = static_cast<int64_t>(op.dims.size());
  absl::InlinedVector<int64_t, 6> index(rank);
  int64_t rest = start;
  int64_t at = op.offset;
  for (int64_t d = rank - 1; d >= 0; --d) {
    index[d] = rest % op.dims[d];
    rest /= op.dims[d];
    at += index[d] * op.strides[d];
  }
  const int64_t inner = op.dims[rank - 1];
  const int64_t inner_stride = op.strides[rank - 1];
  while (n > 0) {
    const int64_t run = std::min(inner - index[rank - 1], n);
    const U* s = src + at;
    if (inner_stride == 0) {
      std::fill_n(out, run, *s);
    } else if (inner_stride == 1) {
      std::memcpy(out, s, static_cast<size_t>(run) * sizeof(U));
    } else {
      for (int64_t k = 0; k < run; ++k) out[k] = s[k * inner_stride];
    }
    out += run;
    n -= run;
    index[rank - 1] += run;
    at += run * inner_stride;
    if (index[rank - 1] == inner) {
      at -= inner * inner_stride;
      index[rank - 1] = 0;
      for (int64_t d = rank - 2; d >= 0; --d) {
        at += op.strides[d];
        if (++index[d] < op.dims[d]) break;
        at -= op.dims[d] * op.strides[d];
        index[d] = 0;
      }
    }
  }
}

void Gather(int32_t width, const void* src, const LoopOp& op, int64_t start,
            int64_t n, void* out) {
  if (op.box_dim >= 0 && GatherBox(width, src, op, start, n, out)) return;
  switch (width) {
    case 1:
      GatherChunk(static_cast<const uint8_t*>(src), op, start, n,
                  static_cast<uint8_t*>(out));
      break;
    case 2:
      GatherChunk(static_cast<const uint16_t*>(src), op, start, n,
                  static_cast<uint16_t*>(out));
      break;
    case 4:
      GatherChunk(static_cast<const uint32_t*>(src), op, start, n,
                  static_cast<uint32_t*>(out));
      break;
    default:
      GatherChunk(static_cast<const uint64_t*>(src), op, start, n,
                  static_cast<uint64_t*>(out));
      break;
  }
}

void Fill(int32_t width, const void* value, int64_t n, void* out) {
  switch (width) {
    case 1:
      std::memset(out, *static_cast<const uint8_t*>(value), n);
      break;
    case 2:
      std::fill_n(static_cast<uint16_t*>(out), n,
                  *static_cast<const uint16_t*>(value));
      break;
    case 4:
      std::fill_n(static_cast<uint32_t*>(out), n,
                  *static_cast<const uint32_t*>(value));
      break;
    default:
      std::fill_n(static_cast<uint64_t*>(out), n,
                  *static_cast<const uint64_t*>(value));
      break;
  }
}

// Drops unit dims and merges dims that are contiguous in the source, so
// that the inner runs of a gather are as long as they can be.
void SimplifyGather(LoopOp& op) {
  absl::InlinedVector<int64_t, 6> dims, strides;
  for (size_t d = 0; d < op.dims.size(); ++d) {
    if (op.dims[d] == 1) continue;
    if (!dims.empty() && strides.back() == op.strides[d] * op.dims[d]) {
      dims.back() *= op.dims[d];
      strides.back() = op.strides[d];
      continue;
    }
    dims.push_back(op.dims[d]);
    strides.push_back(op.strides[d]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    strides.push_back(0);
  }
  op.dims = std::move(dims);
  op.strides = std::move(strides);
  // A transposing read: tile chunks that are boxes (GatherBox). The box
  // is the innermost one (dims box_dim.. of the view) whose rows divide a
  // chunk and that holds a dim contiguous in the source, at least 4 long
  // (the tile's other side is the inner dim).
  op.box_dim = -1;
  const int64_t rank = static_cast<int64_t>(op.dims.size());
  if (rank < 2 || op.strides[rank - 1] == 0 || op.strides[rank - 1] == 1 ||
      op.dims[rank - 1] < 4) {
    return;
  }
  int64_t block = 1;
  for (int64_t d = rank - 1; d >= 1; --d) {
    block *= op.dims[d];
    if (kChunk % block != 0) break;
    const int64_t rows = kChunk / block;
    for (int64_t j = d - 1; j < rank - 1; ++j) {
      const int64_t extent = j == d - 1 ? std::min(rows, op.dims[j]) : op.dims[j];
      if (op.strides[j] == 1 && extent >= 4) {
        op.box_dim = d - 1;
        op.box_block = block;
        return;
      }
    }
  }
}

// Whether every chunk of the view holds the same elements: its leading
// dims are broadcast (stride 0) and the rest, one period, divides a chunk
// (chunks start at multiples of kChunk).
bool ChunkInvariant(const LoopOp& op) {
  const int64_t rank = static_cast<int64_t>(op.dims.size());
  int64_t k = 0;
  while (k < rank && op.strides[k] == 0) ++k;
  if (k == 0) return false;
  int64_t period = 1;
  for (int64_t d = k; d < rank; ++d) period *= op.dims[d];
  return kChunk % period == 0;
}

bool IsElementwiseWidth(int64_t width) {
  return width == 1 || width == 2 || width == 4 || width == 8;
}

}  // namespace

struct FusedLoop::Program {
  const hlo::Computation* computation = nullptr;
  // Live instructions, operands first; node i is nodes[i]. A contracted
  // add's operands are the multiply's operands and the addend; the multiply
  // (and a negate between) are not nodes.
  std::vector<const Instruction*> nodes;
  std::unordered_map<const Instruction*, MultiplyAdd> multiply_adds;
  // Per node: its contraction, or null.
  std::vector<const MultiplyAdd*> multiply_add;
  std::vector<NodeKind> kinds;
  std::vector<absl::InlinedVector<int32_t, 3>> operands;
  // kAlias: the node (not an alias) whose elements it shares.
  std::vector<int32_t> alias_source;
  // kConstant: the value.
  std::vector<const Literal*> constants;
  std::vector<std::unique_ptr<Literal>> folded;
  // kKernel and loop roots: index into the run's owned values.
  std::vector<int32_t> owned_index;
  int32_t owned_count = 0;
  std::vector<Loop> loops;
  // Per node: the loop that produces a reduce's value, or -1.
  std::vector<int32_t> reduce_loop;
  std::vector<Stage> stages;
  int32_t root = -1;
  int64_t scratch_bytes = 0;
  // Parameters a bitcast reinterprets in place: their argument must be
  // row-major too.
  std::vector<int64_t> layout_checked_parameters;
  // What CanRun compares: each parameter's type and dims (arrays), or its
  // shape (tuples).
  struct ParameterSpec {
    const Shape* shape = nullptr;
    bool is_array = false;
    PrimitiveType type = PrimitiveType::kInvalid;
    absl::InlinedVector<int64_t, 6> dims;
  };
  std::vector<ParameterSpec> parameters;
  // Nodes whose values exist before the first stage.
  std::vector<int32_t> parameter_nodes;
  std::vector<int32_t> constant_nodes;
};

FusedLoop::FusedLoop(std::unique_ptr<Program> program)
    : program_(std::move(program)) {}

FusedLoop::~FusedLoop() = default;

int FusedLoop::loop_count() const {
  return static_cast<int>(program_->loops.size());
}

int FusedLoop::kernel_count() const {
  return static_cast<int>(program_->stages.size() - program_->loops.size());
}

namespace {

// Compile-time work on one computation.
class Compiler {
 public:
  using Program = FusedLoop::Program;

  Compiler(const hlo::Computation& computation, Program& program)
      : computation_(computation), p_(program) {}

  absl::Status Compile() {
    p_.computation = &computation_;
    CW_RETURN_IF_ERROR(CollectLiveNodes());
    const size_t n = p_.nodes.size();
    p_.kinds.resize(n);
    p_.alias_source.assign(n, -1);
    p_.constants.assign(n, nullptr);
    p_.owned_index.assign(n, -1);
    for (size_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(Classify(static_cast<int32_t>(i)));
    }
    AssignLoops();
    BuildStages();
    for (const Instruction* parameter : computation_.parameters()) {
      Program::ParameterSpec spec;
      spec.shape = &parameter->shape;
      spec.is_array = parameter->shape.IsArray();
      spec.type = parameter->shape.type();
      if (spec.is_array) {
        spec.dims.assign(parameter->shape.dims().begin(),
                         parameter->shape.dims().end());
      }
      p_.parameters.push_back(std::move(spec));
    }
    for (size_t i = 0; i < n; ++i) {
      if (p_.kinds[i] == NodeKind::kParameter) {
        p_.parameter_nodes.push_back(static_cast<int32_t>(i));
      } else if (p_.kinds[i] == NodeKind::kConstant) {
        p_.constant_nodes.push_back(static_cast<int32_t>(i));
      }
    }
    return absl::OkStatus();
  }

 private:
  const Instruction& instr(int32_t node) const { return *p_.nodes[node]; }
  const Shape& shape(int32_t node) const { return p_.nodes[node]->shape; }
  // The node whose elements `node` has (itself unless an alias).
  int32_t SourceOf(int32_t node) const {
    return p_.kinds[node] == NodeKind::kAlias ? p_.alias_source[node] : node;
  }

  // The operands a node reads: a contracted add reads a, b and c.
  absl::InlinedVector<const Instruction*, 3> OperandsOf(
      const Instruction* instruction) const {
    auto it = p_.multiply_adds.find(instruction);
    if (it == p_.multiply_adds.end()) {
      return {instruction->operands.begin(), instruction->operands.end()};
    }
    const MultiplyAdd& contraction = it->second;
    return {contraction.multiply->operands[0],
            contraction.multiply->operands[1], contraction.addend};
  }

  absl::Status CollectLiveNodes() {
    const Instruction* root = computation_.root();
    if (root == nullptr) {
      return absl::InvalidArgumentError("the computation has no root");
    }
    p_.multiply_adds = FindMultiplyAdds(computation_);
    std::unordered_map<const Instruction*, int32_t> index;
    std::unordered_map<const Instruction*, uint8_t> state;  // 1 open, 2 done
    std::vector<std::pair<const Instruction*, size_t>> stack = {{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [instruction, next] = stack.back();
      const auto operands = OperandsOf(instruction);
      if (next < operands.size()) {
        const Instruction* operand = operands[next++];
        if (operand == nullptr) {
          return absl::InvalidArgumentError("an operand is missing");
        }
        uint8_t& s = state[operand];
        if (s == 1) return absl::InvalidArgumentError("operands form a cycle");
        if (s == 0) {
          s = 1;
          stack.push_back({operand, 0});
        }
        continue;
      }
      const Instruction* done = instruction;
      stack.pop_back();
      state[done] = 2;
      if (EvaluatorOnly(done->opcode)) {
        return absl::UnimplementedError(
            absl::StrCat(Where(*done, computation_), ": op '",
                         std::string(hlo::OpcodeName(done->opcode)),
                         "' runs in the evaluator, not in a fused loop"));
      }
      if (done->opcode == Opcode::kParameter &&
          (done->parameter_number < 0 ||
           done->parameter_number >= computation_.parameter_count() ||
           computation_.parameter(done->parameter_number) != done)) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(*done, computation_), ": bad parameter"));
      }
      index[done] = static_cast<int32_t>(p_.nodes.size());
      p_.nodes.push_back(done);
    }
    p_.operands.resize(p_.nodes.size());
    p_.multiply_add.assign(p_.nodes.size(), nullptr);
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      for (const Instruction* operand : OperandsOf(p_.nodes[i])) {
        p_.operands[i].push_back(index.at(operand));
      }
      auto it = p_.multiply_adds.find(p_.nodes[i]);
      if (it != p_.multiply_adds.end()) p_.multiply_add[i] = &it->second;
    }
    p_.root = index.at(root);
    for (const Instruction* parameter : computation_.parameters()) {
      if (parameter == nullptr) {
        return absl::InvalidArgumentError("a parameter is missing");
      }
    }
    return absl::OkStatus();
  }

  absl::Status Classify(int32_t node) {
    const Instruction& in = instr(node);
    if (in.opcode == Opcode::kParameter) {
      p_.kinds[node] = NodeKind::kParameter;
      return absl::OkStatus();
    }
    if (in.opcode == Opcode::kConstant) {
      if (!in.literal.has_value() ||
          !ShapesAgree(in.shape, in.literal->shape())) {
        return absl::UnimplementedError(
            absl::StrCat(Where(in, computation_), ": unusable constant"));
      }
      p_.kinds[node] = NodeKind::kConstant;
      p_.constants[node] = &*in.literal;
      return absl::OkStatus();
    }
    if (p_.multiply_add[node] != nullptr) {
      p_.kinds[node] = NodeKind::kLoopOp;  // FindMultiplyAdds checked shapes.
      return absl::OkStatus();
    }
    if (TryFold(node)) return absl::OkStatus();
    if (IsAlias(node)) {
      p_.kinds[node] = NodeKind::kAlias;
      p_.alias_source[node] = SourceOf(p_.operands[node][0]);
      return absl::OkStatus();
    }
    p_.kinds[node] = IsLoopOp(node) ? NodeKind::kLoopOp : NodeKind::kKernel;
    return absl::OkStatus();
  }

  bool TryFold(int32_t node) {
    const Instruction& in = instr(node);
    if (!Foldable(in.opcode) || !in.shape.IsArray() ||
        in.shape.ElementCount() > kFoldLimit) {
      return false;
    }
    absl::InlinedVector<const Literal*, 4> values;
    for (int32_t operand : p_.operands[node]) {
      if (p_.kinds[operand] != NodeKind::kConstant) return false;
      values.push_back(p_.constants[operand]);
    }
    const ComputationRunner no_runner =
        [](const hlo::Computation&,
           std::span<const Literal>) -> absl::StatusOr<Literal> {
      return absl::InternalError("no computations run while folding");
    };
    absl::StatusOr<Literal> value = EvalFullValue(in, values, no_runner);
    if (!value.ok() || !ShapesAgree(in.shape, value->shape())) return false;
    p_.folded.push_back(std::make_unique<Literal>(*std::move(value)));
    p_.kinds[node] = NodeKind::kConstant;
    p_.constants[node] = p_.folded.back().get();
    return true;
  }

  // Instructions whose value is their operand's elements, unchanged and in
  // the same row-major order, under the checks the kernels make.
  bool IsAlias(int32_t node) {
    const Instruction& in = instr(node);
    if (in.operands.size() != 1) return false;
    const int32_t operand = p_.operands[node][0];
    const Shape& from = shape(operand);
    const Shape& to = in.shape;
    if (!from.IsArray() || !to.IsArray()) return false;
    switch (in.opcode) {
      case Opcode::kCopy:
        return SameArray(from, to);
      case Opcode::kReshape:
        return from.type() == to.type() &&
               from.ElementCount() == to.ElementCount();
      case Opcode::kConvert:
        return SameArray(from, to);
      case Opcode::kBitcastConvert:
        return hlo::ByteWidth(from.type()) == hlo::ByteWidth(to.type()) &&
               from.dims() == to.dims();
      case Opcode::kBitcast: {
        if (from.ByteSize() != to.ByteSize() ||
            hlo::ByteWidth(from.type()) != hlo::ByteWidth(to.type()) ||
            !LayoutIsRowMajor(to)) {
          return false;
        }
        // The kernel reads the layout of the operand's value: a
        // parameter's comes with the argument (checked by CanRun), a
        // constant's with its literal, any other is the instruction's.
        switch (p_.kinds[operand]) {
          case NodeKind::kParameter:
            if (!LayoutIsRowMajor(from)) return false;
            p_.layout_checked_parameters.push_back(
                instr(operand).parameter_number);
            return true;
          case NodeKind::kConstant:
            return LayoutIsRowMajor(p_.constants[operand]->shape());
          default:
            return LayoutIsRowMajor(from);
        }
      }
      case Opcode::kBroadcast:
        return ValidBroadcast(in, from) &&
               from.ElementCount() == to.ElementCount() &&
               std::is_sorted(in.dimensions.begin(), in.dimensions.end());
      case Opcode::kTranspose: {
        if (!ValidTranspose(in, from)) return false;
        for (size_t i = 0; i < in.dimensions.size(); ++i) {
          if (in.dimensions[i] != static_cast<int64_t>(i)) return false;
        }
        return true;
      }
      default:
        return false;
    }
  }

  static bool ValidBroadcast(const Instruction& in, const Shape& from) {
    const std::vector<int64_t>& map = in.dimensions;
    if (from.type() != in.shape.type() ||
        static_cast<int64_t>(map.size()) != from.rank()) {
      return false;
    }
    std::vector<bool> used(in.shape.rank(), false);
    for (size_t i = 0; i < map.size(); ++i) {
      if (map[i] < 0 || map[i] >= in.shape.rank() || used[map[i]] ||
          in.shape.dim(map[i]) != from.dim(i)) {
        return false;
      }
      used[map[i]] = true;
    }
    return true;
  }

  static bool ValidTranspose(const Instruction& in, const Shape& from) {
    const std::vector<int64_t>& perm = in.dimensions;
    if (from.type() != in.shape.type() || in.shape.rank() != from.rank() ||
        !IsPermutation(perm, from.rank())) {
      return false;
    }
    for (size_t i = 0; i < perm.size(); ++i) {
      if (in.shape.dim(i) != from.dim(perm[i])) return false;
    }
    return true;
  }

  static bool ValidSlice(const Instruction& in, const Shape& from) {
    if (from.type() != in.shape.type() || in.shape.rank() != from.rank() ||
        static_cast<int64_t>(in.slice.size()) != from.rank()) {
      return false;
    }
    for (int64_t i = 0; i < from.rank(); ++i) {
      const hlo::SliceDimension& s = in.slice[i];
      if (s.start < 0 || s.start > s.limit || s.limit > from.dim(i) ||
          s.stride < 1 ||
          in.shape.dim(i) != (s.limit - s.start + s.stride - 1) / s.stride) {
        return false;
      }
    }
    return true;
  }

  // Whether the op-by-op kernel would accept the instruction (same checks)
  // and the op has a chunked form.
  bool IsLoopOp(int32_t node) const {
    const Instruction& in = instr(node);
    const Shape& out = in.shape;
    if (!out.IsArray()) return false;
    auto operand_shape = [&](int i) -> const Shape& {
      return shape(p_.operands[node][i]);
    };
    const size_t arity = in.operands.size();
    // Chunks move elements of 1, 2, 4 or 8 bytes; c128 values run through
    // their kernels.
    if (!IsElementwiseWidth(hlo::ByteWidth(out.type()))) return false;
    for (size_t i = 0; i < arity; ++i) {
      const Shape& operand = operand_shape(static_cast<int>(i));
      if (operand.IsArray() &&
          !IsElementwiseWidth(hlo::ByteWidth(operand.type()))) {
        return false;
      }
    }
    if (in.opcode == Opcode::kIsFinite) {
      return arity == 1 && out.type() == PrimitiveType::kPred &&
             hlo::IsFloating(operand_shape(0).type()) &&
             operand_shape(0).dims() == out.dims();
    }
    if (hlo::IsElementwiseUnary(in.opcode)) {
      return arity == 1 && SameArray(operand_shape(0), out);
    }
    if (hlo::IsElementwiseBinary(in.opcode)) {
      return arity == 2 && SameArray(operand_shape(0), out) &&
             SameArray(operand_shape(1), out);
    }
    switch (in.opcode) {
      case Opcode::kCompare:
        return arity == 2 && out.type() == PrimitiveType::kPred &&
               operand_shape(0).IsArray() &&
               operand_shape(0).dims() == out.dims() &&
               SameArray(operand_shape(1), operand_shape(0));
      case Opcode::kSelect: {
        if (arity != 3 || !SameArray(operand_shape(1), out) ||
            !SameArray(operand_shape(2), out) ||
            !IsElementwiseWidth(hlo::ByteWidth(out.type()))) {
          return false;
        }
        const Shape& pred = operand_shape(0);
        return pred.IsArray() && pred.type() == PrimitiveType::kPred &&
               (pred.rank() == 0 || pred.dims() == out.dims());
      }
      case Opcode::kClamp: {
        if (arity != 3 || out.type() == PrimitiveType::kPred ||
            !SameArray(operand_shape(1), out)) {
          return false;
        }
        for (int i : {0, 2}) {
          const Shape& bound = operand_shape(i);
          if (!bound.IsArray() || bound.type() != out.type() ||
              (bound.rank() != 0 && bound.dims() != out.dims())) {
            return false;
          }
        }
        return true;
      }
      case Opcode::kConvert:
        return arity == 1 && operand_shape(0).IsArray() &&
               operand_shape(0).dims() == out.dims();
      case Opcode::kReducePrecision:
        return arity == 1 && SameArray(operand_shape(0), out) &&
               hlo::IsFloating(out.type()) && in.exponent_bits >= 1 &&
               in.mantissa_bits >= 0;
      case Opcode::kBroadcast:
        return arity == 1 && ValidBroadcast(in, operand_shape(0));
      case Opcode::kTranspose:
        return arity == 1 && ValidTranspose(in, operand_shape(0));
      case Opcode::kSlice:
        return arity == 1 && ValidSlice(in, operand_shape(0));
      default:
        return false;
    }
  }

  // Whether loop op `user` reads its operand `k` element for element (the
  // same row-major index as its own), rather than through an index map or
  // as a scalar.
  bool ReadsAligned(int32_t user, size_t k) const {
    const Instruction& in = instr(user);
    switch (in.opcode) {
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kSlice:
        return false;
      case Opcode::kSelect:
      case Opcode::kClamp:
        return shape(p_.operands[user][k]).rank() == in.shape.rank();
      default:
        return true;
    }
  }

  // Whether reduce `node` (a kernel) can be fed chunk by chunk by the loop
  // of its input: one input, a reducer that is one binary op with a typed
  // loop (what EvalReduce then runs), a well-formed reduce (else the
  // kernel reports it), and a walk of rows or columns (reduction.h). Sets
  // the loop's reduce fields and chunk.
  bool FusibleReduce(int32_t node, Loop& loop) const {
    const Instruction& in = instr(node);
    if (in.opcode != Opcode::kReduce || p_.operands[node].size() != 2 ||
        in.to_apply() == nullptr || !in.shape.IsArray()) {
      return false;
    }
    const Shape& input = shape(p_.operands[node][0]);
    const Shape& init = shape(p_.operands[node][1]);
    const PrimitiveType type = in.shape.type();
    switch (type) {
      case PrimitiveType::kPred:
      case PrimitiveType::kS8:
      case PrimitiveType::kS16:
      case PrimitiveType::kS32:
      case PrimitiveType::kS64:
      case PrimitiveType::kU8:
      case PrimitiveType::kU16:
      case PrimitiveType::kU32:
      case PrimitiveType::kU64:
      case PrimitiveType::kF16:
      case PrimitiveType::kBF16:
      case PrimitiveType::kF32:
      case PrimitiveType::kF64:
        break;
      default:
        return false;
    }
    if (!input.IsArray() || input.type() != type || !init.IsArray() ||
        init.rank() != 0 || init.type() != type) {
      return false;
    }
    const std::optional<Opcode> binary = MatchBinaryReducer(*in.to_apply());
    if (!binary.has_value() || in.to_apply()->root()->shape.type() != type ||
        !HasTypedReducer(*binary, type)) {
      return false;
    }
    const std::vector<int64_t>& dims = input.dims();
    const int64_t rank = input.rank();
    std::vector<bool> reduced(rank, false);
    for (int64_t d : in.dimensions) {
      if (d < 0 || d >= rank || reduced[d]) return false;
      reduced[d] = true;
    }
    std::vector<int64_t> out_dims;
    for (int64_t i = 0; i < rank; ++i) {
      if (!reduced[i]) out_dims.push_back(dims[i]);
    }
    if (in.shape.dims() != out_dims) return false;
    const ReduceWalk walk = ReduceWalkOf(dims, reduced);
    int64_t chunk = kChunk;
    if (walk.kind == ReduceWalk::kNone || walk.length < 1) return false;
    if (walk.kind == ReduceWalk::kRows && chunk % walk.length != 0) {
      chunk = std::lcm(kChunk, walk.length);
      if (chunk > kMaxReduceChunk) return false;
    }
    loop.reduce = node;
    loop.reduce_init = SourceOf(p_.operands[node][1]);
    loop.reduce_op = *binary;
    loop.reduce_type = type;
    loop.walk = walk;
    loop.chunk = chunk;
    return true;
  }

  // Every loop op is computed by exactly one loop. A loop op is the root of
  // its own loop (its full value kept) when something needs it whole: the
  // computation's result, a kernel, an indexed or scalar read, or readers
  // in more than one loop. Otherwise it joins its readers' loop. A loop op
  // whose only reader is a reduce (as its input) that FusibleReduce
  // accepts roots a loop that feeds the reduce and is never whole.
  void AssignLoops() {
    const size_t n = p_.nodes.size();
    std::vector<absl::InlinedVector<std::pair<int32_t, int32_t>, 2>> users(n);
    for (size_t u = 0; u < n; ++u) {
      for (size_t k = 0; k < p_.operands[u].size(); ++k) {
        users[p_.operands[u][k]].push_back(
            {static_cast<int32_t>(u), static_cast<int32_t>(k)});
      }
    }
    loop_of_.assign(n, -1);
    p_.reduce_loop.assign(n, -1);
    for (int32_t node = static_cast<int32_t>(n) - 1; node >= 0; --node) {
      if (p_.kinds[node] != NodeKind::kLoopOp) continue;
      bool whole = false;
      int32_t loop = -1;
      bool several = false;
      int32_t reduce = -1;  // A kernel reduce reading it as its input.
      int32_t kernel_reads = 0;
      // The readers of the node and of its aliases.
      std::vector<int32_t> pending = {node};
      while (!pending.empty()) {
        const int32_t value = pending.back();
        pending.pop_back();
        if (value == p_.root) whole = true;
        for (auto [user, k] : users[value]) {
          switch (p_.kinds[user]) {
            case NodeKind::kAlias:
              pending.push_back(user);
              break;
            case NodeKind::kLoopOp:
              if (!ReadsAligned(user, k)) {
                whole = true;
              } else if (loop == -1) {
                loop = loop_of_[user];
              } else if (loop != loop_of_[user]) {
                several = true;
              }
              break;
            default:
              ++kernel_reads;
              if (instr(user).opcode == Opcode::kReduce && k == 0) {
                reduce = user;
              }
              break;
          }
        }
      }
      Loop new_loop;
      new_loop.root = node;
      new_loop.elements = shape(node).ElementCount();
      if (!whole && loop == -1 && kernel_reads == 1 && reduce >= 0 &&
          p_.reduce_loop[reduce] == -1 && FusibleReduce(reduce, new_loop)) {
        loop_of_[node] = static_cast<int32_t>(p_.loops.size());
        p_.reduce_loop[reduce] = loop_of_[node];
        p_.loops.push_back(std::move(new_loop));
      } else if (whole || several || loop == -1 || kernel_reads > 0) {
        loop_of_[node] = static_cast<int32_t>(p_.loops.size());
        p_.loops.push_back(std::move(new_loop));
      } else {
        loop_of_[node] = loop;
      }
    }
  }

  void BuildStages() {
    const size_t n = p_.nodes.size();
    for (size_t i = 0; i < n; ++i) {
      const int32_t node = static_cast<int32_t>(i);
      if (p_.reduce_loop[node] >= 0) {
        // After the reduce's init value, which may come after the loop's
        // root.
        p_.owned_index[node] = p_.owned_count++;
        p_.stages.push_back({true, p_.reduce_loop[node]});
      } else if (p_.kinds[node] == NodeKind::kKernel) {
        p_.owned_index[node] = p_.owned_count++;
        p_.stages.push_back({false, node});
      } else if (p_.kinds[node] == NodeKind::kLoopOp &&
                 p_.loops[loop_of_[node]].root == node &&
                 p_.loops[loop_of_[node]].reduce < 0) {
        p_.owned_index[node] = p_.owned_count++;
        p_.stages.push_back({true, loop_of_[node]});
      }
    }
    for (size_t l = 0; l < p_.loops.size(); ++l) {
      BuildLoop(static_cast<int32_t>(l));
    }
  }

  // A chunk source for node `operand` read by an op of loop `loop`.
  ChunkSource SourceFor(int32_t operand, int32_t loop, bool scalar) const {
    const int32_t s = SourceOf(operand);
    ChunkSource source;
    source.width = static_cast<int32_t>(hlo::ByteWidth(shape(s).type()));
    source.scalar = scalar;
    if (p_.kinds[s] == NodeKind::kLoopOp && p_.loops[loop_of_[s]].root != s) {
      CW_CHECK(loop_of_[s] == loop);
      source.slot = slot_of_[s];
    } else {
      source.value = s;
    }
    return source;
  }

  void BuildLoop(int32_t l) {
    Loop& loop = p_.loops[l];
    const size_t n = p_.nodes.size();
    slot_of_.assign(n, -1);
    kept_.assign(n, false);
    // Members in operand-first order, and each register value's last
    // reader.
    std::vector<int32_t> members;
    for (size_t i = 0; i < n; ++i) {
      if (p_.kinds[i] == NodeKind::kLoopOp && loop_of_[i] == l) {
        members.push_back(static_cast<int32_t>(i));
      }
    }
    std::vector<int32_t> last_reader(n, -1);
    std::vector<int32_t> reads(n, 0);
    std::vector<int32_t> op_of(n, -1);  // Its index in loop.ops.
    for (size_t j = 0; j < members.size(); ++j) {
      for (int32_t operand : p_.operands[members[j]]) {
        ++reads[SourceOf(operand)];
        last_reader[SourceOf(operand)] = static_cast<int32_t>(j);
      }
    }
    std::vector<int32_t> free_slots;
    int32_t slot_count = 0;
    for (size_t j = 0; j < members.size(); ++j) {
      const int32_t node = members[j];
      const Instruction& in = instr(node);
      LoopOp op;
      op.instr = &in;
      op.out_width = static_cast<int32_t>(hlo::ByteWidth(in.shape.type()));
      const auto& operands = p_.operands[node];
      op.input_count = static_cast<int32_t>(operands.size());
      for (size_t k = 0; k < operands.size(); ++k) {
        const bool aligned = ReadsAligned(node, k);
        op.in[k] = SourceFor(operands[k], l, !aligned);
      }
      if (!operands.empty()) op.type = shape(operands[0]).type();
      op_of[node] = static_cast<int32_t>(loop.ops.size());
      if (p_.multiply_add[node] != nullptr) {
        op.kind = OpKind::kMultiplyAdd;
        op.multiply_add = p_.multiply_add[node];
        ReadRowsInPlace(operands, reads, op_of, loop, op);
      } else if (hlo::IsElementwiseUnary(in.opcode)) {
        op.kind = OpKind::kUnary;
      } else if (hlo::IsElementwiseBinary(in.opcode)) {
        op.kind = OpKind::kBinary;
        ReadRowsInPlace(operands, reads, op_of, loop, op);
      } else {
        switch (in.opcode) {
          case Opcode::kCompare:
            op.kind = OpKind::kCompare;
            break;
          case Opcode::kSelect:
            op.kind = op.in[0].scalar ? OpKind::kSelectScalar : OpKind::kSelect;
            break;
          case Opcode::kClamp:
            op.kind = OpKind::kClamp;
            break;
          case Opcode::kConvert:
            op.kind = OpKind::kConvert;
            break;
          case Opcode::kReducePrecision:
            op.kind = OpKind::kReducePrecision;
            break;
          case Opcode::kBroadcast:
            if (shape(operands[0]).rank() == 0) {
              op.kind = OpKind::kSplat;
            } else {
              op.kind = OpKind::kGather;
              BroadcastStrides(in, shape(operands[0]), op);
            }
            break;
          case Opcode::kTranspose:
            op.kind = OpKind::kGather;
            TransposeStrides(in, shape(operands[0]), op);
            break;
          case Opcode::kSlice:
            op.kind = OpKind::kGather;
            SliceStrides(in, shape(operands[0]), op);
            break;
          default:
            CW_CHECK(false) << "not a loop op: " << in.name;
        }
      }
      // The destination: the loop's output for the root (a register when
      // it feeds a reduce), else a register (kept for the whole run for a
      // splat or a chunk-invariant gather, which are filled once).
      if (node == loop.root && loop.reduce >= 0) {
        op.dst_slot = slot_count++;
        loop.reduce_slot = op.dst_slot;
      } else if (node != loop.root) {
        op.kept = op.kind == OpKind::kSplat ||
                  (op.kind == OpKind::kGather && ChunkInvariant(op));
        kept_[node] = op.kept;
        if (!free_slots.empty() && !op.kept) {
          op.dst_slot = free_slots.back();
          free_slots.pop_back();
        } else {
          op.dst_slot = slot_count++;
        }
        slot_of_[node] = op.dst_slot;
      }
      for (int32_t operand : operands) {
        const int32_t s = SourceOf(operand);
        if (slot_of_[s] >= 0 && last_reader[s] == static_cast<int32_t>(j) &&
            !kept_[s]) {
          free_slots.push_back(slot_of_[s]);
          slot_of_[s] = -2;  // Freed once, even if read twice here.
        }
      }
      loop.ops.push_back(std::move(op));
    }
    // A node read twice by one op was marked -2 above; nothing reads it
    // later, by last_reader.
    loop.slot_count = slot_count;
    const int64_t chunk =
        std::min(loop.chunk, std::max<int64_t>(loop.elements, 1));
    loop.slot_bytes = (chunk * 8 + 63) / 64 * 64;
    p_.scratch_bytes =
        std::max(p_.scratch_bytes, loop.slot_bytes * loop.slot_count);
  }

  // A float binary op or multiply-add reading a broadcast along rows (each
  // element of the source repeated over a row of at least kMinRow: a
  // per-token scalar over [8,64,64]) that nothing else reads takes the
  // rows from the source itself (BinaryRowElements,
  // MultiplyAddRowElements), and the gather that would fill a register
  // with the repeated elements is skipped.
  void ReadRowsInPlace(const absl::InlinedVector<int32_t, 3>& operands,
                       const std::vector<int32_t>& reads,
                       const std::vector<int32_t>& op_of, Loop& loop,
                       LoopOp& op) const {
    constexpr int64_t kMinRow = 16;
    if (!RowOperandsSupported(op.instr->shape.type())) return;
    for (int32_t k = 0; k < op.input_count; ++k) {
      const int32_t s = SourceOf(operands[k]);

      if (op.in[k].slot < 0 || reads[s] != 1 || op_of[s] < 0) continue;
      LoopOp& gather = loop.ops[op_of[s]];
      if (gather.kind != OpKind::kGather || gather.kept ||
          gather.dims.size() != 2 || gather.strides[1] != 0 ||
          gather.dims[1] < kMinRow) {
        continue;
      }
      gather.skipped = true;
      op.in[k] = gather.in[0];
      op.row_operand = k;
      op.row_offset = gather.offset;
      op.row_stride = gather.strides[0];
      op.row_length = gather.dims[1];
      return;
    }
  }

  static void BroadcastStrides(const Instruction& in, const Shape& from,
                               LoopOp& op) {
    const std::vector<int64_t> in_strides = RowMajorStrides(from.dims());
    op.dims.assign(in.shape.dims().begin(), in.shape.dims().end());
    op.strides.assign(in.shape.rank(), 0);
    for (size_t i = 0; i < in.dimensions.size(); ++i) {
      op.strides[in.dimensions[i]] = in_strides[i];
    }
    SimplifyGather(op);
  }

  static void TransposeStrides(const Instruction& in, const Shape& from,
                               LoopOp& op) {
    const std::vector<int64_t> in_strides = RowMajorStrides(from.dims());
    op.dims.assign(in.shape.dims().begin(), in.shape.dims().end());
    op.strides.resize(in.shape.rank());
    for (size_t i = 0; i < in.dimensions.size(); ++i) {
      op.strides[i] = in_strides[in.dimensions[i]];
    }
    SimplifyGather(op);
  }

  static void SliceStrides(const Instruction& in, const Shape& from,
                           LoopOp& op) {
    const std::vector<int64_t> in_strides = RowMajorStrides(from.dims());
    op.dims.assign(in.shape.dims().begin(), in.shape.dims().end());
    op.strides.resize(in.shape.rank());
    op.offset = 0;
    for (int64_t i = 0; i < from.rank(); ++i) {
      op.offset += in.slice[i].start * in_strides[i];
      op.strides[i] = in.slice[i].stride * in_strides[i];
    }
    SimplifyGather(op);
  }

  const hlo::Computation& computation_;
  Program& p_;
  std::vector<int32_t> loop_of_;
  std::vector<int32_t> slot_of_;
  std::vector<bool> kept_;  // By node, in the loop being built.
};

}  // namespace

absl::StatusOr<std::unique_ptr<FusedLoop>> FusedLoop::Compile(
    const hlo::Computation& computation) {
  auto program = std::make_unique<Program>();
  Compiler compiler(computation, *program);
  CW_RETURN_IF_ERROR(compiler.Compile());
  return std::unique_ptr<FusedLoop>(new FusedLoop(std::move(program)));
}

bool FusedLoop::CanRun(std::span<const Literal* const> arguments) const {
  const auto& parameters = program_->parameters;
  if (arguments.size() != parameters.size()) return false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Program::ParameterSpec& spec = parameters[i];
    const Shape& shape = arguments[i]->shape();
    if (!spec.is_array) {
      if (!ShapesAgree(*spec.shape, shape)) return false;
      continue;
    }
    const std::vector<int64_t>& dims = shape.dims();
    if (shape.type() != spec.type || dims.size() != spec.dims.size() ||
        !std::equal(dims.begin(), dims.end(), spec.dims.begin())) {
      return false;
    }
  }
  for (int64_t i : program_->layout_checked_parameters) {
    if (!LayoutIsRowMajor(arguments[i]->shape())) return false;
  }
  return true;
}

namespace {

// Runs one loop: `data` holds the elements of every full value computed
// so far (by node), `out` receives the root's elements. On failure,
// `failed` names the op whose kernel loop refused.
absl::Status RunLoop(const Loop& loop, std::span<const std::byte* const> data,
                     std::byte* out, std::byte* scratch,
                     const ScopedFlushDenormals& flush_denormals,
                     const LoopOp** failed) {
  auto full = [&](const ChunkSource& s) { return data[s.value]; };
  auto slot = [&](int32_t index) {
    return scratch + static_cast<int64_t>(index) * loop.slot_bytes;
  };
  if (loop.ops.size() == 1 && loop.ops[0].kind == OpKind::kGather &&
      loop.reduce < 0) {
    // A lone broadcast, transpose or slice: one strided copy of the whole
    // value (tiled where it transposes) rather than chunk by chunk.
    const LoopOp& op = loop.ops[0];
    const std::vector<int64_t> dst_strides =
        RowMajorStrides(std::span<const int64_t>(op.dims));
    CopyStrided(op.out_width, op.dims,
                full(op.in[0]) + op.offset * op.out_width, op.strides, out,
                dst_strides);
    return absl::OkStatus();
  }
  const int64_t first_chunk = std::min(loop.chunk, loop.elements);
  for (const LoopOp& op : loop.ops) {
    if (!op.kept) continue;
    if (op.kind == OpKind::kSplat) {
      Fill(op.out_width, full(op.in[0]), first_chunk, slot(op.dst_slot));
    } else {
      Gather(op.out_width, full(op.in[0]), op, 0, first_chunk,
             slot(op.dst_slot));
    }
  }
  const int64_t reduce_width =
      loop.reduce >= 0 ? hlo::ByteWidth(loop.reduce_type) : 0;
  for (int64_t start = 0; start < loop.elements; start += loop.chunk) {
    const int64_t n = std::min(loop.chunk, loop.elements - start);
    for (const LoopOp& op : loop.ops) {
      void* dst = op.dst_slot >= 0
                      ? static_cast<void*>(slot(op.dst_slot))
                      : static_cast<void*>(out + start * op.out_width);
      auto in = [&](int k) -> const void* {
        const ChunkSource& s = op.in[k];
        if (s.slot >= 0) return slot(s.slot);
        const std::byte* base = full(s);
        return s.scalar ? base : base + start * s.width;
      };
      // The first row of the chunk, of a broadcast read in place.
      auto row_source = [&](int k) -> const void* {
        return full(op.in[k]) +
               (op.row_offset + start / op.row_length * op.row_stride) *
                   op.out_width;
      };
      absl::Status status;
      switch (op.kind) {
        case OpKind::kUnary:
          status = UnaryElements(*op.instr, op.type, in(0), dst, n);
          break;
        case OpKind::kBinary:
          if (op.row_operand >= 0) {
            const int32_t k = op.row_operand;
            status = BinaryRowElements(*op.instr, in(1 - k), row_source(k),
                                       op.row_stride, op.row_length,
                                       start % op.row_length, k == 0, dst, n);
          } else {
            status = BinaryElements(*op.instr, in(0), in(1), dst, n);
          }
          break;
        case OpKind::kCompare:
          status = CompareElements(*op.instr, op.type, in(0), in(1),
                                   static_cast<bool*>(dst), n);
          break;
        case OpKind::kSelect:
          status = SelectElements(op.out_width, static_cast<const bool*>(in(0)),
                                  in(1), in(2), dst, n);
          break;
        case OpKind::kSelectScalar: {
          const bool choice = *static_cast<const bool*>(in(0));
          std::memcpy(dst, choice ? in(1) : in(2),
                      static_cast<size_t>(n * op.out_width));
          break;
        }
        case OpKind::kClamp:
          ClampElements(op.instr->shape.type(), in(0), op.in[0].scalar ? 0 : 1,
                        in(1), in(2), op.in[2].scalar ? 0 : 1, dst, n);
          break;
        case OpKind::kConvert:
          ConvertElements(op.type, op.instr->shape.type(), in(0), dst, n);
          break;
        case OpKind::kReducePrecision:
          ReducePrecisionElements(*op.instr, in(0), dst, n);
          break;
        case OpKind::kGather:
          if (!op.kept && !op.skipped) {
            Gather(op.out_width, full(op.in[0]), op, start, n, dst);
          }
          break;
        case OpKind::kSplat:
          if (!op.kept) Fill(op.out_width, full(op.in[0]), n, dst);
          break;
        case OpKind::kMultiplyAdd:
          if (op.row_operand >= 0) {
            const int32_t k = op.row_operand;
            const int32_t first = k == 0 ? 1 : 0;
            const int32_t second = k == 2 ? 1 : 2;
            status = MultiplyAddRowElements(
                op.type, op.multiply_add->negate_product,
                op.multiply_add->negate_addend, k, in(first), in(second),
                row_source(k), op.row_stride, op.row_length,
                start % op.row_length, dst, n);
            break;
          }
          status = MultiplyAddElements(
              op.type, op.multiply_add->negate_product,
              op.multiply_add->negate_addend, in(0), in(1), in(2), dst, n);
          break;
      }
      if (!status.ok()) {
        *failed = &op;
        return status;
      }
    }
    if (loop.reduce >= 0) {
      // The reduce kernel runs in the caller's mode, so its loops do too.
      ScopedFlushDenormals::Paused caller_mode(flush_denormals);
      const void* chunk = slot(loop.reduce_slot);
      if (loop.walk.kind == ReduceWalk::kRows) {
        const int64_t length = loop.walk.length;
        ReduceRowElements(loop.reduce_op, loop.reduce_type, chunk,
                          n / length, length,
                          out + start / length * reduce_width);
      } else {
        ReduceColumnElements(loop.reduce_op, loop.reduce_type, chunk, n,
                             loop.walk.length, start % loop.walk.length, out);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Literal> FusedLoop::Run(
    std::span<const Literal* const> arguments,
    const ComputationRunner& runner) const {
  const Program& p = *program_;
  const hlo::Computation& computation = *p.computation;
  const size_t n = p.nodes.size();
  // The full values by node, and their elements (arrays only).
  absl::InlinedVector<const Literal*, 32> values(n, nullptr);
  absl::InlinedVector<const std::byte*, 32> data(n, nullptr);
  auto set = [&](int32_t node, const Literal* value) {
    values[node] = value;
    if (value->shape().IsArray()) {
      data[node] = static_cast<const std::byte*>(value->untyped_data());
    }
  };
  absl::InlinedVector<Literal, 8> owned(p.owned_count);
  for (int32_t node : p.parameter_nodes) {
    set(node, arguments[p.nodes[node]->parameter_number]);
  }
  for (int32_t node : p.constant_nodes) set(node, p.constants[node]);
  Scratch scratch(p.scratch_bytes);
  for (const Stage& stage : p.stages) {
    if (stage.is_loop) {
      const Loop& loop = p.loops[stage.index];
      const int32_t produced = loop.reduce >= 0 ? loop.reduce : loop.root;
      const Instruction& root = *p.nodes[produced];
      Literal& result = owned[p.owned_index[produced]];
      result = Literal::Uninitialized(root.shape);
      std::byte* out = static_cast<std::byte*>(result.mutable_untyped_data());
      if (loop.reduce >= 0) {
        // The reduce starts from its init value in every output element,
        // as the kernel's.
        Fill(static_cast<int32_t>(hlo::ByteWidth(loop.reduce_type)),
             data[loop.reduce_init],
             root.shape.ElementCount(), out);
      }
      const LoopOp* failed = nullptr;
      // As the elementwise kernels do (select and reduce-precision only
      // move bits, so flushing does not change them); kernel stages below
      // and a loop's reduce run in the caller's mode, as op by op.
      ScopedFlushDenormals flush_denormals;
      absl::Status status =
          RunLoop(loop, data, out, scratch.data(), flush_denormals, &failed);
      if (!status.ok()) {
        return Annotate(status, failed != nullptr ? *failed->instr : root,
                        computation);
      }
      set(produced, &result);
      continue;
    }
    const int32_t node = stage.index;
    const Instruction& instr = *p.nodes[node];
    absl::InlinedVector<Literal, 4> views;
    absl::InlinedVector<const Literal*, 4> operands;
    views.reserve(p.operands[node].size());
    for (int32_t operand : p.operands[node]) {
      if (p.kinds[operand] == NodeKind::kAlias) {
        views.push_back(values[p.alias_source[operand]]->WithShape(
            p.nodes[operand]->shape));
        operands.push_back(&views.back());
      } else {
        operands.push_back(values[operand]);
      }
    }
    absl::StatusOr<Literal> result = EvalFullValue(instr, operands, runner);
    if (!result.ok()) return Annotate(result.status(), instr, computation);
    if (!ShapesAgree(instr.shape, result->shape())) {
      return absl::InternalError(absl::StrCat(
          Where(instr, computation), ": produced ",
          result->shape().ToString(false), ", the instruction declares ",
          instr.shape.ToString(false)));
    }
    Literal& slot = owned[p.owned_index[node]];
    slot = *std::move(result);
    set(node, &slot);
  }
  const int32_t root = p.root;
  switch (p.kinds[root]) {
    case NodeKind::kAlias:
      return values[p.alias_source[root]]->WithShape(p.nodes[root]->shape);
    case NodeKind::kParameter:
    case NodeKind::kConstant:
      return *values[root];
    default:
      return std::move(owned[p.owned_index[root]]);
  }
}

}  // namespace causeway::exec
