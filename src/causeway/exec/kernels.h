// Kernels: one function per HLO operation, computing an instruction's value
// from its already-evaluated operands. Pure functions of their inputs,
// thread-safe. Values are hlo::Literal (row-major in memory).
//
// The evaluator (evaluator.h) walks computations and calls these; control
// flow (fusion, call, while, conditional), tuples, parameters, constants,
// partition-id/replica-id and collectives live in the evaluator, not here.
//
// Errors: InvalidArgument for operands that do not fit the instruction,
// Unimplemented for a supported opcode with an unsupported variant (naming
// it). Never a crash on bad input: shapes were verified, but kernels still
// check indices they compute from data (gather/scatter clamp as XLA does).
#ifndef CAUSEWAY_EXEC_KERNELS_H_
#define CAUSEWAY_EXEC_KERNELS_H_

#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::exec {

using hlo::Instruction;
using hlo::Literal;

// Runs a nested computation (a reducer, comparator, scatter combiner) on
// arguments; returns its root value. Supplied by the evaluator. Kernels
// recognise simple computations (`ROOT add(p0, p1)`, `ROOT compare(p0, p1),
// direction=LT`) and use a direct fast path, calling the runner only for
// anything else.
using ComputationRunner = std::function<absl::StatusOr<Literal>(
    const hlo::Computation&, std::span<const Literal>)>;

// Elementwise (shapes already equal; implicit broadcast does not exist in
// HLO). bf16/f16 compute in float and round per op, as XLA's CPU backend.
absl::StatusOr<Literal> EvalUnary(const Instruction& instr,
                                  const Literal& operand);
absl::StatusOr<Literal> EvalBinary(const Instruction& instr, const Literal& lhs,
                                   const Literal& rhs);
// `add` (an add or subtract) computed as one fused multiply-add of the
// multiply's operands `a`, `b` and the other operand `c`, signs as
// `contraction` says (multiply_add.h).
struct MultiplyAdd;
absl::StatusOr<Literal> EvalMultiplyAdd(const Instruction& add,
                                        const MultiplyAdd& contraction,
                                        const Literal& a, const Literal& b,
                                        const Literal& c);
absl::StatusOr<Literal> EvalCompare(const Instruction& instr,
                                    const Literal& lhs, const Literal& rhs);
absl::StatusOr<Literal> EvalSelect(const Instruction& instr,
                                   const Literal& pred, const Literal& on_true,
                                   const Literal& on_false);
absl::StatusOr<Literal> EvalClamp(const Instruction& instr, const Literal& min,
                                  const Literal& operand, const Literal& max);
absl::StatusOr<Literal> EvalConvert(const Instruction& instr,
                                    const Literal& operand);
// real / imag of complex operands (of real ones: the value, or zeros);
// complex(real, imag) from f32 or f64 parts.
absl::StatusOr<Literal> EvalRealOrImag(const Instruction& instr,
                                       const Literal& operand);
absl::StatusOr<Literal> EvalComplex(const Instruction& instr,
                                    const Literal& real, const Literal& imag);
absl::StatusOr<Literal> EvalBitcastConvert(const Instruction& instr,
                                           const Literal& operand);
absl::StatusOr<Literal> EvalReducePrecision(const Instruction& instr,
                                            const Literal& operand);

// Shape and data movement. `copy` and `bitcast` honour the layouts written
// on the operand and result shapes (a bitcast between layouts may move
// elements; a copy between layouts keeps logical values).
absl::StatusOr<Literal> EvalCopy(const Instruction& instr,
                                 const Literal& operand);
absl::StatusOr<Literal> EvalBitcast(const Instruction& instr,
                                    const Literal& operand);
absl::StatusOr<Literal> EvalBroadcast(const Instruction& instr,
                                      const Literal& operand);
absl::StatusOr<Literal> EvalReshape(const Instruction& instr,
                                    const Literal& operand);
absl::StatusOr<Literal> EvalTranspose(const Instruction& instr,
                                      const Literal& operand);
absl::StatusOr<Literal> EvalSlice(const Instruction& instr,
                                  const Literal& operand);
absl::StatusOr<Literal> EvalConcatenate(
    const Instruction& instr, std::span<const Literal* const> operands);
absl::StatusOr<Literal> EvalPad(const Instruction& instr,
                                const Literal& operand,
                                const Literal& padding_value);
absl::StatusOr<Literal> EvalIota(const Instruction& instr);
absl::StatusOr<Literal> EvalReverse(const Instruction& instr,
                                    const Literal& operand);

// Indexing. Start indices are clamped into range as XLA specifies.
absl::StatusOr<Literal> EvalDynamicSlice(
    const Instruction& instr, const Literal& operand,
    std::span<const Literal* const> start_indices);
absl::StatusOr<Literal> EvalDynamicUpdateSlice(
    const Instruction& instr, const Literal& operand, const Literal& update,
    std::span<const Literal* const> start_indices);
// As EvalDynamicUpdateSlice, but writes the update into `operand`, which
// becomes the result (its shape is set to instr.shape). Copies the data
// only when `operand` shares its storage with another literal, so an
// evaluator that hands over the last use of the operand (a scan's carry)
// updates it in place, as XLA does.
absl::Status DynamicUpdateSliceInPlace(
    const Instruction& instr, Literal& operand, const Literal& update,
    std::span<const Literal* const> start_indices);
absl::StatusOr<Literal> EvalGather(const Instruction& instr,
                                   const Literal& operand,
                                   const Literal& start_indices);
// Operands: N inputs, the indices, N updates (variadic scatter: the result
// is a tuple when N > 1).
absl::StatusOr<Literal> EvalScatter(const Instruction& instr,
                                    std::span<const Literal* const> operands,
                                    const ComputationRunner& run);

// Reductions and sorting. Variadic forms (N inputs then N init values)
// return tuples, as in XLA.
absl::StatusOr<Literal> EvalReduce(const Instruction& instr,
                                   std::span<const Literal* const> operands,
                                   const ComputationRunner& run);
absl::StatusOr<Literal> EvalReduceWindow(
    const Instruction& instr, std::span<const Literal* const> operands,
    const ComputationRunner& run);
absl::StatusOr<Literal> EvalSelectAndScatter(const Instruction& instr,
                                             const Literal& operand,
                                             const Literal& source,
                                             const Literal& init_value,
                                             const ComputationRunner& run);
absl::StatusOr<Literal> EvalSort(const Instruction& instr,
                                 std::span<const Literal* const> operands,
                                 const ComputationRunner& run);

// Linear algebra (exec/gemm.h).
absl::StatusOr<Literal> EvalDot(const Instruction& instr, const Literal& lhs,
                                const Literal& rhs);
// Dot-add output fusion, as XLA's CPU backend does it: accumulator + dot,
// computed by letting the product accumulate into `accumulator`'s bytes (in
// place when its storage is not shared, else into a copy). Only for dots
// that CanAccumulateDot admits (f32 or f64 throughout); the accumulator has
// the dot's shape. The sum is rounded as the product's own accumulation
// goes, so it may differ from dot-then-add in the last bits, as XLA's does.
bool CanAccumulateDot(const Instruction& dot);
absl::StatusOr<Literal> EvalDotAccumulate(const Instruction& instr,
                                          const Literal& lhs,
                                          const Literal& rhs,
                                          Literal accumulator);
absl::StatusOr<Literal> EvalConvolution(const Instruction& instr,
                                        const Literal& input,
                                        const Literal& kernel);

// fft (FFT, IFFT, RFFT, IRFFT over the trailing fft_length dims; fft.cc).
absl::StatusOr<Literal> EvalFft(const Instruction& instr,
                                const Literal& operand);

// map: `to_apply` (scalar) on the operands' elements at each index.
absl::StatusOr<Literal> EvalMap(const Instruction& instr,
                                std::span<const Literal* const> operands,
                                const ComputationRunner& runner);

// A custom-call whose target hlo/custom_call.h lists (TopK, ...);
// Unimplemented naming any other target.
absl::StatusOr<Literal> EvalCustomCall(const Instruction& instr,
                                       std::span<const Literal* const> operands,
                                       const ComputationRunner& runner);

// The LAPACK custom-calls hlo/custom_call.h lists (exec/lapack.cc).
absl::StatusOr<Literal> EvalLapack(const Instruction& instr,
                                   std::span<const Literal* const> operands);

// Random bits: operand is the state; result is (new state, bits), with
// XLA's ThreeFry / Philox algorithms so that outputs match XLA bit for bit.
absl::StatusOr<Literal> EvalRngBitGenerator(const Instruction& instr,
                                            const Literal& state);

// Runs the kernel of any opcode above on its operands: the one dispatch from
// opcode to kernel, used by the evaluator and the fused loop. Unimplemented
// for opcodes without a kernel (control flow, tuples, collectives, which
// their callers handle).
absl::StatusOr<Literal> EvalKernel(const Instruction& instr,
                                   std::span<const Literal* const> operands,
                                   const ComputationRunner& runner);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_KERNELS_H_
