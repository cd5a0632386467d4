#include "causeway/hlo/ir.h"

#include <algorithm>

namespace causeway::hlo {
namespace {

struct OpcodeEntry {
  Opcode opcode;
  std::string_view name;
};

constexpr OpcodeEntry kOpcodes[] = {
#define CW_OPCODE_ENTRY(enum_name, text) {Opcode::enum_name, text},
    CW_HLO_OPCODES(CW_OPCODE_ENTRY)
#undef CW_OPCODE_ENTRY
};

}  // namespace

std::string_view OpcodeName(Opcode opcode) {
  for (const OpcodeEntry& entry : kOpcodes) {
    if (entry.opcode == opcode) return entry.name;
  }
  return "unknown";
}

std::string_view FftTypeName(FftType type) {
  switch (type) {
    case FftType::kFft:
      return "FFT";
    case FftType::kIfft:
      return "IFFT";
    case FftType::kRfft:
      return "RFFT";
    case FftType::kIrfft:
      return "IRFFT";
  }
  return "FFT";
}

Opcode OpcodeFromName(std::string_view name) {
  for (const OpcodeEntry& entry : kOpcodes) {
    if (entry.name == name) return entry.opcode;
  }
  return Opcode::kUnknown;
}

bool IsElementwiseUnary(Opcode opcode) {
  switch (opcode) {
    case Opcode::kNot:
    case Opcode::kNegate:
    case Opcode::kAbs:
    case Opcode::kSign:
    case Opcode::kExp:
    case Opcode::kExpm1:
    case Opcode::kLog:
    case Opcode::kLog1p:
    case Opcode::kTanh:
    case Opcode::kLogistic:
    case Opcode::kRsqrt:
    case Opcode::kSqrt:
    case Opcode::kCbrt:
    case Opcode::kErf:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTan:
    case Opcode::kFloor:
    case Opcode::kCeil:
    case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven:
    case Opcode::kIsFinite:
    case Opcode::kPopcnt:
    case Opcode::kClz:
      return true;
    default:
      return false;
  }
}

bool IsElementwiseBinary(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kRemainder:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kPower:
    case Opcode::kAtan2:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightLogical:
    case Opcode::kShiftRightArithmetic:
      return true;
    default:
      return false;
  }
}

bool IsCollective(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return true;
    default:
      return false;
  }
}

bool HasCollectives(const Module& module) {
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (IsCollective(instruction->opcode)) return true;
    }
  }
  return false;
}

Instruction* Computation::AddInstruction(
    std::unique_ptr<Instruction> instruction) {
  Instruction* added = instruction.get();
  if (added->opcode == Opcode::kParameter && added->parameter_number >= 0) {
    size_t number = static_cast<size_t>(added->parameter_number);
    if (parameters_.size() <= number) parameters_.resize(number + 1, nullptr);
    parameters_[number] = added;
  }
  if (added->is_root) root_ = added;
  instructions_.push_back(std::move(instruction));
  return added;
}

Instruction* Computation::FindInstruction(std::string_view name) const {
  for (const auto& instruction : instructions_) {
    if (instruction->name == name) return instruction.get();
  }
  return nullptr;
}

Computation* Module::AddComputation(std::unique_ptr<Computation> computation) {
  Computation* added = computation.get();
  if (added->is_entry()) entry_ = added;
  computations_.push_back(std::move(computation));
  return added;
}

Computation* Module::FindComputation(std::string_view name) const {
  for (const auto& computation : computations_) {
    if (computation->name() == name) return computation.get();
  }
  return nullptr;
}

}  // namespace causeway::hlo
