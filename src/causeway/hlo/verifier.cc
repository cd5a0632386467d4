#include "causeway/hlo/verifier.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/collective_groups.h"
#include "causeway/hlo/custom_call.h"
#include "causeway/hlo/shape_inference.h"

namespace causeway::hlo {
namespace {

// "instruction 'x' (line L)", as InferShape writes it.
std::string Where(const Instruction& instr) {
  std::string where = absl::StrCat("instruction '", instr.name, "'");
  if (instr.line > 0) absl::StrAppend(&where, " (line ", instr.line, ")");
  return where;
}

// "line L: " or nothing for built instructions.
std::string LinePrefix(const Instruction& instr) {
  return instr.line > 0 ? absl::StrCat("line ", instr.line, ": ") : "";
}

template <typename... Args>
absl::Status Error(const Instruction& instr, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(Where(instr), ": ", args...));
}

class ModuleVerifier {
 public:
  explicit ModuleVerifier(const Module& module)
      : module_(module),
        counts_{module.num_partitions(), module.replica_count()} {}

  absl::Status Run() {
    if (module_.num_partitions() < 1 || module_.replica_count() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("module '", module_.name(),
                       "' has num_partitions=", module_.num_partitions(),
                       " and replica_count=", module_.replica_count(),
                       "; both must be at least 1"));
    }
    if (__builtin_mul_overflow(module_.num_partitions(),
                               module_.replica_count(), &device_count_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("module '", module_.name(), "' has too many devices"));
    }
    for (const auto& comp : module_.computations()) {
      if (comp == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "module '", module_.name(), "' holds a missing computation"));
      }
      computations_.insert(comp.get());
    }
    if (module_.entry() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "module '", module_.name(), "' has no entry computation"));
    }
    if (!computations_.count(module_.entry())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "entry computation '", module_.entry()->name(),
          "' is not one of module '", module_.name(), "' computations"));
    }
    for (const auto& comp : module_.computations()) {
      CW_RETURN_IF_ERROR(VerifyComputation(*comp));
    }
    return CheckCallGraphIsAcyclic();
  }

 private:
  absl::Status VerifyComputation(const Computation& comp) {
    std::unordered_map<const Instruction*, size_t> position;
    const auto& instructions = comp.instructions();
    for (size_t i = 0; i < instructions.size(); ++i) {
      if (instructions[i] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "computation '", comp.name(), "' holds a missing instruction"));
      }
      position[instructions[i].get()] = i;
    }
    if (comp.root() == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("computation '", comp.name(), "' has no root"));
    }
    if (!position.count(comp.root())) {
      return absl::InvalidArgumentError(
          absl::StrCat("the root of computation '", comp.name(),
                       "' is not one of its instructions"));
    }
    CW_RETURN_IF_ERROR(CheckParameters(comp));
    for (size_t i = 0; i < instructions.size(); ++i) {
      CW_RETURN_IF_ERROR(
          VerifyInstruction(comp, *instructions[i], i, position));
    }
    return absl::OkStatus();
  }

  absl::Status CheckParameters(const Computation& comp) {
    std::vector<const Instruction*> params;
    for (const auto& instr : comp.instructions()) {
      if (instr->opcode == Opcode::kParameter) params.push_back(instr.get());
    }
    const int64_t n = static_cast<int64_t>(params.size());
    std::vector<const Instruction*> by_number(params.size(), nullptr);
    for (const Instruction* param : params) {
      int64_t number = param->parameter_number;
      if (number < 0 || number >= n) {
        return Error(*param, "parameter number ", number,
                     " is out of range: computation '", comp.name(), "' has ",
                     n, " parameter", n == 1 ? "" : "s", ", numbered 0..",
                     n - 1);
      }
      if (by_number[number] != nullptr) {
        return Error(*param, "parameter number ", number,
                     " is already used by '", by_number[number]->name, "'");
      }
      by_number[number] = param;
    }
    if (comp.parameter_count() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "computation '", comp.name(), "' lists ", comp.parameter_count(),
          " parameters but has ", n, " parameter instructions"));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (comp.parameter(i) != by_number[i]) {
        return Error(*by_number[i], "is not registered as parameter ", i,
                     " of computation '", comp.name(), "'");
      }
    }
    return absl::OkStatus();
  }

  absl::Status VerifyInstruction(
      const Computation& comp, const Instruction& instr, size_t index,
      const std::unordered_map<const Instruction*, size_t>& position) {
    if (instr.opcode == Opcode::kUnknown) {
      return absl::UnimplementedError(
          absl::StrCat(LinePrefix(instr), "unsupported op '", instr.opcode_name,
                       "' (instruction '", instr.name, "')"));
    }
    if (instr.opcode == Opcode::kCustomCall &&
        !IsSupportedCustomCall(instr.custom_call_target)) {
      return UnsupportedCustomCall(instr);
    }
    for (int64_t i = 0; i < instr.operand_count(); ++i) {
      const Instruction* operand = instr.operands[i];
      if (operand == nullptr) return Error(instr, "operand ", i, " is missing");
      auto it = position.find(operand);
      if (it == position.end()) {
        return Error(instr, "operand ", i, " '", operand->name,
                     "' is not an instruction of computation '", comp.name(),
                     "'");
      }
      if (it->second >= index) {
        return Error(instr, "operand ", i, " '", operand->name,
                     "' is defined after its use");
      }
    }
    for (size_t i = 0; i < instr.called_computations.size(); ++i) {
      const Computation* called = instr.called_computations[i];
      if (called == nullptr || !computations_.count(called)) {
        return Error(instr, "called computation ", i,
                     " is not a computation of this module");
      }
    }
    CW_ASSIGN_OR_RETURN(Shape inferred, InferShape(instr, counts_));
    if (!instr.shape.Compatible(inferred)) {
      return Error(instr, "declared shape ", instr.shape.ToString(false),
                   " does not match the inferred shape ",
                   inferred.ToString(false));
    }
    if (IsCollective(instr.opcode)) {
      CW_RETURN_IF_ERROR(CheckCollective(instr));
    }
    return absl::OkStatus();
  }

  // The ids a collective's groups (or pairs) number, and how many there
  // are, by its group mode (docs/evaluator.md, "Collectives").
  struct IdSpace {
    int64_t count;
    const char* what;
  };
  IdSpace IdSpaceOf(const Instruction& instr) const {
    switch (GetCollectiveGroupMode(instr)) {
      case CollectiveGroupMode::kCrossReplica:
        return {module_.replica_count(), "replica"};
      case CollectiveGroupMode::kCrossPartition:
        return {module_.num_partitions(), "partition"};
      case CollectiveGroupMode::kCrossReplicaAndPartition:
        return {module_.replica_count(), "replica"};
      case CollectiveGroupMode::kFlattenedId:
        break;
    }
    return {device_count_, "device"};
  }

  absl::Status CheckCollective(const Instruction& instr) {
    const IdSpace ids = IdSpaceOf(instr);
    const int64_t limit = ids.count;
    if (instr.opcode == Opcode::kCollectivePermute) {
      std::unordered_set<int64_t> sources, targets;
      for (const auto& [source, target] : instr.source_target_pairs) {
        for (int64_t id : {source, target}) {
          if (id < 0 || id >= limit) {
            return Error(instr, "source_target_pairs id ", id,
                         " is outside [0, ", limit, ")");
          }
        }
        if (!sources.insert(source).second) {
          return Error(instr, "source ", source,
                       " appears twice in source_target_pairs");
        }
        if (!targets.insert(target).second) {
          return Error(instr, "target ", target,
                       " appears twice in source_target_pairs");
        }
      }
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<std::vector<int64_t>>> groups =
        ExpandReplicaGroups(instr.replica_groups);
    if (!groups.ok()) {
      return Error(instr, groups.status().message());
    }
    std::unordered_set<int64_t> seen;
    for (size_t g = 0; g < groups->size(); ++g) {
      const std::vector<int64_t>& group = (*groups)[g];
      if (group.empty()) return Error(instr, "replica group ", g, " is empty");
      if (group.size() != (*groups)[0].size()) {
        return Error(instr, "replica group ", g, " has ", group.size(),
                     " members but group 0 has ", (*groups)[0].size(),
                     "; all groups must have one size");
      }
      for (int64_t id : group) {
        if (id < 0 || id >= limit) {
          return Error(instr, "replica group id ", id, " is outside [0, ",
                       limit, ")");
        }
        if (!seen.insert(id).second) {
          return Error(instr, "replica group id ", id, " appears twice");
        }
      }
    }
    // As XLA's verifier: listed groups name every id of the program once,
    // or a member would find no group when the program runs.
    if (!seen.empty() && static_cast<int64_t>(seen.size()) != limit) {
      int64_t missing = 0;
      while (seen.contains(missing)) ++missing;
      return Error(
          instr, "replica_groups leave out ", ids.what, " id ", missing,
          ": the groups must hold each of the module's ", limit, " ", ids.what,
          " ids (num_partitions=", module_.num_partitions(),
          ", replica_count=", module_.replica_count(), ") exactly once");
    }
    return absl::OkStatus();
  }

  absl::Status CheckCallGraphIsAcyclic() {
    enum class State { kUnvisited, kActive, kDone };
    std::unordered_map<const Computation*, State> state;
    // Iterative DFS: (computation, next instruction index, next callee).
    struct Frame {
      const Computation* comp;
      size_t instr = 0;
      size_t callee = 0;
    };
    for (const auto& root : module_.computations()) {
      if (state[root.get()] != State::kUnvisited) continue;
      std::vector<Frame> stack = {{root.get()}};
      state[root.get()] = State::kActive;
      while (!stack.empty()) {
        Frame& top = stack.back();
        const auto& instructions = top.comp->instructions();
        if (top.instr >= instructions.size()) {
          state[top.comp] = State::kDone;
          stack.pop_back();
          continue;
        }
        const Instruction& instr = *instructions[top.instr];
        if (top.callee >= instr.called_computations.size()) {
          ++top.instr;
          top.callee = 0;
          continue;
        }
        const Computation* callee = instr.called_computations[top.callee++];
        State& s = state[callee];
        if (s == State::kActive) {
          return Error(instr, "calls computation '", callee->name(),
                       "', which is already on the call stack (recursion)");
        }
        if (s == State::kUnvisited) {
          s = State::kActive;
          stack.push_back({callee});
        }
      }
    }
    return absl::OkStatus();
  }

  const Module& module_;
  const DeviceCounts counts_;
  int64_t device_count_ = 1;  // num_partitions * replica_count.
  std::unordered_set<const Computation*> computations_;
};

}  // namespace

absl::Status VerifyModule(const Module& module) {
  return ModuleVerifier(module).Run();
}

}  // namespace causeway::hlo
