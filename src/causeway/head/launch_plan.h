// Launch planning: from an Execute (or a Copy) a session sent to the
// launch the dispatcher schedules, or the error its outputs get. See
// docs/dispatch.md ("Execute").
//
// Planning validates everything without side effects on the workers:
// argument and output counts; each output spec gives the program's
// per-device shape and its sharding is the program's output sharding; each
// argument is a known, non-failed array whose global shape, cut by the
// program's parameter sharding, gives the parameter shape; inputs plus
// outputs fit in each device's memory budget. It places each argument: read
// directly if it already lives on the slice's devices in the program's
// sharding, otherwise staged through a transfer into a buffer the launch
// drops after running. The only state it touches is the array table's
// handle counter and the transfer id counter.
//
// Not thread-safe: the session service plans under its lock.
#ifndef CAUSEWAY_HEAD_LAUNCH_PLAN_H_
#define CAUSEWAY_HEAD_LAUNCH_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/base/ids.h"
#include "causeway/head/array_table.h"
#include "causeway/head/compile_cache.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/transfer_plan.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// What planning needs to know about where the launch runs.
struct PlanContext {
  SessionId session;
  std::string session_name;
  IslandId island;
  std::vector<DeviceId> devices;  // The slice's, now.
  const transport::Topology* topology = nullptr;
  ArrayTable* arrays = nullptr;  // Arguments are looked up here.
  uint64_t* next_transfer_id = nullptr;
};

struct LaunchPlan {
  std::shared_ptr<PreparedLaunch> launch;
  // The output arrays, in order, to add to the table before scheduling.
  std::vector<std::shared_ptr<const ArrayRecord>> outputs;
};

// Plans running `program` (bound to the context's devices, on slice
// `program_slice`) as `op`. The error names the program and the argument or
// output at fault: NotFound for an unknown handle, InvalidArgument for a
// shape or sharding that does not fit, ResourceExhausted for what can never
// fit in memory, an argument's own error if it failed.
absl::StatusOr<LaunchPlan> PlanExecute(const PlanContext& context,
                                       const BoundProgram& program,
                                       SliceHandle program_slice,
                                       const transport::ExecuteOp& op);

struct CopyPlan {
  // One transfer per source array (an assembly reads several).
  std::vector<std::pair<TransferPlan, std::shared_ptr<ArrayBuffers>>> transfers;
  std::shared_ptr<const ArrayRecord> destination;  // To add to the table.
};

// Plans copying (and resharding) the array `op.source` onto the context's
// devices as `op.destination` describes, or, with `op.pieces`, assembling
// the destination from shards of other arrays.
absl::StatusOr<CopyPlan> PlanCopy(const PlanContext& context,
                                  const transport::CopyOp& op);

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_LAUNCH_PLAN_H_
