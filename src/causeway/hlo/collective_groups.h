// Which devices a collective's groups and an iota device list name: the one
// definition of XLA's collective group modes and of iota expansion, for the
// parser, the verifier, shape inference, shardings and the collectives of
// the executor.
//
// An iota list `[dims]T(perm)` is iota(prod(dims)) reshaped to `dims`,
// transposed by `perm` and flattened (XLA's IotaTileAssignment); replica
// groups `[G,S]<=[dims]T(perm)` cut that list into G groups of S, and a
// sharding's `devices=[tiles]<=[dims]T(perm)` lists its devices in it.
//
// Stateless and thread-safe.
#ifndef CAUSEWAY_HLO_COLLECTIVE_GROUPS_H_
#define CAUSEWAY_HLO_COLLECTIVE_GROUPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"

namespace causeway::hlo {

// How a collective's replica_groups (and source_target_pairs) ids are read
// (XLA's CollectiveOpGroupMode, chosen by channel_id and
// use_global_device_ids).
enum class CollectiveGroupMode {
  kCrossReplica,              // No channel_id: replica ids, the caller's
                              // partition.
  kCrossPartition,            // channel_id, an op without the flag:
                              // partition ids, the caller's replica.
  kCrossReplicaAndPartition,  // channel_id, use_global_device_ids=false on
                              // an op with the flag: replica ids, every
                              // partition of each replica in the group.
  kFlattenedId,               // use_global_device_ids=true: device indices
                              // replica * num_partitions + partition.
};
CollectiveGroupMode GetCollectiveGroupMode(const Instruction& instr);

// The opcodes that carry XLA's use_global_device_ids flag (all-reduce,
// all-gather, reduce-scatter); on the others a channel_id alone means
// partition ids.
bool HasGlobalDeviceIdsFlag(Opcode opcode);

// Most ids one iota expansion may produce.
inline constexpr int64_t kMaxIotaIds = int64_t{1} << 20;

// The iota list `[reshape_dims]T(transpose_perm)` (an empty perm is the
// identity). InvalidArgument when a dim is not positive, the perm is not a
// permutation of the dims, or the list holds more than kMaxIotaIds ids.
absl::StatusOr<std::vector<int64_t>> ExpandIota(
    const std::vector<int64_t>& reshape_dims,
    const std::vector<int64_t>& transpose_perm);

// The groups of `groups` as lists of ids: the explicit groups, or the iota
// form expanded when only it is given (empty reshape dims read as
// [num_groups * group_size]). Empty means one group of everyone.
// InvalidArgument for an iota form that is inconsistent or too large.
absl::StatusOr<std::vector<std::vector<int64_t>>> ExpandReplicaGroups(
    const ReplicaGroups& groups);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_COLLECTIVE_GROUPS_H_
