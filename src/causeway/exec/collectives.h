// Collectives: how one participant of an SPMD program exchanges data with
// its peers for all-reduce, all-gather, reduce-scatter, all-to-all and
// collective-permute.
//
// The evaluator makes one call per collective instruction per participant.
// Every participant of a group makes the matching call with the same
// `CollectiveOp::key`; the implementation rendezvouses them, computes and
// returns each participant's own result. Implementations: in-process
// (threads of one process, in_process_collectives.h) and, later, a network
// one over the data plane; both see the same calls.
//
// This header also holds the semantics shared by every implementation (who
// is in my group, how values combine), so that a network implementation
// computes exactly what the in-process one does.
#ifndef CAUSEWAY_EXEC_COLLECTIVES_H_
#define CAUSEWAY_EXEC_COLLECTIVES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/exec/kernels.h"
#include "causeway/hlo/collective_groups.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::exec {

// Names one dynamic execution of one collective instruction: identical on
// every participant that takes part in it, distinct from every other
// execution (collectives inside while loops run many times per run).
struct CollectiveInstanceKey {
  uint64_t run_id = 0;          // The run (one execution of the program).
  int64_t instruction_id = 0;   // hlo::Instruction::unique_id.
  int64_t execution_count = 0;  // 0 for its first execution in this run.

  friend bool operator==(const CollectiveInstanceKey&,
                         const CollectiveInstanceKey&) = default;
  std::string ToString() const;
};

// One participant's call for one collective instruction.
struct CollectiveOp {
  // The collective: opcode, channel_id, replica_groups,
  // use_global_device_ids, dimensions, source_target_pairs, to_apply.
  const hlo::Instruction* instruction = nullptr;
  // Who is calling, and the size of the program's device grid
  // (replica_count × num_partitions devices).
  int64_t partition_id = 0;
  int64_t replica_id = 0;
  int64_t num_partitions = 1;
  int64_t replica_count = 1;
  CollectiveInstanceKey key;
  // Runs a reducer that is not a plain add/multiply/max/min/and/or, once per
  // element. May be null when the reducer is one of those (or the op has
  // none).
  const ComputationRunner* run_computation = nullptr;

  // The participant's device index in the grid: replica × partitions +
  // partition.
  int64_t device_index() const {
    return replica_id * num_partitions + partition_id;
  }
};

// The interface. Implementations are thread-safe: every participant calls
// from its own thread, concurrently. Calls block until the participant's
// group has arrived (or a deadline passes, or the collectives are
// cancelled).
class Collectives {
 public:
  virtual ~Collectives() = default;

  // all-reduce: each operand reduced elementwise over the group with
  // `to_apply`. One operand: an array result; several: a tuple.
  virtual absl::StatusOr<hlo::Literal> AllReduce(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) = 0;
  // all-gather: operands concatenated along dimensions[0] in group order.
  virtual absl::StatusOr<hlo::Literal> AllGather(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) = 0;
  // reduce-scatter: reduced like all-reduce, then member i keeps block i
  // along dimensions[0].
  virtual absl::StatusOr<hlo::Literal> ReduceScatter(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) = 0;
  // all-to-all. Array form (one operand, dimensions={d}): the operand is
  // split along d into group-size chunks, chunk j goes to member j, and the
  // received chunks are concatenated along d in member order. Tuple form
  // (one operand per member, no dimensions): operand j goes to member j and
  // result element j is what member j sent here.
  virtual absl::StatusOr<hlo::Literal> AllToAll(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) = 0;
  // collective-permute: the value of my source in source_target_pairs;
  // zeros when I am nobody's target.
  virtual absl::StatusOr<hlo::Literal> CollectivePermute(
      const CollectiveOp& op, hlo::Literal operand) = 0;

  // OK, or why these collectives were cancelled: a peer of the run failed
  // or the participant itself was cancelled, so the run's result is lost. The evaluator reads it at every while-loop
  // iteration and stops the run with it, so that a participant looping
  // without collectives does not outlive a failed peer forever. Cheap:
  // called once per iteration. Implementations that cannot tell return OK.
  virtual absl::Status Cancelled() const { return absl::OkStatus(); }
};

// --- Semantics shared by implementations. ---

// The devices (grid indices, replica × num_partitions + partition) in the
// caller's group, in group order; the caller is among them. InvalidArgument
// when the groups name devices outside the grid or the caller is in none.
absl::StatusOr<std::vector<int64_t>> GroupOf(const CollectiveOp& op);

// collective-permute: the device whose value the caller receives (-1 for
// none) and the devices it sends to, as grid indices. The set of devices
// that take part is `GroupOf`'s (everyone in the caller's domain).
struct PermutePeers {
  int64_t source = -1;
  std::vector<int64_t> targets;
};
absl::StatusOr<PermutePeers> PermutePeersOf(const CollectiveOp& op);

// Combines `inputs` (one per group member, in group order, equal shapes)
// elementwise with `op`'s reducer, left to right, so that every member gets
// the same bits. Plain add/multiply/maximum/minimum/and/or/xor reducers take
// a typed fast path; anything else runs the reducer per element through
// op.run_computation.
absl::StatusOr<hlo::Literal> ReduceInputs(
    const CollectiveOp& op, std::span<const hlo::Literal* const> inputs);

// dst[i] = a[i] ⊕ b[i] for i < n, in the element type it was made for; dst
// may alias a or b.
using ElementwiseCombine = void (*)(void* dst, const void* a, const void* b,
                                    int64_t n);
// The typed loop ReduceInputs uses for `op`'s reducer on elements of `type`:
// set when the reducer is a plain add/multiply/maximum/minimum/and/or/xor of
// its two parameters; null for any other reducer, and for a bitwise one on
// floating-point elements (which ReduceInputs refuses).
ElementwiseCombine PlainCombineOf(const CollectiveOp& op,
                                  hlo::PrimitiveType type);

// The dimension of an all-gather, reduce-scatter or array-form all-to-all
// (exactly one in dimensions={d}); InvalidArgument otherwise.
absl::StatusOr<int64_t> CollectiveDimension(const CollectiveOp& op);

// all-to-all: the array form (dimensions={d}) takes one operand, the tuple
// form one per group member; InvalidArgument naming the op otherwise.
absl::Status CheckAllToAllOperands(const CollectiveOp& op, size_t operands,
                                   size_t group_size);

// collective-permute: every device that takes part, as grid indices: the
// partitions of the caller's replica (channel_id given) or the replicas of
// its partition.
std::vector<int64_t> PermuteDomainOf(const CollectiveOp& op);

// Concatenates arrays of equal type along `dimension`.
absl::StatusOr<hlo::Literal> ConcatenateAlong(
    std::span<const hlo::Literal* const> parts, int64_t dimension);
// Block `index` of `count` equal blocks of `value` along `dimension`.
absl::StatusOr<hlo::Literal> BlockAlong(const hlo::Literal& value,
                                        int64_t dimension, int64_t count,
                                        int64_t index);

// "'all-reduce.3' (line 12)" for messages.
std::string DescribeCollective(const CollectiveOp& op);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_COLLECTIVES_H_
