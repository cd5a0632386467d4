// Custom-call kernels: the targets hlo/custom_call.h lists.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/custom_call.h"

namespace causeway::exec {
namespace {

using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// TopK as XLA defines it: a stable sort of (value, index) pairs along the
// last dim by the comparator, of which the first k are kept. The sort is
// the sort kernel's (so comparators it recognises, such as the total-order
// one lax.top_k writes, run without calling the computation).
absl::StatusOr<Literal> EvalTopK(const Instruction& instr,
                                 std::span<const Literal* const> operands,
                                 const ComputationRunner& runner) {
  if (operands.size() != 1 || instr.called_computations.size() != 1 ||
      !instr.shape.IsTuple() || instr.shape.tuple_shapes().size() != 2) {
    return Invalid(instr, "TopK takes one operand and one comparator and "
                          "returns (values, indices)");
  }
  const Literal& input = *operands[0];
  const Shape& shape = input.shape();
  if (!shape.IsArray() || shape.rank() < 1) {
    return Invalid(instr, absl::StrCat("TopK needs an array of rank >= 1, got ",
                                       shape.ToString(false)));
  }
  const int64_t rank = shape.rank();
  const int64_t n = shape.dims().back();
  const Shape& values_shape = instr.shape.tuple_shape(0);
  const Shape& indices_shape = instr.shape.tuple_shape(1);
  if (!values_shape.IsArray() || values_shape.type() != shape.type() ||
      values_shape.rank() != rank || !indices_shape.IsArray() ||
      indices_shape.type() != PrimitiveType::kS32 ||
      indices_shape.dims() != values_shape.dims() ||
      values_shape.dims().back() > n) {
    return Invalid(instr, absl::StrCat("TopK of ", shape.ToString(false),
                                       " cannot give ",
                                       instr.shape.ToString(false)));
  }
  const int64_t k = values_shape.dims().back();
  if (n > INT32_MAX) {
    return Invalid(instr, "TopK indices are s32: the last dim is too long");
  }
  Literal indices = Literal::Uninitialized(Shape(PrimitiveType::kS32, shape.dims()));
  int32_t* index = MutableDataPtr<int32_t>(indices);
  const int64_t rows = n == 0 ? 0 : shape.ElementCount() / n;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) index[r * n + j] = static_cast<int32_t>(j);
  }
  Instruction sort;
  sort.name = instr.name;
  sort.line = instr.line;
  sort.opcode = Opcode::kSort;
  sort.dimensions = {rank - 1};
  sort.is_stable = true;
  sort.called_computations = instr.called_computations;
  sort.shape = Shape::Tuple({shape, indices.shape()});
  const Literal* sort_operands[] = {&input, &indices};
  CW_ASSIGN_OR_RETURN(Literal sorted, EvalSort(sort, sort_operands, runner));
  std::vector<Literal> results;
  for (int i = 0; i < 2; ++i) {
    const Literal& full = sorted.elements()[i];
    Literal top = Literal::Uninitialized(instr.shape.tuple_shape(i));
    const int64_t width = hlo::ByteWidth(full.shape().type());
    const auto* src = static_cast<const uint8_t*>(full.untyped_data());
    auto* dst = static_cast<uint8_t*>(top.mutable_untyped_data());
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + r * k * width, src + r * n * width,
                  static_cast<size_t>(k * width));
    }
    results.push_back(std::move(top));
  }
  return Literal::MakeTuple(std::move(results));
}

}  // namespace

absl::StatusOr<Literal> EvalCustomCall(const Instruction& instr,
                                       std::span<const Literal* const> operands,
                                       const ComputationRunner& runner) {
  if (instr.custom_call_target == hlo::kTopKTarget) {
    return EvalTopK(instr, operands, runner);
  }
  if (hlo::ParseLapackTarget(instr.custom_call_target).has_value()) {
    return EvalLapack(instr, operands);
  }
  return hlo::UnsupportedCustomCall(instr);
}

}  // namespace causeway::exec
