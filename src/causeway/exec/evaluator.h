// The evaluator: runs an HLO module as one partition of an SPMD program on a
// CPU device. An Evaluator is built once per module (it checks that every
// instruction is supported and precomputes what it can) and then runs many
// times; Run is thread-safe, so N device threads may run the same Evaluator
// at once, each as its own partition.
#ifndef CAUSEWAY_EXEC_EVALUATOR_H_
#define CAUSEWAY_EXEC_EVALUATOR_H_

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/exec/collectives.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::exec {

// Who is running: the partition (and replica) this run is, and how it
// reaches its peers for collectives.
struct RunContext {
  int64_t partition_id = 0;
  int64_t replica_id = 0;
  // Names this run on every participant: collectives of one run meet
  // under it (CollectiveInstanceKey::run_id). Every participant of a run
  // passes the same id; successive runs use distinct ids.
  uint64_t run_id = 0;
  // May be null for a program without collectives, or one whose device
  // grid (num_partitions × replica_count) is a single device; a collective
  // of a larger program then fails with FailedPrecondition.
  Collectives* collectives = nullptr;
  // If set, read at every while-loop iteration: once true, Run stops and
  // returns kCancelled (a program may loop forever; this is how its owner
  // stops it). Null: never cancelled. `collectives->Cancelled()` is read
  // there too: a run whose peer failed stops with that error.
  const std::atomic<bool>* cancelled = nullptr;
  // The most bytes of values the run may hold at once, charged as they are
  // allocated (base/memory_account.h): values it computes, temporaries of
  // its kernels, its outputs (its arguments belong to the caller). An
  // allocation past it fails the run with ResourceExhausted naming the
  // instruction and the bytes. <= 0: the machine's physical memory.
  int64_t memory_limit_bytes = 0;
};

class ExecutionPlan;

class Evaluator {
 public:
  struct Options {
    // Fusion bodies run as fused loops (fused_loop.h) where they can. With
    // false every body runs op by op: the same bits, more slowly (tests
    // compare the two).
    bool fused_loops = true;
  };

  // The entry computation is level 1. Real programs nest a few levels
  // (JAX's deepest: a scan in a scan in a cond, about 10); one level takes
  // about 2 KiB of stack in an optimized build, several times that under
  // the sanitizers, so 256 levels stay far inside any thread's stack.
  static constexpr int kMaxNestingDepth = 256;

  ~Evaluator();

  // Fails with Unimplemented naming the op and its line for any
  // unsupported instruction, and for a module whose computations nest (an
  // instruction of one calling the next: call, fusion, while, conditional,
  // a reducer, ...) more than kMaxNestingDepth deep, naming the depth: a
  // run recurses once per level, and a deeper module would overflow the
  // stack of the thread running it. `module` must outlive the Evaluator.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(
      const hlo::Module& module, Options options);
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(
      const hlo::Module& module) {
    return Create(module, Options());
  }

  // Runs the entry computation. `arguments` must match the entry's
  // parameters in shape and dtype (InvalidArgument naming the parameter
  // otherwise). Returns the root value (a tuple for tuple-shaped roots).
  absl::StatusOr<hlo::Literal> Run(std::span<const hlo::Literal> arguments,
                                   const RunContext& context) const;

  const hlo::Module& module() const { return module_; }

  // How many add(x, dot) pairs the plan runs as one accumulating dot
  // (EvalDotAccumulate), over all computations.
  int64_t num_dot_add_fusions() const;
  // How many fusion bodies run as fused loops (fused_loop.h) rather than
  // op by op.
  int64_t num_fused_loops() const;

 private:
  Evaluator(const hlo::Module& module, std::unique_ptr<ExecutionPlan> plan);
  const hlo::Module& module_;
  std::unique_ptr<ExecutionPlan> plan_;  // Immutable after Create.
};

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_EVALUATOR_H_
