// Floating-point contraction as XLA's CPU backend does it.
//
// XLA compiles each fusion into one loop of LLVM IR and lets LLVM contract
// a multiply feeding an add into one fused multiply-add (FMA: a*b + c
// rounded once). Measured with JAX 0.10.2 on this project's machine kind
// (x86-64 with AVX-512 FP16, and with --xla_cpu_max_isa=AVX2 as on a
// processor without it), inside a fusion body:
//  - add(multiply(a, b), c), add(c, multiply(a, b)), subtract(multiply, c),
//    subtract(c, multiply) and the same with negate(multiply) in place of
//    the multiply are computed as one FMA, for f32 and f64, and for f16
//    where XLA computes f16 natively (AVX512-FP16: the processor's own
//    half-precision FMA; exec/xla_cpu_target.h), when the multiply (and the
//    negate) has no other user and is not the fusion's result; elsewhere
//    XLA computes each f16 operation in f32 and rounds, contracting none;
//  - when both operands of an add are such products, the one of lower
//    rank is contracted, the first on a tie: LLVM orders a commutative
//    add's operands by rank (Ranks in multiply_add.cc: roughly the depth
//    of the expression above the loads it reads, later loads ranking
//    higher) and contracts the first product (a*b + c*d is
//    fma(a, b, round(c*d)); gelu(x) + b*c is fma(b, c, round(gelu(x))));
//    a subtract contracts its first operand's product;
//  - multiplies of the same factors (in either order, negated or not) are
//    one value to LLVM, so none of them contracts when they have more
//    than one use between them;
//  - nothing else is: a broadcast, convert or select between the two
//    stops it, and bf16 arithmetic never appears (XLA computes bf16 ops in
//    f32 with converts in between, so each op rounds).
// Operations outside fusions (a lone add in the entry computation) run as
// separate kernels in XLA and are not contracted.
//
// The evaluator (op by op) and the fused loop both take the contractions
// from FindMultiplyAdds, so the two paths stay bit-identical.
#ifndef CAUSEWAY_EXEC_MULTIPLY_ADD_H_
#define CAUSEWAY_EXEC_MULTIPLY_ADD_H_

#include <unordered_map>

#include "causeway/exec/xla_cpu_target.h"
#include "causeway/hlo/ir.h"

namespace causeway::exec {

// One add or subtract computed as round(±(a*b) ± c).
struct MultiplyAdd {
  const hlo::Instruction* multiply = nullptr;  // a = operand 0, b = operand 1.
  // The instructions folded away (the multiply, and the negate between it
  // and the add when there is one): nothing else reads them.
  const hlo::Instruction* negate = nullptr;
  const hlo::Instruction* addend = nullptr;  // c.
  bool negate_product = false;
  bool negate_addend = false;
};

// The contractions XLA's CPU backend makes in `fusion_body` (a computation
// called by a fusion instruction) for `target`, keyed by the add or
// subtract.
std::unordered_map<const hlo::Instruction*, MultiplyAdd> FindMultiplyAdds(
    const hlo::Computation& fusion_body,
    const XlaCpuTarget& target = ActiveXlaCpuTarget());

// Whether `type` is one XLA contracts on `target` (f32, f64; f16 with
// AVX512-FP16).
bool ContractsMultiplyAdd(hlo::PrimitiveType type, const XlaCpuTarget& target);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_MULTIPLY_ADD_H_
