// The head's status view (`causeway status`, SessionChannel::GetStatus):
// for every host its state (for a dead one why and when it was declared
// dead), and for every device of an alive one the
// running op, the queued ops and what each waits for; every session; the
// resource manager's and the schedulers' views. As text for people and as
// JSON (nlohmann) for tools. Pure.
#ifndef CAUSEWAY_HEAD_STATUS_REPORT_H_
#define CAUSEWAY_HEAD_STATUS_REPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/base/ids.h"
#include "causeway/head/membership.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

struct SessionSummary {
  SessionId id;
  std::string name;
  int64_t slices = 0;
  int64_t executables = 0;
  int64_t arrays = 0;
  int64_t deferred = 0;  // Operations waiting for a slice.
  bool leased = false;
};

struct StatusInputs {
  std::shared_ptr<const transport::Topology> topology;  // Required.
  // What each alive host answered (hosts missing here did not answer).
  std::map<HostId, absl::StatusOr<transport::WorkerStatus>> workers;
  std::map<HostId, HostDeath> deaths;  // Membership::Deaths().
  std::vector<SessionSummary> sessions;
  std::string resources;   // ResourceManager::DebugString().
  std::string scheduling;  // Dispatcher::DebugString().
};

transport::StatusReport BuildStatusReport(const StatusInputs& inputs);

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_STATUS_REPORT_H_
