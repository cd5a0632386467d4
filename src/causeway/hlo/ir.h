// The HLO intermediate representation: a Module owns Computations, which own
// Instructions. Mirrors XLA's HloModule/HloComputation/HloInstruction closely
// enough that the text XLA prints maps onto it one to one.
//
// Ownership: Module owns computations (unique_ptr); a computation owns its
// instructions; operands and called computations are non-owning pointers
// into the same module. A Module is immutable once built and verified and may
// then be read from many threads.
#ifndef CAUSEWAY_HLO_IR_H_
#define CAUSEWAY_HLO_IR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

// Every opcode the runtime knows by name. Anything else parses as kUnknown
// (its text kept in Instruction::opcode_name) and is refused by the verifier
// with its name and line.
#define CW_HLO_OPCODES(V)                                   \
  V(kParameter, "parameter")                                \
  V(kConstant, "constant")                                  \
  V(kTuple, "tuple")                                        \
  V(kGetTupleElement, "get-tuple-element")                  \
  V(kFusion, "fusion")                                      \
  V(kCall, "call")                                          \
  V(kWhile, "while")                                        \
  V(kConditional, "conditional")                            \
  V(kCopy, "copy")                                          \
  V(kBitcast, "bitcast")                                    \
  V(kOptimizationBarrier, "opt-barrier")                    \
  V(kAdd, "add")                                            \
  V(kSubtract, "subtract")                                  \
  V(kMultiply, "multiply")                                  \
  V(kDivide, "divide")                                      \
  V(kRemainder, "remainder")                                \
  V(kMaximum, "maximum")                                    \
  V(kMinimum, "minimum")                                    \
  V(kPower, "power")                                        \
  V(kAtan2, "atan2")                                        \
  V(kAnd, "and")                                            \
  V(kOr, "or")                                              \
  V(kXor, "xor")                                            \
  V(kNot, "not")                                            \
  V(kShiftLeft, "shift-left")                               \
  V(kShiftRightLogical, "shift-right-logical")              \
  V(kShiftRightArithmetic, "shift-right-arithmetic")        \
  V(kNegate, "negate")                                      \
  V(kAbs, "abs")                                            \
  V(kSign, "sign")                                          \
  V(kExp, "exponential")                                    \
  V(kExpm1, "exponential-minus-one")                        \
  V(kLog, "log")                                            \
  V(kLog1p, "log-plus-one")                                 \
  V(kTanh, "tanh")                                          \
  V(kLogistic, "logistic")                                  \
  V(kRsqrt, "rsqrt")                                        \
  V(kSqrt, "sqrt")                                          \
  V(kCbrt, "cbrt")                                          \
  V(kErf, "erf")                                            \
  V(kSin, "sine")                                           \
  V(kCos, "cosine")                                         \
  V(kTan, "tan")                                            \
  V(kFloor, "floor")                                        \
  V(kCeil, "ceil")                                          \
  V(kRoundNearestAfz, "round-nearest-afz")                  \
  V(kRoundNearestEven, "round-nearest-even")                \
  V(kIsFinite, "is-finite")                                 \
  V(kPopcnt, "popcnt")                                      \
  V(kClz, "count-leading-zeros")                            \
  V(kCompare, "compare")                                    \
  V(kSelect, "select")                                      \
  V(kClamp, "clamp")                                        \
  V(kConvert, "convert")                                    \
  V(kBitcastConvert, "bitcast-convert")                     \
  V(kReducePrecision, "reduce-precision")                   \
  V(kBroadcast, "broadcast")                                \
  V(kReshape, "reshape")                                    \
  V(kTranspose, "transpose")                                \
  V(kSlice, "slice")                                        \
  V(kConcatenate, "concatenate")                            \
  V(kPad, "pad")                                            \
  V(kIota, "iota")                                          \
  V(kReverse, "reverse")                                    \
  V(kDynamicSlice, "dynamic-slice")                         \
  V(kDynamicUpdateSlice, "dynamic-update-slice")            \
  V(kGather, "gather")                                      \
  V(kScatter, "scatter")                                    \
  V(kReduce, "reduce")                                      \
  V(kReduceWindow, "reduce-window")                         \
  V(kSelectAndScatter, "select-and-scatter")                \
  V(kDot, "dot")                                            \
  V(kConvolution, "convolution")                            \
  V(kSort, "sort")                                          \
  V(kRngBitGenerator, "rng-bit-generator")                  \
  V(kPartitionId, "partition-id")                           \
  V(kReplicaId, "replica-id")                               \
  V(kAllReduce, "all-reduce")                               \
  V(kAllGather, "all-gather")                               \
  V(kReduceScatter, "reduce-scatter")                       \
  V(kAllToAll, "all-to-all")                                \
  V(kCollectivePermute, "collective-permute")               \
  V(kAfterAll, "after-all")                                 \
  V(kMap, "map")                                            \
  V(kReal, "real")                                          \
  V(kImag, "imag")                                          \
  V(kComplex, "complex")                                    \
  V(kFft, "fft")                                            \
  V(kCustomCall, "custom-call")

enum class Opcode {
#define CW_DECLARE_OPCODE(enum_name, text) enum_name,
  CW_HLO_OPCODES(CW_DECLARE_OPCODE)
#undef CW_DECLARE_OPCODE
  kUnknown,
};

std::string_view OpcodeName(Opcode opcode);  // "add"; "unknown" for kUnknown.
Opcode OpcodeFromName(std::string_view name);  // kUnknown if not known.
bool IsElementwiseUnary(Opcode opcode);
bool IsElementwiseBinary(Opcode opcode);
bool IsCollective(Opcode opcode);

enum class ComparisonDirection { kEq, kNe, kLt, kLe, kGt, kGe };
// How compare orders its operands ("type=" attribute). kDefault means the
// type implied by the element type (XLA prints no attribute then).
enum class ComparisonType { kDefault, kFloat, kTotalOrder, kSigned, kUnsigned };

enum class FusionKind { kLoop, kInput, kOutput, kCustom };

enum class RandomAlgorithm { kDefault, kThreeFry, kPhilox };

// fft fft_type=: forward and inverse complex transforms, real-to-complex
// (half spectrum) and its inverse.
enum class FftType { kFft, kIfft, kRfft, kIrfft };
// "FFT", "IFFT", "RFFT", "IRFFT": fft_type as XLA writes it.
std::string_view FftTypeName(FftType type);

// dot: which dims of each operand are batch and contracting dims.
struct DotDimensionNumbers {
  std::vector<int64_t> lhs_batch_dims, lhs_contracting_dims;
  std::vector<int64_t> rhs_batch_dims, rhs_contracting_dims;
  friend bool operator==(const DotDimensionNumbers&,
                         const DotDimensionNumbers&) = default;
};

// One spatial dimension of a convolution or reduce-window window.
struct WindowDimension {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t padding_low = 0;
  int64_t padding_high = 0;
  int64_t window_dilation = 1;  // "rhs_dilate"
  int64_t base_dilation = 1;    // "lhs_dilate"
  bool window_reversal = false;  // "rhs_reversal"
  friend bool operator==(const WindowDimension&,
                         const WindowDimension&) = default;
};

// dim_labels=b01f_01io->b01f.
struct ConvolutionDimensionNumbers {
  int64_t input_batch_dimension = 0;
  int64_t input_feature_dimension = 0;
  std::vector<int64_t> input_spatial_dimensions;
  int64_t kernel_input_feature_dimension = 0;
  int64_t kernel_output_feature_dimension = 0;
  std::vector<int64_t> kernel_spatial_dimensions;
  int64_t output_batch_dimension = 0;
  int64_t output_feature_dimension = 0;
  std::vector<int64_t> output_spatial_dimensions;
  friend bool operator==(const ConvolutionDimensionNumbers&,
                         const ConvolutionDimensionNumbers&) = default;
};

struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims;
  std::vector<int64_t> collapsed_slice_dims;
  std::vector<int64_t> start_index_map;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> operand_batching_dims;
  std::vector<int64_t> start_indices_batching_dims;
  friend bool operator==(const GatherDimensionNumbers&,
                         const GatherDimensionNumbers&) = default;
};

struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims;
  std::vector<int64_t> inserted_window_dims;
  std::vector<int64_t> scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
  std::vector<int64_t> input_batching_dims;
  std::vector<int64_t> scatter_indices_batching_dims;
  friend bool operator==(const ScatterDimensionNumbers&,
                         const ScatterDimensionNumbers&) = default;
};

// One dimension of pad's `padding=lo_hi_interior`.
struct PaddingDimension {
  int64_t low = 0;
  int64_t high = 0;
  int64_t interior = 0;
  friend bool operator==(const PaddingDimension&,
                         const PaddingDimension&) = default;
};

// One dimension of slice's `slice={[start:limit:stride]}`.
struct SliceDimension {
  int64_t start = 0;
  int64_t limit = 0;
  int64_t stride = 1;
  friend bool operator==(const SliceDimension&, const SliceDimension&) = default;
};

// Collective groups, as written (explicit `{{0,1},{2,3}}` or iota
// `[G,S]<=[dims]T(perm)`). Both forms expand to `groups`; the iota form is
// kept so that the printer writes it back the same way.
struct ReplicaGroups {
  std::vector<std::vector<int64_t>> groups;  // Empty: one group of everyone.
  struct Iota {
    int64_t num_groups = 0;
    int64_t group_size = 0;
    std::vector<int64_t> reshape_dims;
    std::vector<int64_t> transpose_perm;  // Empty: identity.
    friend bool operator==(const Iota&, const Iota&) = default;
  };
  std::optional<Iota> iota;
  friend bool operator==(const ReplicaGroups&, const ReplicaGroups&) = default;
};

// An instruction's `sharding={...}`: how a value maps onto the program's
// devices. Device numbers are logical indices (partition numbers).
struct Sharding {
  enum class Kind { kReplicated, kMaximal, kTiled, kManual, kTuple, kUnknown };
  Kind kind = Kind::kReplicated;
  int64_t maximal_device = 0;
  // kTiled: the tile assignment. `tile_dims` has one entry per array dim,
  // plus one more when `last_tile_dim_replicate` (or per subgroup in
  // `last_tile_dims`). `tile_devices` lists devices in row-major order of
  // the tile assignment (iota forms are expanded); `iota` keeps the iota
  // form, when written so, for printing.
  std::vector<int64_t> tile_dims;
  std::vector<int64_t> tile_devices;
  std::optional<ReplicaGroups::Iota> iota;
  bool last_tile_dim_replicate = false;
  std::vector<std::string> last_tile_dims;  // e.g. {"manual", "replicated"}
  std::vector<Sharding> tuple_elements;     // kTuple.
  std::string unknown_text;  // kUnknown: the raw text, kept for printing.
  friend bool operator==(const Sharding&, const Sharding&) = default;
};

class Computation;

// One HLO instruction. Which attribute fields are meaningful depends on the
// opcode; the rest keep their defaults. Attributes the runtime does not
// interpret (metadata, backend_config, frontend_attributes, ...) are kept in
// `raw_attributes` as (name, text) so that printing round-trips them.
struct Instruction {
  std::string name;  // Without the '%'.
  Opcode opcode = Opcode::kUnknown;
  std::string opcode_name;  // As written; meaningful for kUnknown.
  Shape shape;
  std::vector<Instruction*> operands;
  bool is_root = false;
  int line = 0;    // 1-based position in the source text (0 when built).
  int column = 0;
  int64_t unique_id = 0;  // Dense per module, assigned in order of creation.

  // Called computations: fusion `calls=`, call/reduce/scatter/all-reduce/
  // reduce-scatter/reduce-window/sort/map/select(-and-scatter) `to_apply=`/
  // `comparator=`, while (condition, body), conditional branches (true,
  // false or branch_computations in order), select-and-scatter (select,
  // scatter), custom-call `called_computations=` in order.
  std::vector<Computation*> called_computations;

  // parameter(N)
  int64_t parameter_number = -1;
  // constant(...)
  std::optional<Literal> literal;
  // get-tuple-element index=
  int64_t tuple_index = -1;
  // dimensions={...}: broadcast, transpose, reverse, reduce, concatenate,
  // all-gather, reduce-scatter, all-to-all (array form), sort, map.
  std::vector<int64_t> dimensions;
  // iota_dimension=
  int64_t iota_dimension = -1;
  // slice={[s:l:t], ...}
  std::vector<SliceDimension> slice;
  // dynamic_slice_sizes=
  std::vector<int64_t> dynamic_slice_sizes;
  // pad padding=
  std::vector<PaddingDimension> padding;
  // compare direction= type=
  ComparisonDirection comparison_direction = ComparisonDirection::kEq;
  ComparisonType comparison_type = ComparisonType::kDefault;
  // dot
  DotDimensionNumbers dot_dimension_numbers;
  // convolution / reduce-window / select-and-scatter window=
  std::vector<WindowDimension> window;
  ConvolutionDimensionNumbers convolution_dimension_numbers;
  int64_t feature_group_count = 1;
  int64_t batch_group_count = 1;
  // gather / scatter
  GatherDimensionNumbers gather_dimension_numbers;
  std::vector<int64_t> gather_slice_sizes;
  ScatterDimensionNumbers scatter_dimension_numbers;
  bool indices_are_sorted = false;
  bool unique_indices = false;
  // fusion kind=
  FusionKind fusion_kind = FusionKind::kLoop;
  // sort is_stable=
  bool is_stable = false;
  // rng-bit-generator algorithm=
  RandomAlgorithm rng_algorithm = RandomAlgorithm::kDefault;
  // fft fft_type= fft_length= (the lengths of the transformed trailing
  // dims, outermost first).
  FftType fft_type = FftType::kFft;
  std::vector<int64_t> fft_length;
  // reduce-precision exponent_bits= mantissa_bits=
  int64_t exponent_bits = 0;
  int64_t mantissa_bits = 0;
  // Collectives.
  ReplicaGroups replica_groups;
  std::optional<int64_t> channel_id;
  bool use_global_device_ids = false;
  bool constrain_layout = false;
  std::vector<std::pair<int64_t, int64_t>> source_target_pairs;
  // custom-call custom_call_target= (its called_computations={...} are in
  // called_computations; backend_config and the rest stay raw).
  std::string custom_call_target;
  // sharding=
  std::optional<Sharding> sharding;
  // Everything else, in order of appearance: ("metadata", "{op_name=...}").
  std::vector<std::pair<std::string, std::string>> raw_attributes;

  const Instruction* operand(int64_t i) const { return operands[i]; }
  int64_t operand_count() const { return static_cast<int64_t>(operands.size()); }
  // The computation called as `to_apply` (or the fusion body, ...).
  const Computation* to_apply() const {
    return called_computations.empty() ? nullptr : called_computations[0];
  }
};

class Computation {
 public:
  explicit Computation(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  bool is_entry() const { return is_entry_; }
  void set_is_entry(bool is_entry) { is_entry_ = is_entry; }
  // Instructions in definition order (operands come before their users).
  const std::vector<std::unique_ptr<Instruction>>& instructions() const {
    return instructions_;
  }
  Instruction* AddInstruction(std::unique_ptr<Instruction> instruction);
  // Parameters by number (parameter_number == index); filled by
  // AddInstruction.
  const std::vector<Instruction*>& parameters() const { return parameters_; }
  const Instruction* parameter(int64_t i) const { return parameters_[i]; }
  int64_t parameter_count() const {
    return static_cast<int64_t>(parameters_.size());
  }
  const Instruction* root() const { return root_; }
  Instruction* mutable_root() { return root_; }
  void set_root(Instruction* root) { root_ = root; }
  Instruction* FindInstruction(std::string_view name) const;
  // `execution_thread=` and other trailing attributes, kept raw.
  std::vector<std::pair<std::string, std::string>>& raw_attributes() {
    return raw_attributes_;
  }
  const std::vector<std::pair<std::string, std::string>>& raw_attributes()
      const {
    return raw_attributes_;
  }

 private:
  std::string name_;
  bool is_entry_ = false;
  std::vector<std::unique_ptr<Instruction>> instructions_;
  std::vector<Instruction*> parameters_;
  Instruction* root_ = nullptr;
  std::vector<std::pair<std::string, std::string>> raw_attributes_;
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  // Computations in the order written (callees before callers, as XLA
  // prints them).
  const std::vector<std::unique_ptr<Computation>>& computations() const {
    return computations_;
  }
  Computation* AddComputation(std::unique_ptr<Computation> computation);
  Computation* FindComputation(std::string_view name) const;
  const Computation* entry() const { return entry_; }
  Computation* mutable_entry() { return entry_; }
  void set_entry(Computation* entry) { entry_ = entry; }

  int64_t num_partitions() const { return num_partitions_; }
  void set_num_partitions(int64_t n) { num_partitions_ = n; }
  int64_t replica_count() const { return replica_count_; }
  void set_replica_count(int64_t n) { replica_count_ = n; }
  // Header attributes other than num_partitions/replica_count, kept raw
  // in order: ("entry_computation_layout", "{(f32[2]{0})->f32[2]{0}}").
  std::vector<std::pair<std::string, std::string>>& raw_attributes() {
    return raw_attributes_;
  }
  const std::vector<std::pair<std::string, std::string>>& raw_attributes()
      const {
    return raw_attributes_;
  }
  // Next unique id for an instruction of this module.
  int64_t NextInstructionId() { return next_instruction_id_++; }
  int64_t instruction_count() const { return next_instruction_id_; }

 private:
  std::string name_;
  std::vector<std::unique_ptr<Computation>> computations_;
  Computation* entry_ = nullptr;
  int64_t num_partitions_ = 1;
  int64_t replica_count_ = 1;
  std::vector<std::pair<std::string, std::string>> raw_attributes_;
  int64_t next_instruction_id_ = 0;
};

// True if any computation of `module` has a collective instruction.
bool HasCollectives(const Module& module);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_IR_H_
