#include "causeway/head/worker_notices.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"

namespace causeway::head {

bool OpDoneIsFromItsDevice(const transport::Topology& topology,
                           const transport::OpDone& done) {
  return topology.HasDevice(done.device) &&
         topology.HostOf(done.device) == done.host;
}

bool BothEndsAlive(const transport::Topology& topology,
                   const transport::UndeliveredPiece& piece) {
  for (HostId host : {piece.source_host, piece.destination_host}) {
    if (!topology.HasHost(host) || !topology.IsAlive(host)) return false;
  }
  return true;
}

absl::StatusOr<std::vector<trace::EventRecord>> OwnTraceEvents(
    HostId host, std::vector<trace::EventRecord> events,
    absl::Duration clock_offset) {
  if (clock_offset > absl::Hours(24) || clock_offset < -absl::Hours(24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace events of host ", host.value(), " with a clock offset of ",
        absl::FormatDuration(clock_offset)));
  }
  if (events.size() > kMaxTraceEventsPerBatch) {
    events.resize(kMaxTraceEventsPerBatch);
  }
  std::erase_if(events, [host](const trace::EventRecord& record) {
    if (const auto* op = std::get_if<trace::OpEvent>(&record.event)) {
      return op->host != host;
    }
    if (const auto* wait = std::get_if<trace::WaitEvent>(&record.event)) {
      return wait->host != host;
    }
    const auto& transfer = std::get<trace::TransferEvent>(record.event);
    return transfer.source_host != host && transfer.destination_host != host;
  });
  return events;
}

}  // namespace causeway::head
