#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/exec/kernels.h"

namespace causeway::exec {

using hlo::Opcode;

absl::StatusOr<Literal> EvalKernel(const Instruction& instr,
                                   std::span<const Literal* const> operands,
                                   const ComputationRunner& runner) {
  const Opcode opcode = instr.opcode;
  auto operand = [&](size_t i) -> const Literal& { return *operands[i]; };
  if (hlo::IsElementwiseBinary(opcode)) {
    return EvalBinary(instr, operand(0), operand(1));
  }
  if (hlo::IsElementwiseUnary(opcode)) return EvalUnary(instr, operand(0));
  switch (opcode) {
    case Opcode::kCopy:
      return EvalCopy(instr, operand(0));
    case Opcode::kBitcast:
      return EvalBitcast(instr, operand(0));
    case Opcode::kCompare:
      return EvalCompare(instr, operand(0), operand(1));
    case Opcode::kSelect:
      return EvalSelect(instr, operand(0), operand(1), operand(2));
    case Opcode::kClamp:
      return EvalClamp(instr, operand(0), operand(1), operand(2));
    case Opcode::kConvert:
      return EvalConvert(instr, operand(0));
    case Opcode::kReal:
    case Opcode::kImag:
      return EvalRealOrImag(instr, operand(0));
    case Opcode::kComplex:
      return EvalComplex(instr, operand(0), operand(1));
    case Opcode::kBitcastConvert:
      return EvalBitcastConvert(instr, operand(0));
    case Opcode::kReducePrecision:
      return EvalReducePrecision(instr, operand(0));
    case Opcode::kBroadcast:
      return EvalBroadcast(instr, operand(0));
    case Opcode::kReshape:
      return EvalReshape(instr, operand(0));
    case Opcode::kTranspose:
      return EvalTranspose(instr, operand(0));
    case Opcode::kSlice:
      return EvalSlice(instr, operand(0));
    case Opcode::kConcatenate:
      return EvalConcatenate(instr, operands);
    case Opcode::kPad:
      return EvalPad(instr, operand(0), operand(1));
    case Opcode::kIota:
      return EvalIota(instr);
    case Opcode::kReverse:
      return EvalReverse(instr, operand(0));
    case Opcode::kDynamicSlice:
      return EvalDynamicSlice(instr, operand(0), operands.subspan(1));
    case Opcode::kDynamicUpdateSlice:
      return EvalDynamicUpdateSlice(instr, operand(0), operand(1),
                                    operands.subspan(2));
    case Opcode::kGather:
      return EvalGather(instr, operand(0), operand(1));
    case Opcode::kScatter:
      return EvalScatter(instr, operands, runner);
    case Opcode::kReduce:
      return EvalReduce(instr, operands, runner);
    case Opcode::kReduceWindow:
      return EvalReduceWindow(instr, operands, runner);
    case Opcode::kSelectAndScatter:
      return EvalSelectAndScatter(instr, operand(0), operand(1), operand(2),
                                  runner);
    case Opcode::kSort:
      return EvalSort(instr, operands, runner);
    case Opcode::kDot:
      return EvalDot(instr, operand(0), operand(1));
    case Opcode::kConvolution:
      return EvalConvolution(instr, operand(0), operand(1));
    case Opcode::kRngBitGenerator:
      return EvalRngBitGenerator(instr, operand(0));
    case Opcode::kFft:
      return EvalFft(instr, operand(0));
    case Opcode::kMap:
      return EvalMap(instr, operands, runner);
    case Opcode::kCustomCall:
      return EvalCustomCall(instr, operands, runner);
    default:
      return absl::UnimplementedError(
          absl::StrCat("op '", std::string(hlo::OpcodeName(opcode)),
                       "' has no kernel"));
  }
}

}  // namespace causeway::exec
