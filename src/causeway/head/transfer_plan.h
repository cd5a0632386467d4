// Transfer planning: how an array on one device list and sharding reaches
// another.
//
// Transfer plans (DESIGN "Move and reshard"): for each destination shard,
// the overlapping boxes of the source shards. Each box is one piece: the
// source's worker pushes it through the data plane straight into the
// destination buffer, which the destination's worker reserved. Among
// replicas of a source tile the plan picks the one on the destination
// device, else on its host, else the first. Padding of an uneven
// destination shard is zero-filled by the receiver.
//
// Pure functions.
#ifndef CAUSEWAY_HEAD_TRANSFER_PLAN_H_
#define CAUSEWAY_HEAD_TRANSFER_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"
#include "causeway/hlo/sharding_util.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Where an array's shards live: shard i on devices[i].
struct ArrayPlacement {
  hlo::Shape global_shape;
  hlo::Sharding sharding;
  std::vector<DeviceId> devices;
};

// The shard regions of `placement` (InvalidArgument if the sharding does
// not fit the shape or the device count).
absl::StatusOr<std::vector<hlo::ShardRegion>> RegionsOf(
    const ArrayPlacement& placement);

// True if both hold the same data in the same buffers: the same devices in
// the same order, and every shard the same region.
absl::StatusOr<bool> SamePlacement(const ArrayPlacement& a,
                                   const ArrayPlacement& b);

// One transfer: what the destination workers receive and what the source
// workers send, each addressed to its host.
struct TransferPlan {
  std::vector<std::pair<HostId, transport::ReceiveSpec>> receives;
  std::vector<std::pair<HostId, transport::SendSpec>> sends;
  int64_t bytes = 0;  // Moved in total, for traces.
};

// Plans moving array `source` (placed as `from`) into a new array
// `destination` (placed as `to`; same global shape). Transfer ids are taken
// from `*next_transfer_id`. InvalidArgument for mismatched shapes or
// shardings that do not fit.
absl::StatusOr<TransferPlan> PlanTransfer(ArrayHandle source,
                                          const ArrayPlacement& from,
                                          ArrayHandle destination,
                                          const ArrayPlacement& to,
                                          const transport::Topology& topology,
                                          uint64_t* next_transfer_id);

// A buffer that becomes one shard of an assembled array: `region` is the
// shard region it holds in its own array (its dims are the buffer's shape).
struct AssemblyPiece {
  BufferId buffer;
  DeviceId device;
  hlo::ShardRegion region;
};

// Plans an assembly: shard i of the new array `destination` (placed as `to`)
// is `pieces[i]`, moved whole to `to.devices[i]` (replicas are not compared:
// each destination shard takes its own piece). InvalidArgument unless there
// is one piece per destination shard, each holding that shard's shape.
absl::StatusOr<TransferPlan> PlanAssembly(
    const std::vector<AssemblyPiece>& pieces, ArrayHandle destination,
    const ArrayPlacement& to, const transport::Topology& topology,
    uint64_t* next_transfer_id);

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_TRANSFER_PLAN_H_
