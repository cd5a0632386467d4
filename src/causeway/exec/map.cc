// map: a scalar computation applied element by element.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/scalar_computation.h"

namespace causeway::exec {

absl::StatusOr<Literal> EvalMap(const Instruction& instr,
                                std::span<const Literal* const> operands,
                                const ComputationRunner& runner) {
  const hlo::Computation* f = instr.to_apply();
  if (f == nullptr || operands.empty() || !instr.shape.IsArray()) {
    return Invalid(instr, "map needs operands, a to_apply computation and an "
                          "array result");
  }
  std::vector<hlo::PrimitiveType> types;
  std::vector<int64_t> widths;
  for (const Literal* operand : operands) {
    const hlo::Shape& s = operand->shape();
    if (!s.IsArray() || s.dims() != instr.shape.dims()) {
      return Invalid(instr, absl::StrCat("operand ", s.ToString(false),
                                         " does not have the dims of ",
                                         instr.shape.ToString(false)));
    }
    types.push_back(s.type());
    widths.push_back(hlo::ByteWidth(s.type()));
  }
  ScalarFunction function(*f, runner);
  const hlo::PrimitiveType result_type[] = {instr.shape.type()};
  CW_RETURN_IF_ERROR(function.CheckSignature(types, result_type, "map's to_apply"));
  Literal result = Literal::Uninitialized(instr.shape);
  const int64_t out_width = hlo::ByteWidth(instr.shape.type());
  std::vector<uint64_t> args(operands.size());
  uint64_t value = 0;
  ScopedFlushDenormals flush_denormals;  // As elementwise kernels run.
  const int64_t n = instr.shape.ElementCount();
  for (int64_t i = 0; i < n; ++i) {
    for (size_t p = 0; p < operands.size(); ++p) {
      args[p] = LoadBits(operands[p]->untyped_data(), widths[p], i);
    }
    CW_RETURN_IF_ERROR(function.Call(args, std::span<uint64_t>(&value, 1)));
    StoreBits(result.mutable_untyped_data(), out_width, i, value);
  }
  return result;
}

}  // namespace causeway::exec
