// The fused loop evaluator: runs a fusion's body as a few loops over its
// output instead of one kernel call per instruction.
//
// FusedLoop::Compile turns a computation (a fusion body) into stages:
//  - loops: a node whose value must exist in full (the root, an operand of
//    a reduce/dot/gather/... or of a broadcast/transpose/slice, a value
//    read by two loops) is computed chunk by chunk (512 elements) over its
//    elements, together with every elementwise node that only it reads.
//    Each elementwise op runs the same typed loop as its op-by-op kernel
//    (elementwise.h) on a chunk held in a scratch register; broadcasts,
//    transposes and slices read their operand through precomputed strides;
//    reshapes, bitcasts and copies cost nothing. No full-size intermediate
//    is made for these nodes.
//  - a reduce of rows or columns (reduction.h) with a one-op reducer,
//    whose input is a loop op only it reads, is fed that input chunk by
//    chunk by the input's loop (chunks of whole rows) and never sees it
//    whole.
//  - kernels: every other instruction (reduce, dot, gather, concatenate,
//    tuple, ...) runs its op-by-op kernel (kernels.h) on full values.
//  Nodes that depend only on constants (an iota-based mask, say) are folded
//  at Compile by the same kernels.
//
// Results are bit-identical to evaluating the computation op by op: the
// same element loops run on the same values, chunks start at multiples of
// 512 elements (so vectorised loops see the same alignment and tails), and
// the kernels are the same.
//
// Immutable after Compile; Run is thread-safe.
#ifndef CAUSEWAY_EXEC_FUSED_LOOP_H_
#define CAUSEWAY_EXEC_FUSED_LOOP_H_

#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::exec {

class FusedLoop {
 public:
  ~FusedLoop();
  FusedLoop(const FusedLoop&) = delete;
  FusedLoop& operator=(const FusedLoop&) = delete;

  // Unimplemented when the computation holds an instruction that only the
  // evaluator runs (control flow, collectives, partition-id, nested
  // fusions, ...) or that the compiler cannot prove well formed; the caller
  // then runs the computation op by op, which reports any error.
  // `computation` must outlive the FusedLoop.
  static absl::StatusOr<std::unique_ptr<FusedLoop>> Compile(
      const hlo::Computation& computation);

  // Whether `arguments` have the shapes the program was compiled for (each
  // parameter's element type and dims; row-major layouts where a bitcast
  // reads one). If not, run the computation op by op instead: it reports
  // what is wrong.
  bool CanRun(std::span<const hlo::Literal* const> arguments) const;

  // Runs the computation on `arguments` (CanRun must hold). `runner`
  // evaluates reducers and comparators that kernels do not compile. Errors
  // name the instruction: "in instruction 'x' (line 3) of computation
  // 'fused': ...".
  absl::StatusOr<hlo::Literal> Run(
      std::span<const hlo::Literal* const> arguments,
      const ComputationRunner& runner) const;

  // How the computation was compiled: the number of chunked loops and of
  // kernel calls per run (for tests and profiles).
  int loop_count() const;
  int kernel_count() const;

  // The compiled stages; defined in fused_loop.cc.
  struct Program;

 private:
  explicit FusedLoop(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_FUSED_LOOP_H_
