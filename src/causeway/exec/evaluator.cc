#include "causeway/exec/evaluator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/memory_account.h"
#include "causeway/base/status.h"
#include "causeway/exec/fused_loop.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/multiply_add.h"
#include "causeway/hlo/custom_call.h"

namespace causeway::exec {

using hlo::Instruction;
using hlo::Literal;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

namespace {

constexpr int32_t kNoSlot = -1;

}  // namespace

// What running one computation takes, worked out once in Create: the order
// of its instructions, where each operand's value sits (an index into the
// frame of value slots, one slot per instruction), which values die after
// each step, and the plans of the computations it calls. Running then does
// no lookups and no string work per instruction.
class ExecutionPlan {
 public:
  struct Computation;
  std::vector<std::unique_ptr<Computation>> plans;
  std::unordered_map<const hlo::Computation*, const Computation*>
      by_computation;
  const Computation* entry = nullptr;
  int32_t collective_count = 0;
  int32_t dot_add_fusions = 0;
  int64_t num_partitions = 1;
  int64_t replica_count = 1;
};

struct ExecutionPlan::Computation {
  struct Step {
    enum class Kind : uint8_t {
      kKernel,         // The instruction's own kernel.
      kDotAccumulate,  // A dot whose last operand is the accumulator.
      kForward,        // An add fused into its dot: passes the dot's value.
      kMultiplyAdd,    // An add contracted with its multiply (multiply_add.h).
    };
    const Instruction* instruction = nullptr;
    Opcode opcode = Opcode::kUnknown;
    Kind kind = Kind::kKernel;
    // A get-tuple-element that may move its element out of an owned tuple:
    // nothing reads the tuple later except other get-tuple-elements of
    // other indices (a loop body taking its state apart).
    bool moves_tuple_element = false;
    int32_t result = kNoSlot;
    // Ranges into the plan's flat arrays.
    int32_t operands_begin = 0;
    int32_t operands_end = 0;
    int32_t releases_begin = 0;
    int32_t releases_end = 0;
    int32_t called_begin = 0;
    int32_t called_end = 0;
    // Index of this collective among the module's collectives (for the
    // per-run execution counts), or -1.
    int32_t collective_index = -1;
    // kMultiplyAdd: index into multiply_adds.
    int32_t multiply_add = -1;
  };

  const hlo::Computation* computation = nullptr;
  std::vector<Step> steps;
  std::vector<int32_t> operand_slots;
  // Parallel to operand_slots: this occurrence is the slot's last use, so
  // the value may be moved out instead of copied.
  std::vector<uint8_t> operand_movable;
  std::vector<int32_t> release_slots;
  std::vector<const Computation*> called;
  std::vector<int32_t> parameter_slots;  // By parameter number.
  // The contractions of a fusion body (kMultiplyAdd steps read a, b, c).
  std::vector<MultiplyAdd> multiply_adds;
  int32_t root_slot = kNoSlot;
  int32_t slot_count = 0;
  // A fusion body compiled to chunked loops (fused_loop.h), when it can
  // be; fusion steps then run it instead of the op-by-op plan.
  std::unique_ptr<FusedLoop> fused;
  // For a body whose root is a dynamic-update-slice of parameter k: k. A
  // fusion step that holds the last use of its operand k runs the body op
  // by op and hands that operand over, so the update is written in place
  // (XLA's in-place dynamic-update-slice fusion: a scan's stacked outputs
  // are not copied every iteration). -1 otherwise.
  int64_t in_place_parameter = -1;
};

namespace {

std::string Str(std::string_view s) { return std::string(s); }

bool IsSupported(const Instruction& instruction) {
  if (instruction.opcode == Opcode::kCustomCall) {
    return hlo::IsSupportedCustomCall(instruction.custom_call_target);
  }
  return instruction.opcode != Opcode::kUnknown;
}

// Operand counts for the opcodes whose arity is fixed; -1 for variadic.
int FixedArity(Opcode opcode) {
  if (hlo::IsElementwiseUnary(opcode)) return 1;
  if (hlo::IsElementwiseBinary(opcode)) return 2;
  switch (opcode) {
    case Opcode::kParameter:
    case Opcode::kConstant:
    case Opcode::kIota:
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
      return 0;
    case Opcode::kGetTupleElement:
    case Opcode::kWhile:
    case Opcode::kCopy:
    case Opcode::kBitcast:
    case Opcode::kConvert:
    case Opcode::kBitcastConvert:
    case Opcode::kReducePrecision:
    case Opcode::kReal:
    case Opcode::kImag:
    case Opcode::kFft:
    case Opcode::kBroadcast:
    case Opcode::kReshape:
    case Opcode::kTranspose:
    case Opcode::kSlice:
    case Opcode::kReverse:
    case Opcode::kRngBitGenerator:
    case Opcode::kCollectivePermute:
      return 1;
    case Opcode::kCompare:
    case Opcode::kComplex:
    case Opcode::kPad:
    case Opcode::kGather:
    case Opcode::kDot:
    case Opcode::kConvolution:
      return 2;
    case Opcode::kSelect:
    case Opcode::kClamp:
    case Opcode::kSelectAndScatter:
      return 3;
    default:
      return -1;
  }
}

// The called computations each opcode needs (at least).
int RequiredCalls(Opcode opcode) {
  switch (opcode) {
    case Opcode::kFusion:
    case Opcode::kCall:
    case Opcode::kAllReduce:
    case Opcode::kReduceScatter:
    case Opcode::kReduce:
    case Opcode::kReduceWindow:
    case Opcode::kScatter:
    case Opcode::kSort:
    case Opcode::kMap:
    case Opcode::kConditional:
      return 1;
    case Opcode::kWhile:
    case Opcode::kSelectAndScatter:
      return 2;
    default:
      return 0;
  }
}

absl::Status CheckInstruction(const Instruction& instruction,
                              const hlo::Computation& computation) {
  auto fail = [&](absl::StatusCode code, std::string message) {
    return absl::Status(
        code, absl::StrCat(Where(instruction, computation), ": ", message));
  };
  if (!IsSupported(instruction)) {
    if (instruction.opcode == Opcode::kCustomCall) {
      return hlo::UnsupportedCustomCall(instruction);
    }
    return fail(absl::StatusCode::kUnimplemented,
                absl::StrCat("op '", instruction.opcode_name,
                             "' is not supported"));
  }
  const int arity = FixedArity(instruction.opcode);
  if (arity >= 0 && instruction.operand_count() != arity) {
    return fail(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat(Str(hlo::OpcodeName(instruction.opcode)), " takes ", arity,
                     " operands, got ", instruction.operand_count()));
  }
  const int calls = RequiredCalls(instruction.opcode);
  if (static_cast<int>(instruction.called_computations.size()) < calls) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat(Str(hlo::OpcodeName(instruction.opcode)),
                             " needs ", calls, " called computation(s)"));
  }
  for (const hlo::Computation* called : instruction.called_computations) {
    if (called == nullptr) {
      return fail(absl::StatusCode::kInvalidArgument,
                  "calls a computation that does not exist");
    }
  }
  for (const Instruction* operand : instruction.operands) {
    if (operand == nullptr) {
      return fail(absl::StatusCode::kInvalidArgument, "has a missing operand");
    }
  }
  switch (instruction.opcode) {
    case Opcode::kConstant:
      if (!instruction.literal.has_value()) {
        return fail(absl::StatusCode::kInvalidArgument,
                    "constant has no value (elided as {...}? print the "
                    "module with large constants)");
      }
      break;
    case Opcode::kConditional:
      if (instruction.operand_count() !=
          static_cast<int64_t>(instruction.called_computations.size()) + 1) {
        return fail(absl::StatusCode::kInvalidArgument,
                    absl::StrCat("conditional has ",
                                 instruction.called_computations.size(),
                                 " branches but ", instruction.operand_count(),
                                 " operands"));
      }
      break;
    case Opcode::kGetTupleElement:
      if (instruction.tuple_index < 0) {
        return fail(absl::StatusCode::kInvalidArgument,
                    "get-tuple-element without an index");
      }
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

// Orders `computation`'s instructions so that operands come first
// (definition order where it already is).
absl::StatusOr<std::vector<const Instruction*>> PostOrder(
    const hlo::Computation& computation,
    const std::unordered_map<const Instruction*, int32_t>& slot_of) {
  const auto& instructions = computation.instructions();
  std::vector<uint8_t> state(instructions.size(), 0);  // 1 visiting, 2 done
  std::vector<const Instruction*> order;
  order.reserve(instructions.size());
  std::vector<std::pair<const Instruction*, size_t>> stack;
  for (const auto& start : instructions) {
    if (state[slot_of.at(start.get())] == 2) continue;
    stack.push_back({start.get(), 0});
    state[slot_of.at(start.get())] = 1;
    while (!stack.empty()) {
      auto& [instruction, next] = stack.back();
      if (next < instruction->operands.size()) {
        const Instruction* operand = instruction->operands[next++];
        auto it = slot_of.find(operand);
        if (it == slot_of.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(*instruction, computation), ": operand '",
                           operand->name, "' belongs to another computation"));
        }
        if (state[it->second] == 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(*instruction, computation), ": operands form a cycle"));
        }
        if (state[it->second] == 0) {
          state[it->second] = 1;
          stack.push_back({operand, 0});
        }
        continue;
      }
      state[slot_of.at(instruction)] = 2;
      order.push_back(instruction);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

namespace {

using Plan = ExecutionPlan::Computation;
using PlanStep = Plan::Step;

// Per-run state: what one call of Run needs beyond the immutable plan.
struct RunState {
  const ExecutionPlan* plan = nullptr;
  const RunContext* context = nullptr;
  Collectives* collectives = nullptr;
  std::unique_ptr<InProcessCollectives> local_collectives;  // 1-device grid.
  std::vector<int64_t> collective_counts;
  ComputationRunner runner;
  // Charged with every value the run allocates (RunContext's limit).
  std::shared_ptr<MemoryAccount> memory;
};

// A value handed to a called computation. Borrowed (`owned` null): the
// caller keeps it alive and unchanged for the whole call. Given (`owned`
// set, pointing at the same value): the callee may move it away.
struct Argument {
  const Literal* value = nullptr;
  Literal* owned = nullptr;
};
using Arguments = absl::InlinedVector<Argument, 8>;

// The values of one running computation, one slot per instruction. A slot
// either owns its value or borrows it (a parameter borrowed from the
// caller, a constant from the module), so that passing values down to
// fusions and loop conditions copies nothing.
class Frame {
 public:
  explicit Frame(int32_t slot_count)
      : owned_(static_cast<size_t>(slot_count)),
        values_(static_cast<size_t>(slot_count), nullptr) {}
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  const Literal& value(int32_t slot) const { return *values_[slot]; }
  const Literal* pointer(int32_t slot) const { return values_[slot]; }
  bool owns(int32_t slot) const { return values_[slot] == &owned_[slot]; }

  void Set(int32_t slot, Literal value) {
    owned_[slot] = std::move(value);
    values_[slot] = &owned_[slot];
  }
  void Borrow(int32_t slot, const Literal* value) { values_[slot] = value; }
  void Receive(int32_t slot, const Argument& argument) {
    if (argument.owned != nullptr) {
      Set(slot, std::move(*argument.owned));
    } else {
      Borrow(slot, argument.value);
    }
  }
  // The value for a consumer that keeps it: moved out when `movable` (its
  // last use) and owned here, else a copy (which shares the data).
  Literal Take(int32_t slot, bool movable) {
    if (movable && owns(slot)) {
      values_[slot] = nullptr;
      return std::move(owned_[slot]);
    }
    return *values_[slot];
  }
  Literal* Mutable(int32_t slot) {
    return owns(slot) ? &owned_[slot] : nullptr;
  }
  Argument Pass(int32_t slot, bool movable) {
    return {values_[slot], movable && owns(slot) ? &owned_[slot] : nullptr};
  }
  void Release(int32_t slot) {
    if (owns(slot)) owned_[slot] = Literal();
    values_[slot] = nullptr;
  }

 private:
  absl::InlinedVector<Literal, 8> owned_;
  absl::InlinedVector<const Literal*, 8> values_;
};

absl::StatusOr<Literal> RunPlan(const Plan& plan,
                                std::span<const Argument> arguments,
                                RunState& state);

Literal TakeOperand(Frame& frame, const Plan& plan, int32_t operand_index) {
  return frame.Take(plan.operand_slots[operand_index],
                    plan.operand_movable[operand_index] != 0);
}

std::vector<Literal> TakeOperands(Frame& frame, const Plan& plan,
                                  const PlanStep& step) {
  std::vector<Literal> values;
  values.reserve(step.operands_end - step.operands_begin);
  for (int32_t i = step.operands_begin; i < step.operands_end; ++i) {
    values.push_back(TakeOperand(frame, plan, i));
  }
  return values;
}

Argument PassOperand(Frame& frame, const Plan& plan, int32_t operand_index) {
  return frame.Pass(plan.operand_slots[operand_index],
                    plan.operand_movable[operand_index] != 0);
}

Arguments PassOperands(Frame& frame, const Plan& plan, const PlanStep& step) {
  Arguments arguments;
  for (int32_t i = step.operands_begin; i < step.operands_end; ++i) {
    arguments.push_back(PassOperand(frame, plan, i));
  }
  return arguments;
}

// The bytes of every array in `shape`.
int64_t TotalBytes(const Shape& shape) {
  if (shape.IsTuple()) {
    int64_t total = 0;
    for (const Shape& element : shape.tuple_shapes()) {
      total += TotalBytes(element);
    }
    return total;
  }
  return shape.IsArray() ? shape.ByteSize() : 0;
}

absl::StatusOr<Literal> RunCollective(const Plan& plan, const PlanStep& step,
                                      Frame& frame, RunState& state) {
  const RunContext& context = *state.context;
  Collectives* collectives = state.collectives;
  if (collectives == nullptr) {
    if (state.plan->num_partitions * state.plan->replica_count != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the program spans ", state.plan->num_partitions, " partitions × ",
          state.plan->replica_count,
          " replicas but the run has no collectives to reach its peers"));
    }
    if (state.local_collectives == nullptr) {
      state.local_collectives = std::make_unique<InProcessCollectives>();
    }
    collectives = state.local_collectives.get();
  }
  CollectiveOp op;
  op.instruction = step.instruction;
  op.partition_id = context.partition_id;
  op.replica_id = context.replica_id;
  op.num_partitions = state.plan->num_partitions;
  op.replica_count = state.plan->replica_count;
  op.key.run_id = context.run_id;
  op.key.instruction_id = step.instruction->unique_id;
  op.key.execution_count = state.collective_counts[step.collective_index]++;
  op.run_computation = &state.runner;
  // A collective must not unwind while its peers wait on it: its result is
  // checked against the limit here, and its charges never throw.
  const int64_t result_bytes = TotalBytes(step.instruction->shape);
  if (result_bytes > state.memory->available_bytes()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("its result needs ", result_bytes,
                     " bytes, more than the run's memory limit of ",
                     state.memory->limit_bytes(), " bytes allows (",
                     state.memory->live_bytes(), " bytes held)"));
  }
  ScopedNonThrowingCharges non_throwing;
  switch (step.opcode) {
    case Opcode::kAllReduce:
      return collectives->AllReduce(op, TakeOperands(frame, plan, step));
    case Opcode::kAllGather:
      return collectives->AllGather(op, TakeOperands(frame, plan, step));
    case Opcode::kReduceScatter:
      return collectives->ReduceScatter(op, TakeOperands(frame, plan, step));
    case Opcode::kAllToAll:
      return collectives->AllToAll(op, TakeOperands(frame, plan, step));
    case Opcode::kCollectivePermute:
      return collectives->CollectivePermute(
          op, TakeOperand(frame, plan, step.operands_begin));
    default:
      return absl::InternalError("not a collective");
  }
}

absl::StatusOr<Literal> RunConditional(const Plan& plan, const PlanStep& step,
                                       Frame& frame, RunState& state) {
  const Literal& selector =
      frame.value(plan.operand_slots[step.operands_begin]);
  const Shape& shape = selector.shape();
  if (!shape.IsArray() || shape.rank() != 0 ||
      (shape.type() != PrimitiveType::kPred &&
       shape.type() != PrimitiveType::kS32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("conditional selector must be pred[] or s32[], got ",
                     shape.ToString(false)));
  }
  const int32_t branches = step.called_end - step.called_begin;
  int32_t branch = 0;
  if (shape.type() == PrimitiveType::kPred) {
    if (branches != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("a pred conditional needs 2 branches, has ", branches));
    }
    branch = selector.data<bool>()[0] ? 0 : 1;
  } else {
    const int32_t index = selector.data<int32_t>()[0];
    // Out of range runs the last branch, as XLA does.
    branch = (index < 0 || index >= branches) ? branches - 1 : index;
  }
  const Argument argument =
      PassOperand(frame, plan, step.operands_begin + 1 + branch);
  return RunPlan(*plan.called[step.called_begin + branch],
                 std::span<const Argument>(&argument, 1), state);
}

absl::StatusOr<Literal> RunWhile(const Plan& plan, const PlanStep& step,
                                 Frame& frame, RunState& state) {
  const Plan& condition = *plan.called[step.called_begin];
  const Plan& body = *plan.called[step.called_begin + 1];
  Literal loop_state = TakeOperand(frame, plan, step.operands_begin);
  const std::atomic<bool>* cancelled = state.context->cancelled;
  const Collectives* collectives = state.collectives;
  while (true) {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError("the run was cancelled");
    }
    if (collectives != nullptr) {
      if (absl::Status peers = collectives->Cancelled(); !peers.ok()) {
        return absl::Status(
            peers.code(),
            absl::StrCat("stopped because a peer of the run failed: ",
                         peers.message()));
      }
    }
    const Argument borrowed{&loop_state, nullptr};
    CW_ASSIGN_OR_RETURN(
        Literal keep_going,
        RunPlan(condition, std::span<const Argument>(&borrowed, 1), state));
    if (!keep_going.shape().IsArray() ||
        keep_going.shape().type() != PrimitiveType::kPred ||
        keep_going.shape().ElementCount() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "while condition returned ", keep_going.shape().ToString(false),
          ", expected pred[]"));
    }
    if (!keep_going.data<bool>()[0]) break;
    const Argument given{&loop_state, &loop_state};
    CW_ASSIGN_OR_RETURN(
        loop_state, RunPlan(body, std::span<const Argument>(&given, 1), state));
  }
  return loop_state;
}

// Evaluates one step. Returns the result, or sets it into the frame itself
// (returning nullopt-like empty status with `borrowed` set) for steps whose
// value is borrowed.
absl::StatusOr<Literal> RunStep(const Plan& plan, const PlanStep& step,
                                Frame& frame, RunState& state) {
  const Instruction& instr = *step.instruction;
  auto operand_pointers = [&]() {
    absl::InlinedVector<const Literal*, 8> pointers;
    for (int32_t i = step.operands_begin; i < step.operands_end; ++i) {
      pointers.push_back(frame.pointer(plan.operand_slots[i]));
    }
    return pointers;
  };
  if (step.kind == PlanStep::Kind::kForward) {
    return TakeOperand(frame, plan, step.operands_begin);
  }
  if (step.kind == PlanStep::Kind::kMultiplyAdd) {
    const int32_t first = step.operands_begin;
    return EvalMultiplyAdd(instr, plan.multiply_adds[step.multiply_add],
                           frame.value(plan.operand_slots[first]),
                           frame.value(plan.operand_slots[first + 1]),
                           frame.value(plan.operand_slots[first + 2]));
  }
  if (step.kind == PlanStep::Kind::kDotAccumulate) {
    const int32_t first = step.operands_begin;
    return EvalDotAccumulate(instr, frame.value(plan.operand_slots[first]),
                             frame.value(plan.operand_slots[first + 1]),
                             TakeOperand(frame, plan, first + 2));
  }
  switch (step.opcode) {
    case Opcode::kTuple:
      return Literal::MakeTuple(TakeOperands(frame, plan, step));
    case Opcode::kGetTupleElement: {
      const int32_t index = step.operands_begin;
      const int32_t slot = plan.operand_slots[index];
      const Literal& tuple = frame.value(slot);
      if (!tuple.shape().IsTuple() ||
          instr.tuple_index >= static_cast<int64_t>(tuple.elements().size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("index ", instr.tuple_index, " is out of range for ",
                         tuple.shape().ToString(false)));
      }
      Literal* owned = frame.Mutable(slot);
      if ((plan.operand_movable[index] || step.moves_tuple_element) &&
          owned != nullptr) {
        return std::move(owned->mutable_elements()[instr.tuple_index]);
      }
      return tuple.elements()[instr.tuple_index];
    }
    case Opcode::kFusion: {
      const Plan& body = *plan.called[step.called_begin];
      if (body.in_place_parameter >= 0) {
        const int32_t index =
            step.operands_begin + static_cast<int32_t>(body.in_place_parameter);
        if (plan.operand_movable[index] &&
            frame.owns(plan.operand_slots[index])) {
          const Arguments arguments = PassOperands(frame, plan, step);
          return RunPlan(body, arguments, state);
        }
      }
      if (body.fused != nullptr) {
        const auto arguments = operand_pointers();
        if (body.fused->CanRun(arguments)) {
          return body.fused->Run(arguments, state.runner);
        }
      }
      const Arguments arguments = PassOperands(frame, plan, step);
      return RunPlan(body, arguments, state);
    }
    case Opcode::kCall: {
      const Arguments arguments = PassOperands(frame, plan, step);
      return RunPlan(*plan.called[step.called_begin], arguments, state);
    }
    case Opcode::kWhile:
      return RunWhile(plan, step, frame, state);
    case Opcode::kConditional:
      return RunConditional(plan, step, frame, state);
    case Opcode::kOptimizationBarrier:
      if (step.operands_end - step.operands_begin == 1) {
        return TakeOperand(frame, plan, step.operands_begin);
      }
      return Literal::MakeTuple(TakeOperands(frame, plan, step));
    // Ids within the module's device grid: a module compiled for one
    // partition (or replica) reads 0 on every device that runs a copy of
    // it, as XLA's do (a copy is a one-device execution).
    case Opcode::kPartitionId:
      return Literal::Scalar(
          PrimitiveType::kU32,
          state.plan->num_partitions == 1 ? 0 : state.context->partition_id);
    case Opcode::kReplicaId:
      return Literal::Scalar(
          PrimitiveType::kU32,
          state.plan->replica_count == 1 ? 0 : state.context->replica_id);
    case Opcode::kAfterAll:
      return Literal(Shape::Token());
    case Opcode::kDynamicUpdateSlice: {
      const int32_t first = step.operands_begin;
      if (!plan.operand_movable[first] ||
          !frame.owns(plan.operand_slots[first])) {
        return EvalKernel(instr, operand_pointers(), state.runner);
      }
      // The last use of the operand: write the update into it.
      auto pointers = operand_pointers();
      Literal target = TakeOperand(frame, plan, first);
      CW_RETURN_IF_ERROR(DynamicUpdateSliceInPlace(
          instr, target, *pointers[1],
          std::span<const Literal* const>(pointers).subspan(2)));
      return target;
    }
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return RunCollective(plan, step, frame, state);
    default: {
      auto pointers = operand_pointers();
      return EvalKernel(instr, pointers, state.runner);
    }
  }
}

// RunStep, with an allocation refused by the run's memory account (or by
// the allocator itself) turned into ResourceExhausted; RunPlan names the
// instruction. Nothing else throws: kernels report errors as statuses.
absl::StatusOr<Literal> RunStepWithinMemory(const Plan& plan,
                                            const PlanStep& step, Frame& frame,
                                            RunState& state) {
  try {
    return RunStep(plan, step, frame, state);
  } catch (const MemoryLimitExceeded& exceeded) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "needs a buffer of ", exceeded.requested_bytes(),
        " bytes, more than the run's memory limit of ", exceeded.limit_bytes(),
        " bytes allows (", exceeded.live_bytes(), " bytes held)"));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the allocator has no memory left for it (the run "
                     "holds ",
                     state.memory->live_bytes(), " bytes)"));
  }
}

bool ShapesAgree(const Shape& expected, const Shape& actual) {
  if (expected.IsArray()) {
    return actual.IsArray() && expected.type() == actual.type() &&
           expected.dims() == actual.dims();
  }
  return expected.Compatible(actual);
}

absl::StatusOr<Literal> RunPlan(const Plan& plan,
                                std::span<const Argument> arguments,
                                RunState& state) {
  const hlo::Computation& computation = *plan.computation;
  if (arguments.size() != plan.parameter_slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "computation '", computation.name(), "' takes ",
        plan.parameter_slots.size(), " arguments, got ", arguments.size()));
  }
  Frame frame(plan.slot_count);
  for (size_t i = 0; i < arguments.size(); ++i) {
    frame.Receive(plan.parameter_slots[i], arguments[i]);
  }
  for (const PlanStep& step : plan.steps) {
    if (step.opcode == Opcode::kConstant) {
      // Constants are read in place from the module.
      frame.Borrow(step.result, &*step.instruction->literal);
    } else {
      absl::StatusOr<Literal> result =
          RunStepWithinMemory(plan, step, frame, state);
      if (!result.ok()) {
        return Annotate(result.status(), *step.instruction, computation);
      }
      if (!ShapesAgree(step.instruction->shape, result->shape())) {
        return absl::InternalError(absl::StrCat(
            Where(*step.instruction, computation), ": produced ",
            result->shape().ToString(false), ", the instruction declares ",
            step.instruction->shape.ToString(false)));
      }
      frame.Set(step.result, *std::move(result));
    }
    for (int32_t i = step.releases_begin; i < step.releases_end; ++i) {
      frame.Release(plan.release_slots[i]);
    }
  }
  return frame.Take(plan.root_slot, /*movable=*/true);
}

// Whether `instr` is an add of its two operands: an add, or a fusion whose
// body is that add alone (XLA wraps a lone add in a loop fusion, as it does
// for the weight-gradient accumulation of a scan's backward loop).
bool IsAddOfOperands(const Instruction& instr) {
  if (instr.opcode == Opcode::kAdd) return instr.operands.size() == 2;
  if (instr.opcode != Opcode::kFusion || instr.operands.size() != 2 ||
      instr.called_computations.size() != 1) {
    return false;
  }
  const hlo::Computation& body = *instr.called_computations[0];
  const Instruction* root = body.root();
  if (body.instructions().size() != 3 || body.parameter_count() != 2 ||
      root == nullptr || root->opcode != Opcode::kAdd ||
      root->operands.size() != 2 || !root->shape.IsArray() ||
      root->shape.type() != instr.shape.type() ||
      root->shape.dims() != instr.shape.dims()) {
    return false;
  }
  // add(p0, p1) or add(p1, p0): the same sum either way.
  const Instruction* x = root->operands[0];
  const Instruction* y = root->operands[1];
  return x->opcode == Opcode::kParameter && y->opcode == Opcode::kParameter &&
         x->parameter_number + y->parameter_number == 1 &&
         x->parameter_number * y->parameter_number == 0;
}

// Dot-add output fusion: add(x, d) or add(d, x) (or a fusion that is only
// that add), where d is a dot that EvalDotAccumulate can run and the add is
// its only user, becomes one step:
// d accumulates into x (its operands become lhs, rhs, x), and the add just
// forwards d's value (its operands become d alone). x must be ready before
// d runs: a parameter, or earlier in `order`. Rewrites `operands_of` and
// `kind_of` (by slot); returns how many pairs it fused.
int32_t FuseDotAdds(
    const hlo::Computation& computation,
    const std::vector<const Instruction*>& order,
    const std::unordered_map<const Instruction*, int32_t>& slot_of,
    std::vector<std::vector<const Instruction*>>& operands_of,
    std::vector<PlanStep::Kind>& kind_of) {
  std::vector<int32_t> users(slot_of.size(), 0);
  std::vector<int32_t> position(slot_of.size(), -1);
  for (const auto& instruction : computation.instructions()) {
    for (const Instruction* operand : instruction->operands) {
      ++users[slot_of.at(operand)];
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    position[slot_of.at(order[i])] = static_cast<int32_t>(i);
  }
  int32_t fused = 0;
  for (const Instruction* add : order) {
    if (!IsAddOfOperands(*add) || add->operands[0] == add->operands[1] ||
        !add->shape.IsArray()) {
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      const Instruction* dot = add->operands[side];
      const Instruction* addend = add->operands[1 - side];
      const int32_t dot_slot = slot_of.at(dot);
      if (!CanAccumulateDot(*dot) || dot == computation.root() ||
          users[dot_slot] != 1 ||
          kind_of[dot_slot] != PlanStep::Kind::kKernel ||
          dot->shape.type() != add->shape.type() ||
          dot->shape.dims() != add->shape.dims() || !addend->shape.IsArray() ||
          addend->shape.type() != add->shape.type() ||
          addend->shape.dims() != add->shape.dims()) {
        continue;
      }
      if (addend->opcode != Opcode::kParameter &&
          position[slot_of.at(addend)] > position[dot_slot]) {
        continue;
      }
      operands_of[dot_slot].push_back(addend);
      kind_of[dot_slot] = PlanStep::Kind::kDotAccumulate;
      operands_of[slot_of.at(add)] = {dot};
      kind_of[slot_of.at(add)] = PlanStep::Kind::kForward;
      ++fused;
      break;
    }
  }
  return fused;
}

// Refuses a module whose computations nest deeper than kMaxNestingDepth
// (the entry is level 1; an instruction calling a computation adds one), so
// that running it cannot overflow the stack. Iterative: the module may nest
// deeper than this thread's stack allows to recurse.
absl::Status CheckNestingDepth(const hlo::Module& module) {
  // height[c]: the levels from c down to its deepest callee (c counts 1);
  // 0 while c is being visited.
  std::unordered_map<const hlo::Computation*, int64_t> height;
  struct Visit {
    const hlo::Computation* computation;
    size_t instruction = 0;
    size_t callee = 0;
    int64_t height = 1;
  };
  std::vector<Visit> stack = {{module.entry()}};
  height[module.entry()] = 0;
  while (!stack.empty()) {
    Visit& top = stack.back();
    const auto& instructions = top.computation->instructions();
    if (top.instruction >= instructions.size()) {
      height[top.computation] = top.height;
      const int64_t done = top.height;
      stack.pop_back();
      if (!stack.empty()) {
        stack.back().height = std::max(stack.back().height, done + 1);
      }
      continue;
    }
    const Instruction& instruction = *instructions[top.instruction];
    if (top.callee >= instruction.called_computations.size()) {
      ++top.instruction;
      top.callee = 0;
      continue;
    }
    const hlo::Computation* callee =
        instruction.called_computations[top.callee++];
    if (callee == nullptr) continue;  // CheckInstruction reports it.
    auto [it, fresh] = height.try_emplace(callee, 0);
    if (fresh) {
      stack.push_back({callee});
    } else if (it->second == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(instruction, *top.computation), ": calls '", callee->name(),
          "', which is already running (the "
          "computations call each other in a cycle)"));
    } else {
      top.height = std::max(top.height, it->second + 1);
    }
  }
  const int64_t depth = height[module.entry()];
  if (depth <= Evaluator::kMaxNestingDepth) return absl::OkStatus();
  // Walk down the deepest chain to the call that passes the limit.
  const hlo::Computation* computation = module.entry();
  for (int64_t level = 1; level <= Evaluator::kMaxNestingDepth; ++level) {
    const Instruction* call = nullptr;
    const hlo::Computation* deepest = nullptr;
    for (const auto& instruction : computation->instructions()) {
      for (const hlo::Computation* callee : instruction->called_computations) {
        if (callee != nullptr && height[callee] == height[computation] - 1) {
          call = instruction.get();
          deepest = callee;
          break;
        }
      }
      if (deepest != nullptr) break;
    }
    if (deepest == nullptr) break;
    if (level == Evaluator::kMaxNestingDepth) {
      return absl::UnimplementedError(absl::StrCat(
          Where(*call, *computation), ": calls '", deepest->name(),
          "' at nesting level ", level + 1, "; module '", module.name(),
          "' nests its computations ", depth, " levels deep, and at most ",
          Evaluator::kMaxNestingDepth, " are supported"));
    }
    computation = deepest;
  }
  return absl::UnimplementedError(
      absl::StrCat("module '", module.name(), "' nests its computations ",
                   depth, " levels deep, and at most ",
                   Evaluator::kMaxNestingDepth, " are supported"));
}

}  // namespace

Evaluator::Evaluator(const hlo::Module& module,
                     std::unique_ptr<ExecutionPlan> plan)
    : module_(module), plan_(std::move(plan)) {}

Evaluator::~Evaluator() = default;

int64_t Evaluator::num_dot_add_fusions() const {
  return plan_->dot_add_fusions;
}

int64_t Evaluator::num_fused_loops() const {
  return std::count_if(plan_->plans.begin(), plan_->plans.end(),
                       [](const auto& plan) { return plan->fused != nullptr; });
}

absl::StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(
    const hlo::Module& module, Options options) {
  if (module.entry() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("module '", module.name(), "' has no entry computation"));
  }
  auto plan = std::make_unique<ExecutionPlan>();
  plan->num_partitions = std::max<int64_t>(module.num_partitions(), 1);
  plan->replica_count = std::max<int64_t>(module.replica_count(), 1);
  for (const auto& computation : module.computations()) {
    auto computation_plan = std::make_unique<ExecutionPlan::Computation>();
    computation_plan->computation = computation.get();
    plan->by_computation[computation.get()] = computation_plan.get();
    plan->plans.push_back(std::move(computation_plan));
  }
  if (!plan->by_computation.count(module.entry())) {
    return absl::InvalidArgumentError(
        "the entry computation is not in the module");
  }
  plan->entry = plan->by_computation.at(module.entry());
  // Fusion bodies: contracted as XLA does (multiply_add.h), and compiled to
  // fused loops where they can be (the others run op by op).
  std::unordered_set<const hlo::Computation*> fusion_bodies;
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (instruction->opcode == Opcode::kFusion &&
          !instruction->called_computations.empty()) {
        fusion_bodies.insert(instruction->called_computations[0]);
      }
    }
  }

  for (auto& computation_plan : plan->plans) {
    ExecutionPlan::Computation& cp = *computation_plan;
    const hlo::Computation& computation = *cp.computation;
    const auto& instructions = computation.instructions();
    if (computation.root() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "computation '", computation.name(), "' has no root instruction"));
    }
    std::unordered_map<const Instruction*, int32_t> slot_of;
    for (size_t i = 0; i < instructions.size(); ++i) {
      slot_of[instructions[i].get()] = static_cast<int32_t>(i);
    }
    cp.slot_count = static_cast<int32_t>(instructions.size());
    cp.root_slot = slot_of.at(computation.root());
    cp.parameter_slots.assign(computation.parameter_count(), kNoSlot);
    for (int64_t i = 0; i < computation.parameter_count(); ++i) {
      const Instruction* parameter = computation.parameters()[i];
      if (parameter == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "computation '", computation.name(), "' has no parameter ", i));
      }
      cp.parameter_slots[i] = slot_of.at(parameter);
    }
    for (const auto& instruction : instructions) {
      CW_RETURN_IF_ERROR(CheckInstruction(*instruction, computation));
    }
    CW_ASSIGN_OR_RETURN(std::vector<const Instruction*> order,
                        PostOrder(computation, slot_of));

    // What each step reads: the instruction's operands, but for fused
    // dot-add pairs.
    std::vector<std::vector<const Instruction*>> operands_of(cp.slot_count);
    std::vector<PlanStep::Kind> kind_of(cp.slot_count, PlanStep::Kind::kKernel);
    for (const auto& instruction : instructions) {
      operands_of[slot_of.at(instruction.get())].assign(
          instruction->operands.begin(), instruction->operands.end());
    }
    plan->dot_add_fusions +=
        FuseDotAdds(computation, order, slot_of, operands_of, kind_of);
    // Contracted multiply-adds read the multiply's operands and the
    // addend; the multiply (and a negate between) have no step.
    std::vector<int32_t> multiply_add_of(cp.slot_count, -1);
    std::vector<uint8_t> folded_away(cp.slot_count, 0);
    if (fusion_bodies.count(&computation)) {
      for (const auto& [add, contraction] : FindMultiplyAdds(computation)) {
        const int32_t slot = slot_of.at(add);
        if (kind_of[slot] != PlanStep::Kind::kKernel) continue;
        operands_of[slot] = {contraction.multiply->operands[0],
                             contraction.multiply->operands[1],
                             contraction.addend};
        kind_of[slot] = PlanStep::Kind::kMultiplyAdd;
        multiply_add_of[slot] = static_cast<int32_t>(cp.multiply_adds.size());
        cp.multiply_adds.push_back(contraction);
        folded_away[slot_of.at(contraction.multiply)] = 1;
        if (contraction.negate != nullptr) {
          folded_away[slot_of.at(contraction.negate)] = 1;
        }
      }
      order.erase(std::remove_if(order.begin(), order.end(),
                                 [&](const Instruction* instruction) {
                                   return folded_away[slot_of.at(instruction)];
                                 }),
                  order.end());
    }

    // Last use of every slot: the step index of its last reader.
    std::vector<int32_t> last_use(cp.slot_count, -1);
    int32_t step_index = 0;
    for (const Instruction* instruction : order) {
      if (instruction->opcode == Opcode::kParameter) continue;
      for (const Instruction* operand : operands_of[slot_of.at(instruction)]) {
        last_use[slot_of.at(operand)] = step_index;
      }
      ++step_index;
    }
    // Tuples that only get-tuple-elements read, and the step that reads
    // each of their elements last: there the element may be moved out.
    std::vector<uint8_t> only_element_reads(cp.slot_count, 1);
    only_element_reads[cp.root_slot] = 0;
    std::map<std::pair<int32_t, int64_t>, int32_t> last_element_read;
    step_index = 0;
    for (const Instruction* instruction : order) {
      if (instruction->opcode == Opcode::kParameter) continue;
      for (const Instruction* operand :
           operands_of[slot_of.at(instruction)]) {
        const int32_t slot = slot_of.at(operand);
        if (instruction->opcode == Opcode::kGetTupleElement) {
          last_element_read[{slot, instruction->tuple_index}] = step_index;
        } else {
          only_element_reads[slot] = 0;
        }
      }
      ++step_index;
    }
    step_index = 0;
    for (const Instruction* instruction : order) {
      if (instruction->opcode == Opcode::kParameter) continue;
      PlanStep step;
      step.instruction = instruction;
      step.opcode = instruction->opcode;
      step.result = slot_of.at(instruction);
      step.kind = kind_of[step.result];
      step.multiply_add = multiply_add_of[step.result];
      if (instruction->opcode == Opcode::kGetTupleElement &&
          instruction->operands.size() == 1) {
        const int32_t tuple = slot_of.at(instruction->operands[0]);
        step.moves_tuple_element =
            only_element_reads[tuple] != 0 &&
            last_element_read[{tuple, instruction->tuple_index}] ==
                step_index;
      }
      step.operands_begin = static_cast<int32_t>(cp.operand_slots.size());
      const auto& operands = operands_of[step.result];
      for (size_t j = 0; j < operands.size(); ++j) {
        const int32_t slot = slot_of.at(operands[j]);
        // An operand used twice by one instruction is never moved: the
        // other use may still be reading it.
        bool repeated = false;
        for (size_t k = 0; k < operands.size(); ++k) {
          if (k != j && operands[k] == operands[j]) repeated = true;
        }
        cp.operand_slots.push_back(slot);
        cp.operand_movable.push_back(last_use[slot] == step_index &&
                                     slot != cp.root_slot && !repeated);
      }
      step.operands_end = static_cast<int32_t>(cp.operand_slots.size());
      // Values whose last reader is this step die after it (a value
      // nobody reads dies at once), except the root.
      step.releases_begin = static_cast<int32_t>(cp.release_slots.size());
      for (size_t j = 0; j < operands.size(); ++j) {
        const int32_t slot = slot_of.at(operands[j]);
        if (last_use[slot] == step_index && slot != cp.root_slot &&
            std::find(cp.release_slots.begin() + step.releases_begin,
                      cp.release_slots.end(), slot) == cp.release_slots.end()) {
          cp.release_slots.push_back(slot);
        }
      }
      if (last_use[step.result] == -1 && step.result != cp.root_slot) {
        cp.release_slots.push_back(step.result);
      }
      step.releases_end = static_cast<int32_t>(cp.release_slots.size());
      step.called_begin = static_cast<int32_t>(cp.called.size());
      for (const hlo::Computation* called : instruction->called_computations) {
        auto it = plan->by_computation.find(called);
        if (it == plan->by_computation.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(*instruction, computation), ": calls computation '",
              called->name(), "', which is not in the module"));
        }
        cp.called.push_back(it->second);
      }
      step.called_end = static_cast<int32_t>(cp.called.size());
      if (hlo::IsCollective(instruction->opcode)) {
        step.collective_index = plan->collective_count++;
      }
      cp.steps.push_back(step);
      ++step_index;
    }
  }
  CW_RETURN_IF_ERROR(CheckNestingDepth(module));
  for (auto& computation_plan : plan->plans) {
    if (!fusion_bodies.count(computation_plan->computation)) continue;
    const Instruction* root = computation_plan->computation->root();
    if (root->opcode == Opcode::kDynamicUpdateSlice &&
        !root->operands.empty() &&
        root->operands[0]->opcode == Opcode::kParameter) {
      computation_plan->in_place_parameter =
          root->operands[0]->parameter_number;
    }
    if (!options.fused_loops) continue;
    absl::StatusOr<std::unique_ptr<FusedLoop>> fused =
        FusedLoop::Compile(*computation_plan->computation);
    if (fused.ok()) computation_plan->fused = *std::move(fused);
  }
  return std::unique_ptr<Evaluator>(new Evaluator(module, std::move(plan)));
}

absl::StatusOr<Literal> Evaluator::Run(std::span<const Literal> arguments,
                                       const RunContext& context) const {
  const hlo::Computation& entry = *plan_->entry->computation;
  if (static_cast<int64_t>(arguments.size()) != entry.parameter_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "computation '", entry.name(), "' takes ", entry.parameter_count(),
        " arguments, got ", arguments.size()));
  }
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    const Instruction& parameter = *entry.parameter(i);
    if (!parameter.shape.Compatible(arguments[i].shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", i, " ('", parameter.name, "'): expected ",
                       parameter.shape.ToString(false), ", got ",
                       arguments[i].shape().ToString(false)));
    }
  }
  RunState state;
  state.plan = plan_.get();
  state.context = &context;
  state.memory = std::make_shared<MemoryAccount>(context.memory_limit_bytes);
  ScopedMemoryAccount charged(state.memory);
  state.collectives = context.collectives;
  state.collective_counts.assign(plan_->collective_count, 0);
  state.runner = [this, &state](
                     const hlo::Computation& computation,
                     std::span<const Literal> args) -> absl::StatusOr<Literal> {
    auto it = plan_->by_computation.find(&computation);
    if (it == plan_->by_computation.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "computation '", computation.name(), "' is not in the module"));
    }
    Arguments borrowed;
    for (const Literal& arg : args) borrowed.push_back({&arg, nullptr});
    return RunPlan(*it->second, borrowed, state);
  };
  Arguments borrowed;
  for (const Literal& arg : arguments) borrowed.push_back({&arg, nullptr});
  return RunPlan(*plan_->entry, borrowed, state);
}

}  // namespace causeway::exec
