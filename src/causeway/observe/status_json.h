// What the head's HTTP endpoints say, formatted from one ObservedState
// (cluster_observer.h): `/api/status` as JSON (nlohmann) and `/metrics` as
// Prometheus text. Field and metric names are stable and documented in
// docs/operate.md; a new one may be added, none renamed. Pure functions.
#ifndef CAUSEWAY_OBSERVE_STATUS_JSON_H_
#define CAUSEWAY_OBSERVE_STATUS_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/base/ids.h"
#include "causeway/observe/cluster_observer.h"
#include "causeway/transport/control_channel.h"
#include "nlohmann/json.hpp"

namespace causeway::observe {

// The version of the JSON layout (`"schema"`): goes up only when a field
// changes meaning or goes away.
inline constexpr int kStatusSchema = 1;
// Queued ops listed per device (the rest are counted, not listed).
inline constexpr size_t kMaxQueuedOpsListed = 64;

// One device as both endpoints show it.
struct DeviceRow {
  DeviceId device;
  HostId host;
  IslandId island;
  std::string kind;
  // "busy": runs an op; "waiting": its next op waits for an input or for
  // memory; "idle": in a slice, nothing to run; "spare": in no slice,
  // nothing queued; "dead": its host is dead; "unknown": its host has not
  // answered yet.
  std::string state;
  const transport::DeviceStatus* status = nullptr;  // From its worker.
  int64_t memory_budget_bytes = 0;                  // From the topology.
  double busy_seconds = 0;  // Since the head started.
  // Of busy_seconds: inside collectives (finished ops).
  double collective_seconds = 0;
  double busy_ratio = 0;    // Over the last ObservedState::busy_window.
  // The sessions whose granted slices hold it.
  std::vector<SessionId> sessions;
};
std::vector<DeviceRow> DeviceRows(const ObservedState& state);

nlohmann::json StatusJson(const ObservedState& state);
std::string PrometheusText(const ObservedState& state);

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_STATUS_JSON_H_
