// What a worker tells the head unasked (transport::WorkerListener) is
// checked before the head acts on it: a worker speaks only for its own
// devices, and a notice about a host whose death is being handled is
// covered by that handling. Pure functions of the topology.
#ifndef CAUSEWAY_HEAD_WORKER_NOTICES_H_
#define CAUSEWAY_HEAD_WORKER_NOTICES_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Trace events the head takes from one worker's batch.
inline constexpr size_t kMaxTraceEventsPerBatch = size_t{1} << 16;

// An OpDone is believed only from the host of its device.
bool OpDoneIsFromItsDevice(const transport::Topology& topology,
                           const transport::OpDone& done);

// A piece its sender could not deliver is the head's business only while
// both its hosts are alive (a dead one's failure handling covers it).
bool BothEndsAlive(const transport::Topology& topology,
                   const transport::UndeliveredPiece& piece);

// The trace events of `host` to replay: the first kMaxTraceEventsPerBatch,
// less those of other hosts' devices (ops and waits elsewhere, transfers it
// took no part in). InvalidArgument for a clock offset beyond a day.
absl::StatusOr<std::vector<trace::EventRecord>> OwnTraceEvents(
    HostId host, std::vector<trace::EventRecord> events,
    absl::Duration clock_offset);

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_WORKER_NOTICES_H_
