// Module verification: everything the runtime relies on before it runs a
// program, checked once at load time so that a bad program is refused with
// a line number instead of failing (or crashing) inside the executor.
//
// Checks, in order, reporting the FIRST problem found (computations and
// instructions in the order written):
//  - structure: an entry computation exists; every computation has a root
//    that belongs to it; parameter numbers are dense 0..n-1; operands are
//    instructions of the same computation defined earlier; called
//    computations belong to the module and the call graph has no cycles;
//  - unsupported ops: Unimplemented("line L: unsupported op 'foo'
//    (instruction 'x')"), and for custom-call "line L: unsupported
//    custom-call target 'T' (instruction 'x')";
//  - shapes: every declared shape is compatible (layouts ignored) with
//    InferShape's result, which also checks called computations' signatures
//    (reducers take 2N scalars and return N, fusion/call/while/conditional
//    parameters match their operands, ...);
//  - collectives: replica_groups ids are the ids of the collective's group
//    mode (replica ids without channel_id, partition ids with it,
//    num_partitions * replica_count device ids with use_global_device_ids);
//    listed groups hold each of them exactly once (as XLA requires: a
//    device outside every group has no peers when it runs) and all have
//    one size; source_target_pairs ids lie in range and no source or target
//    repeats.
//
// Stateless and thread-safe.
#ifndef CAUSEWAY_HLO_VERIFIER_H_
#define CAUSEWAY_HLO_VERIFIER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"

namespace causeway::hlo {

absl::Status VerifyModule(const Module& module);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_VERIFIER_H_
