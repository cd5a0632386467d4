#include "causeway/head/status_report.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace causeway::head {
namespace {

using nlohmann::json;
using transport::DeviceStatus;
using transport::HostState;
using transport::OpStatus;

std::string OpText(const OpStatus& op) {
  std::string line =
      absl::StrCat("'", op.program, "' seq ", op.seq, " partition ",
                   op.partition, " [", op.session, "]");
  if (op.waiting_for_memory) absl::StrAppend(&line, " waits for memory");
  if (!op.waiting_for.empty()) {
    absl::StrAppend(&line, " waits for ", absl::StrJoin(op.waiting_for, "; "));
  }
  return line;
}

json OpJson(const OpStatus& op) {
  return json{{"program", op.program},
              {"seq", op.seq},
              {"island", op.island.value()},
              {"partition", op.partition},
              {"session", op.session},
              {"waiting_for", op.waiting_for},
              {"waiting_for_memory", op.waiting_for_memory}};
}

std::string DeviceText(const DeviceStatus& device) {
  std::string text = absl::StrCat(
      "  device ", device.device.value(), ": ",
      device.running.has_value()
          ? absl::StrCat("running ", OpText(*device.running))
          : std::string("idle"),
      "; ", device.queued.size(), " queued, ", device.ops_completed,
      " done; memory ", device.memory.used_bytes, "/",
      device.memory.budget_bytes, " bytes",
      device.memory.num_waiting > 0
          ? absl::StrCat(", ", device.memory.num_waiting,
                         " waiting reservation(s)")
          : std::string(),
      "\n");
  for (const OpStatus& op : device.queued) {
    absl::StrAppend(&text, "    queued ", OpText(op), "\n");
  }
  return text;
}

json DeviceJson(const DeviceStatus& device) {
  json queued = json::array();
  for (const OpStatus& op : device.queued) queued.push_back(OpJson(op));
  return json{{"device", device.device.value()},
              {"running", device.running.has_value() ? OpJson(*device.running)
                                                     : json(nullptr)},
              {"queued", std::move(queued)},
              {"ops_completed", device.ops_completed},
              {"memory",
               {{"budget_bytes", device.memory.budget_bytes},
                {"used_bytes", device.memory.used_bytes},
                {"waiting_bytes", device.memory.waiting_bytes},
                {"num_waiting", device.memory.num_waiting}}}};
}

// The steady clock's time as an integer of microseconds: comparable with
// another process's steady clock on the same machine.
json DeathJson(const HostDeath& death) {
  return json{{"reason", death.reason},
              {"declared_steady_us",
               std::chrono::duration_cast<std::chrono::microseconds>(
                   death.declared.time_since_epoch())
                   .count()}};
}

}  // namespace

transport::StatusReport BuildStatusReport(const StatusInputs& inputs) {
  const transport::Topology& topology = *inputs.topology;
  std::string text = absl::StrCat("topology version ", topology.version(), ": ",
                                  topology.num_islands(), " islands, ",
                                  topology.num_hosts(), " hosts\n");
  json hosts = json::array();
  for (int64_t h = 0; h < topology.num_hosts(); ++h) {
    const transport::HostInfo& info = topology.host(HostId(h));
    const char* state = transport::HostStateName(info.state);
    json host{{"host", h},
              {"island", info.island.value()},
              {"state", state},
              {"alive", info.state == HostState::kAlive},
              {"incarnation", info.incarnation},
              {"address", info.address}};
    const std::string heading =
        absl::StrCat("host ", h, " (island ", info.island.value(), ")");
    auto answer = inputs.workers.find(HostId(h));
    auto death = inputs.deaths.find(HostId(h));
    if (death != inputs.deaths.end()) {
      absl::StrAppend(&text, heading, ": ", state, " (", death->second.reason,
                      ")\n");
      host["death"] = DeathJson(death->second);
    } else if (info.state != HostState::kAlive) {
      absl::StrAppend(&text, heading, ": ", state, "\n");
    } else if (answer == inputs.workers.end() || !answer->second.ok()) {
      const std::string error =
          answer == inputs.workers.end()
              ? std::string("did not answer")
              : std::string(answer->second.status().message());
      absl::StrAppend(&text, heading, ": no status (", error, ")\n");
      host["error"] = error;
    } else {
      const transport::WorkerStatus& worker = *answer->second;
      absl::StrAppend(&text, heading, "\n");
      json devices = json::array();
      for (const DeviceStatus& device : worker.devices) {
        absl::StrAppend(&text, DeviceText(device));
        devices.push_back(DeviceJson(device));
      }
      for (const std::string& receive : worker.pending_receives) {
        absl::StrAppend(&text, "  receive ", receive, "\n");
      }
      host["devices"] = std::move(devices);
      host["pending_receives"] = worker.pending_receives;
    }
    hosts.push_back(std::move(host));
  }
  json sessions = json::array();
  for (const SessionSummary& session : inputs.sessions) {
    absl::StrAppend(
        &text, "session ", session.id.value(), " '", session.name,
        "': ", session.slices, " slices, ", session.executables,
        " executables, ", session.arrays, " arrays",
        session.deferred == 0
            ? std::string()
            : absl::StrCat(", ", session.deferred, " ops waiting for a slice"),
        session.leased ? "" : " (held open)", "\n");
    sessions.push_back(json{{"session", session.id.value()},
                            {"name", session.name},
                            {"slices", session.slices},
                            {"executables", session.executables},
                            {"arrays", session.arrays},
                            {"deferred", session.deferred},
                            {"leased", session.leased}});
  }
  json epochs = json::array();
  for (int64_t i = 0; i < topology.num_islands(); ++i) {
    epochs.push_back(topology.epoch(IslandId(i)));
  }
  absl::StrAppend(&text, inputs.resources);
  if (!inputs.scheduling.empty()) {
    absl::StrAppend(&text, "\nscheduling:\n", inputs.scheduling);
  }
  json report{{"topology_version", topology.version()},
              {"island_epochs", std::move(epochs)},
              {"hosts", std::move(hosts)},
              {"sessions", std::move(sessions)},
              {"resources", inputs.resources},
              {"scheduling", inputs.scheduling}};
  // Invalid UTF-8 from a remote party is replaced, not thrown on.
  return transport::StatusReport{
      std::move(text),
      report.dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace causeway::head
