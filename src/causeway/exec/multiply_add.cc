#include "causeway/exec/multiply_add.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

namespace causeway::exec {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;

bool ContractsMultiplyAdd(PrimitiveType type,
                          const XlaCpuTarget& target) {
  return (type == PrimitiveType::kF16 && target.avx512fp16) ||
         type == PrimitiveType::kF32 || type == PrimitiveType::kF64;
}

namespace {

// How LLVM's Reassociate pass ranks each value of the loop body it orders
// the operands of commutative instructions by: constants 0; each load its
// own rank, increasing in the order the loads appear (XLA emits a fusion's
// parameters in the order the body lists them); every other instruction
// one above its highest operand, a negation nothing. Math functions,
// maximum and minimum are one intrinsic call each at that point; f16 tanh
// and erf are XLA's own f32 functions, with a widening and a narrowing
// around the call. Reads through an index map (broadcast, slice,
// transpose), reshapes, bitcasts and copies take their operand's rank.
std::unordered_map<const Instruction*, int64_t> Ranks(
    const hlo::Computation& computation) {
  std::unordered_map<const Instruction*, int64_t> rank;
  int64_t loads = 0;
  for (const auto& owned : computation.instructions()) {
    const Instruction* instruction = owned.get();
    int64_t highest = 0;
    for (const Instruction* operand : instruction->operands) {
      auto it = rank.find(operand);
      if (it != rank.end()) highest = std::max(highest, it->second);
    }
    const bool half = instruction->shape.IsArray() &&
                      instruction->shape.type() == PrimitiveType::kF16;
    int64_t cost = 1;
    switch (instruction->opcode) {
      case Opcode::kConstant:
        rank[instruction] = 0;
        continue;
      case Opcode::kParameter:
        rank[instruction] = ++loads;
        continue;
      case Opcode::kNegate:
      case Opcode::kReshape:
      case Opcode::kBitcast:
      case Opcode::kCopy:
      case Opcode::kBroadcast:
      case Opcode::kSlice:
      case Opcode::kTranspose:
        cost = 0;
        break;
      case Opcode::kTanh:
      case Opcode::kErf:
        // XLA calls its own f32 function: widen, call, narrow.
        cost = half ? 3 : 1;
        break;
      default:
        break;
    }
    rank[instruction] = highest + cost;
  }
  return rank;
}

}  // namespace

std::unordered_map<const Instruction*, MultiplyAdd> FindMultiplyAdds(
    const hlo::Computation& fusion_body, const XlaCpuTarget& target) {
  std::unordered_map<const Instruction*, int64_t> users;
  for (const auto& instruction : fusion_body.instructions()) {
    for (const Instruction* operand : instruction->operands) ++users[operand];
  }
  const Instruction* root = fusion_body.root();
  // Whether `value` is read once, by the add being considered, and has the
  // add's type and dims.
  auto only_user_is = [&](const Instruction* value, const Instruction* add) {
    return value != nullptr && value != root && users[value] == 1 &&
           value->shape.IsArray() && value->shape.type() == add->shape.type() &&
           value->shape.dims() == add->shape.dims();
  };
  const std::unordered_map<const Instruction*, int64_t> rank =
      Ranks(fusion_body);
  // LLVM moves negations out of multiplies and merges multiplies of the
  // same factors (in either order): such multiplies are one value, whose
  // uses add up.
  auto strip_negations = [](const Instruction* x) {
    while (x->opcode == Opcode::kNegate && x->operands.size() == 1) {
      x = x->operands[0];
    }
    return x;
  };
  std::map<std::tuple<PrimitiveType, int64_t, int64_t>, int64_t> product_uses;
  auto product_key = [&](const Instruction* multiply) {
    int64_t a = strip_negations(multiply->operands[0])->unique_id;
    int64_t b = strip_negations(multiply->operands[1])->unique_id;
    if (a > b) std::swap(a, b);
    return std::make_tuple(multiply->shape.type(), a, b);
  };
  for (const auto& instruction : fusion_body.instructions()) {
    if (instruction->opcode == Opcode::kMultiply &&
        instruction->operands.size() == 2) {
      const int64_t uses =
          users[instruction.get()] + (instruction.get() == root ? 1 : 0);
      product_uses[product_key(instruction.get())] += uses;
    }
  }
  std::unordered_map<const Instruction*, MultiplyAdd> found;
  for (const auto& owned : fusion_body.instructions()) {
    const Instruction* add = owned.get();
    if ((add->opcode != Opcode::kAdd && add->opcode != Opcode::kSubtract) ||
        add->operands.size() != 2 || !add->shape.IsArray() ||
        !ContractsMultiplyAdd(add->shape.type(), target)) {
      continue;
    }
    // LLVM orders the operands of a commutative add by rank, the lower
    // first, and contracts the first product it finds; a subtract keeps
    // its order.
    int first_side = 0;
    if (add->opcode == Opcode::kAdd &&
        rank.at(add->operands[1]) < rank.at(add->operands[0])) {
      first_side = 1;
    }
    for (int k = 0; k < 2; ++k) {
      const int side = k == 0 ? first_side : 1 - first_side;
      const Instruction* term = add->operands[side];
      if (!only_user_is(term, add)) continue;
      MultiplyAdd contraction;
      if (term->opcode == Opcode::kNegate && term->operands.size() == 1) {
        contraction.negate = term;
        contraction.negate_product = true;
        term = term->operands[0];
      }
      if (term->opcode != Opcode::kMultiply || term->operands.size() != 2 ||
          !only_user_is(term, add) || product_uses[product_key(term)] != 1) {
        continue;
      }
      bool operands_fit = true;
      for (const Instruction* factor : term->operands) {
        operands_fit &= factor != nullptr && factor->shape.IsArray() &&
                        factor->shape.type() == add->shape.type() &&
                        factor->shape.dims() == add->shape.dims();
      }
      const Instruction* addend = add->operands[1 - side];
      if (!operands_fit || addend == nullptr || !addend->shape.IsArray() ||
          addend->shape.type() != add->shape.type() ||
          addend->shape.dims() != add->shape.dims()) {
        continue;
      }
      contraction.multiply = term;
      contraction.addend = addend;
      if (add->opcode == Opcode::kSubtract) {
        // x - y: the product is y (side 1) and enters negated, or it is x
        // and the addend enters negated.
        if (side == 1) {
          contraction.negate_product = !contraction.negate_product;
        } else {
          contraction.negate_addend = true;
        }
      }
      found[add] = contraction;
      break;
    }
  }
  return found;
}

}  // namespace causeway::exec
