// A C++ builder for HLO modules, for users who write programs without JAX.
// It emits the same IR the parser produces, so built and parsed programs
// run the same way.
//
//   ModuleBuilder m("axpy");
//   m.set_num_partitions(2);
//   ComputationBuilder add = m.NewComputation("add");
//   Shape f32 = Shape::Scalar(PrimitiveType::kF32);
//   add.Add(add.Parameter(f32), add.Parameter(f32));
//   ComputationBuilder b = m.NewEntry("main");
//   XlaOp x = b.Parameter(Shape(PrimitiveType::kF32, {4}), "x");
//   XlaOp y = b.Parameter(Shape(PrimitiveType::kF32, {4}), "y");
//   XlaOp sum = b.Add(x, y);
//   b.AllReduce(sum, add, CollectiveOptions::Spmd({{0, 1}}));
//   absl::StatusOr<std::unique_ptr<Module>> module = std::move(m).Build();
//
// Result shapes are inferred (InferShape) except where they cannot be:
// convert's target type, reshape's and broadcast's dims, iota's shape,
// constants (from their Literal) and parameters.
//
// Errors accumulate: a bad call records its error and returns an invalid
// XlaOp; every later call is a no-op that returns an invalid XlaOp, and
// Build() returns the FIRST error. Misuse (a handle from another builder or
// computation, a default-constructed handle, using a builder after Build)
// is reported the same way; nothing throws or crashes.
//
// A computation's root is the op passed to SetRoot, else its last op. A
// computation must have its root before another one calls it; its
// parameters and root are read at that moment.
//
// Builders are handles onto shared state: cheap to copy, not thread-safe
// (use one module's builders from one thread at a time).
#ifndef CAUSEWAY_HLO_BUILDER_H_
#define CAUSEWAY_HLO_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

namespace builder_internal {
struct ModuleState;
}  // namespace builder_internal

class ComputationBuilder;

// A value computed by an op under construction. Cheap to copy; only
// meaningful to the ComputationBuilder that returned it.
class XlaOp {
 public:
  XlaOp() = default;
  // False for a default-constructed op and for the result of a failed call.
  bool valid() const { return instr_ != nullptr; }

 private:
  friend class ComputationBuilder;
  XlaOp(uint64_t module_id, int64_t computation, Instruction* instr)
      : module_id_(module_id), computation_(computation), instr_(instr) {}

  uint64_t module_id_ = 0;
  int64_t computation_ = -1;
  Instruction* instr_ = nullptr;  // Owned by the builder's module state.
};

// Groups and channel of a collective, as XLA's attributes.
struct CollectiveOptions {
  // Empty: one group of every participant.
  std::vector<std::vector<int64_t>> replica_groups;
  std::optional<int64_t> channel_id;
  bool use_global_device_ids = false;

  // What JAX's SPMD programs use: a channel and global device ids, so that
  // group members are partition numbers. (all-to-all has no
  // use_global_device_ids attribute; with a channel its ids are partition
  // numbers anyway, so the flag is dropped there.)
  static CollectiveOptions Spmd(std::vector<std::vector<int64_t>> groups,
                                int64_t channel_id = 1) {
    return {std::move(groups), channel_id, true};
  }
};

// Builds one computation of a module. Obtained from ModuleBuilder.
class ComputationBuilder {
 public:
  // An unusable builder: every call returns an invalid XlaOp.
  ComputationBuilder() = default;

  const std::string& name() const;
  // The inferred shape of `op`; an error for an op of another builder.
  absl::StatusOr<Shape> GetShape(XlaOp op) const;
  // Makes `op` the computation's result (default: the last op added).
  void SetRoot(XlaOp op);

  // ---- Values ---------------------------------------------------------
  // Parameter number = the next free number.
  XlaOp Parameter(const Shape& shape, std::string name = "");
  XlaOp Parameter(int64_t number, const Shape& shape, std::string name = "");
  XlaOp Constant(Literal literal);
  template <typename T>
  XlaOp ConstantScalar(PrimitiveType type, T value) {
    return Constant(Literal::Scalar(type, value));
  }
  XlaOp Iota(const Shape& shape, int64_t iota_dimension);
  XlaOp PartitionId();
  XlaOp ReplicaId();

  // ---- Elementwise ----------------------------------------------------
  // Any elementwise unary or binary opcode (IsElementwiseUnary/Binary).
  XlaOp Unary(Opcode opcode, XlaOp x);
  XlaOp Binary(Opcode opcode, XlaOp lhs, XlaOp rhs);
  XlaOp Add(XlaOp a, XlaOp b) { return Binary(Opcode::kAdd, a, b); }
  XlaOp Sub(XlaOp a, XlaOp b) { return Binary(Opcode::kSubtract, a, b); }
  XlaOp Mul(XlaOp a, XlaOp b) { return Binary(Opcode::kMultiply, a, b); }
  XlaOp Div(XlaOp a, XlaOp b) { return Binary(Opcode::kDivide, a, b); }
  XlaOp Rem(XlaOp a, XlaOp b) { return Binary(Opcode::kRemainder, a, b); }
  XlaOp Max(XlaOp a, XlaOp b) { return Binary(Opcode::kMaximum, a, b); }
  XlaOp Min(XlaOp a, XlaOp b) { return Binary(Opcode::kMinimum, a, b); }
  XlaOp Pow(XlaOp a, XlaOp b) { return Binary(Opcode::kPower, a, b); }
  XlaOp And(XlaOp a, XlaOp b) { return Binary(Opcode::kAnd, a, b); }
  XlaOp Or(XlaOp a, XlaOp b) { return Binary(Opcode::kOr, a, b); }
  XlaOp Xor(XlaOp a, XlaOp b) { return Binary(Opcode::kXor, a, b); }
  XlaOp Neg(XlaOp x) { return Unary(Opcode::kNegate, x); }
  XlaOp Abs(XlaOp x) { return Unary(Opcode::kAbs, x); }
  XlaOp Exp(XlaOp x) { return Unary(Opcode::kExp, x); }
  XlaOp Log(XlaOp x) { return Unary(Opcode::kLog, x); }
  XlaOp Tanh(XlaOp x) { return Unary(Opcode::kTanh, x); }
  XlaOp Logistic(XlaOp x) { return Unary(Opcode::kLogistic, x); }
  XlaOp Sqrt(XlaOp x) { return Unary(Opcode::kSqrt, x); }
  XlaOp Rsqrt(XlaOp x) { return Unary(Opcode::kRsqrt, x); }
  XlaOp Not(XlaOp x) { return Unary(Opcode::kNot, x); }
  XlaOp Compare(XlaOp lhs, XlaOp rhs, ComparisonDirection direction,
                ComparisonType type = ComparisonType::kDefault);
  XlaOp Select(XlaOp pred, XlaOp on_true, XlaOp on_false);
  XlaOp Clamp(XlaOp min, XlaOp x, XlaOp max);
  XlaOp Convert(XlaOp x, PrimitiveType type);

  // ---- Shapes ---------------------------------------------------------
  // Operand dim i becomes output dim broadcast_dimensions[i].
  XlaOp Broadcast(XlaOp x, std::vector<int64_t> out_dims,
                  std::vector<int64_t> broadcast_dimensions);
  XlaOp Reshape(XlaOp x, std::vector<int64_t> dims);
  XlaOp Transpose(XlaOp x, std::vector<int64_t> permutation);
  XlaOp Slice(XlaOp x, std::vector<int64_t> starts, std::vector<int64_t> limits,
              std::vector<int64_t> strides = {});
  XlaOp Concatenate(const std::vector<XlaOp>& operands, int64_t dimension);
  XlaOp Pad(XlaOp x, XlaOp padding_value,
            std::vector<PaddingDimension> padding);
  XlaOp Reverse(XlaOp x, std::vector<int64_t> dimensions);
  XlaOp DynamicSlice(XlaOp x, const std::vector<XlaOp>& start_indices,
                     std::vector<int64_t> sizes);
  XlaOp DynamicUpdateSlice(XlaOp x, XlaOp update,
                           const std::vector<XlaOp>& start_indices);

  // ---- Contractions and reductions -------------------------------------
  // The result type is the lhs's unless `result_type` is given.
  XlaOp Dot(XlaOp lhs, XlaOp rhs, DotDimensionNumbers dims,
            std::optional<PrimitiveType> result_type = std::nullopt);
  XlaOp Reduce(XlaOp x, XlaOp init, const ComputationBuilder& reducer,
               std::vector<int64_t> dimensions);
  // Variadic reduce (e.g. argmax): a tuple of one result per input.
  XlaOp Reduce(const std::vector<XlaOp>& inputs,
               const std::vector<XlaOp>& inits,
               const ComputationBuilder& reducer,
               std::vector<int64_t> dimensions);

  // ---- Structure and control flow ---------------------------------------
  XlaOp Tuple(const std::vector<XlaOp>& elements);
  XlaOp GetTupleElement(XlaOp tuple, int64_t index);
  XlaOp Call(const ComputationBuilder& callee, const std::vector<XlaOp>& args);
  XlaOp While(const ComputationBuilder& condition,
              const ComputationBuilder& body, XlaOp init);
  // branch_index s32 (any number of branches) or pred (true, false).
  // Branch b takes branch_operands[b].
  XlaOp Conditional(XlaOp branch_index,
                    const std::vector<ComputationBuilder>& branches,
                    const std::vector<XlaOp>& branch_operands);

  // ---- Collectives ------------------------------------------------------
  XlaOp AllReduce(XlaOp x, const ComputationBuilder& reducer,
                  const CollectiveOptions& options = {});
  // Tuple form: one all-reduce over several arrays.
  XlaOp AllReduce(const std::vector<XlaOp>& xs,
                  const ComputationBuilder& reducer,
                  const CollectiveOptions& options = {});
  XlaOp AllGather(XlaOp x, int64_t dimension,
                  const CollectiveOptions& options = {});
  XlaOp ReduceScatter(XlaOp x, const ComputationBuilder& reducer,
                      int64_t dimension, const CollectiveOptions& options = {});
  // Array form: `split_dimension` is cut into one chunk per group member
  // and the chunks received are concatenated along it.
  XlaOp AllToAll(XlaOp x, int64_t split_dimension,
                 const CollectiveOptions& options = {});
  // Tuple form: operand i goes to group member i.
  XlaOp AllToAll(const std::vector<XlaOp>& xs,
                 const CollectiveOptions& options = {});
  XlaOp CollectivePermute(
      XlaOp x, std::vector<std::pair<int64_t, int64_t>> source_target_pairs,
      std::optional<int64_t> channel_id = std::nullopt);

  // ---- Anything else ----------------------------------------------------
  // An op of any supported opcode (gather, scatter, sort, convolution,
  // reduce-window, ...): `configure` sets its attributes (and, for ops whose
  // result is not derivable, its `shape`) after operands and called
  // computations are filled in; the shape is then inferred and checked.
  // `configure` must not change the opcode, operands or called computations.
  XlaOp Generic(Opcode opcode, const std::vector<XlaOp>& operands,
                const std::function<void(Instruction&)>& configure,
                const std::vector<ComputationBuilder>& called = {});

 private:
  friend class ModuleBuilder;
  ComputationBuilder(std::shared_ptr<builder_internal::ModuleState> state,
                     int64_t index)
      : state_(std::move(state)), index_(index) {}

  // Resolves operands and callees, runs `configure`, infers the shape and
  // adds the instruction; records the first error.
  XlaOp Emit(Opcode opcode, const std::vector<XlaOp>& operands,
             const std::function<void(Instruction&)>& configure,
             const std::vector<const ComputationBuilder*>& called = {});
  XlaOp EmitCollective(Opcode opcode, const std::vector<XlaOp>& operands,
                       const CollectiveOptions& options,
                       const ComputationBuilder* reducer,
                       std::vector<int64_t> dimensions);
  Computation* computation() const;

  std::shared_ptr<builder_internal::ModuleState> state_;
  int64_t index_ = -1;
};

// Builds a module. Move-only; Build() consumes it.
class ModuleBuilder {
 public:
  explicit ModuleBuilder(std::string name);
  ModuleBuilder(ModuleBuilder&&) = default;
  ModuleBuilder& operator=(ModuleBuilder&&) = default;
  ModuleBuilder(const ModuleBuilder&) = delete;
  ModuleBuilder& operator=(const ModuleBuilder&) = delete;
  ~ModuleBuilder();

  // A computation to be called (reducer, loop body, branch, callee).
  ComputationBuilder NewComputation(std::string name);
  // The entry computation; exactly one per module.
  ComputationBuilder NewEntry(std::string name);

  // Device counts of the program; set them before adding collectives whose
  // replica_groups are empty, so their shapes infer with the right size.
  void set_num_partitions(int64_t n);
  void set_replica_count(int64_t n);

  // The first error recorded so far.
  absl::Status status() const;

  // The module, with computations ordered callees first, after
  // VerifyModule; or the first error.
  absl::StatusOr<std::unique_ptr<Module>> Build() &&;

 private:
  std::shared_ptr<builder_internal::ModuleState> state_;
};

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_BUILDER_H_
