#include "causeway/observe/status_json.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "causeway/head/resource_manager.h"
#include "causeway/transport/topology.h"

namespace causeway::observe {
namespace {

using nlohmann::json;
using transport::DeviceStatus;
using transport::HostState;
using transport::OpStatus;

constexpr size_t kMaxHistoryPoints = 300;
constexpr size_t kMaxTransfersListed = 64;
constexpr size_t kMaxDeathsListed = 64;

double UnixSeconds(absl::Time t) {
  return static_cast<double>(absl::ToUnixMicros(t)) / 1e6;
}

// A steady-clock time of this process as wall-clock time, by `now`.
absl::Time WallTime(std::chrono::steady_clock::time_point when,
                    absl::Time now) {
  return now - absl::FromChrono(std::chrono::steady_clock::now() - when);
}

const DeviceStatus* FindDevice(const head::WorkerStatuses* workers,
                               HostId host, DeviceId device) {
  if (workers == nullptr) return nullptr;
  auto it = workers->find(host);
  if (it == workers->end() || !it->second.ok()) return nullptr;
  for (const DeviceStatus& status : it->second->devices) {
    if (status.device == device) return &status;
  }
  return nullptr;
}

bool Waits(const OpStatus& op) {
  return op.waiting_for_memory || !op.waiting_for.empty();
}

// Devices held by granted (or broken) slices, and by whom.
std::map<DeviceId, std::vector<SessionId>> Holders(
    const head::ClusterView& view) {
  std::map<DeviceId, std::vector<SessionId>> holders;
  for (const head::SliceInfo& slice : view.slices) {
    if (slice.state == head::SliceState::kQueued) continue;
    for (DeviceId device : slice.devices) {
      holders[device].push_back(slice.request.session);
    }
  }
  return holders;
}

// The oldest sample within the window, if any is older than `now`.
const Sample* WindowStart(const ObservedState& state) {
  for (const Sample& sample : state.samples) {
    if (sample.time >= state.now - state.busy_window &&
        sample.time < state.now - absl::Milliseconds(100)) {
      return &sample;
    }
  }
  return nullptr;
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

// Prometheus text exposition (version 0.0.4): one family at a time.
class PrometheusWriter {
 public:
  void Family(const std::string& name, const char* type, const char* help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  void Sample(const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& labels,
              double value) {
    absl::StrAppend(&out_, name);
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) out_ += ',';
        absl::StrAppend(&out_, labels[i].first, "=\"",
                        EscapeLabel(labels[i].second), "\"");
      }
      out_ += '}';
    }
    absl::StrAppend(&out_, " ", Number(value), "\n");
  }
  void HistogramSamples(const std::string& name, const Histogram& histogram) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < histogram.bounds.size(); ++i) {
      cumulative += histogram.counts[i];
      Sample(name + "_bucket", {{"le", Number(histogram.bounds[i])}},
             static_cast<double>(cumulative));
    }
    Sample(name + "_bucket", {{"le", "+Inf"}},
           static_cast<double>(histogram.count));
    Sample(name + "_sum", {}, histogram.sum);
    Sample(name + "_count", {}, static_cast<double>(histogram.count));
  }
  std::string Take() { return std::move(out_); }

  static std::string Number(double value) {
    if (value == static_cast<double>(static_cast<int64_t>(value)) &&
        value < 9e15 && value > -9e15) {
      return absl::StrCat(static_cast<int64_t>(value));
    }
    return absl::StrFormat("%.9g", value);
  }

 private:
  static std::string EscapeLabel(const std::string& value) {
    std::string out;
    for (char c : value) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    return out;
  }

  std::string out_;
};

}  // namespace

std::vector<DeviceRow> DeviceRows(const ObservedState& state) {
  const transport::Topology& topology = *state.view.topology;
  const std::map<DeviceId, std::vector<SessionId>> holders =
      Holders(state.view);
  const Sample* start = WindowStart(state);
  std::vector<DeviceRow> rows;
  rows.reserve(topology.num_devices());
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    const transport::DeviceInfo& info = topology.device(DeviceId(d));
    DeviceRow row;
    row.device = info.id;
    row.host = info.host;
    row.island = info.island;
    row.kind = info.kind;
    row.memory_budget_bytes = info.memory_bytes;
    if (auto it = holders.find(info.id); it != holders.end()) {
      row.sessions = it->second;
    }
    row.status = FindDevice(state.workers.get(), info.host, info.id);
    row.busy_seconds = state.metrics.BusySeconds(info.id, state.now);
    if (auto it = state.metrics.devices.find(info.id);
        it != state.metrics.devices.end()) {
      row.collective_seconds = it->second.collective_seconds;
    }
    if (start != nullptr) {
      auto then = start->busy_seconds.find(info.id);
      const double before =
          then == start->busy_seconds.end() ? 0.0 : then->second;
      const double span = absl::ToDoubleSeconds(state.now - start->time);
      row.busy_ratio =
          std::clamp((row.busy_seconds - before) / span, 0.0, 1.0);
    }
    const HostState host_state = topology.host(info.host).state;
    if (host_state == HostState::kDead) {
      row.state = "dead";
      row.busy_ratio = 0;
    } else if (row.status == nullptr) {
      row.state = "unknown";
    } else if (row.status->running.has_value()) {
      row.state = "busy";
    } else if (!row.status->queued.empty() && Waits(row.status->queued[0])) {
      row.state = "waiting";
    } else if (row.sessions.empty() && row.status->queued.empty()) {
      row.state = "spare";
    } else {
      row.state = "idle";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

json StatusJson(const ObservedState& state) {
  const transport::Topology& topology = *state.view.topology;
  const std::vector<DeviceRow> rows = DeviceRows(state);

  json islands = json::array();
  for (int64_t i = 0; i < topology.num_islands(); ++i) {
    json hosts = json::array();
    for (HostId host : topology.HostsOfIsland(IslandId(i))) {
      hosts.push_back(host.value());
    }
    islands.push_back(json{{"island", i},
                           {"epoch", topology.epoch(IslandId(i))},
                           {"hosts", std::move(hosts)}});
  }

  json hosts = json::array();
  int64_t hosts_alive = 0;
  for (int64_t h = 0; h < topology.num_hosts(); ++h) {
    const transport::HostInfo& info = topology.host(HostId(h));
    if (info.state == HostState::kAlive) ++hosts_alive;
    json devices = json::array();
    for (DeviceId device : info.devices) devices.push_back(device.value());
    json host{{"host", h},
              {"island", info.island.value()},
              {"state", transport::HostStateName(info.state)},
              {"address", info.address},
              {"devices", std::move(devices)},
              {"heartbeat_age_seconds", nullptr},
              {"death", nullptr},
              {"status_error", nullptr}};
    if (auto age = state.view.heartbeat_ages.find(HostId(h));
        age != state.view.heartbeat_ages.end()) {
      host["heartbeat_age_seconds"] = absl::ToDoubleSeconds(age->second);
    }
    if (auto death = state.view.deaths.find(HostId(h));
        death != state.view.deaths.end()) {
      host["death"] = json{
          {"reason", death->second.reason},
          {"time_unix_seconds",
           UnixSeconds(WallTime(death->second.declared, state.now))}};
    }
    if (info.state == HostState::kAlive && state.workers != nullptr) {
      auto answer = state.workers->find(HostId(h));
      if (answer == state.workers->end()) {
        host["status_error"] = "not asked yet";
      } else if (!answer->second.ok()) {
        host["status_error"] = std::string(answer->second.status().message());
      }
    }
    hosts.push_back(std::move(host));
  }

  json devices = json::array();
  std::map<std::string, int64_t> device_states;
  for (const DeviceRow& row : rows) {
    ++device_states[row.state];
    json sessions = json::array();
    for (SessionId session : row.sessions) sessions.push_back(session.value());
    json device{{"device", row.device.value()},
                {"host", row.host.value()},
                {"island", row.island.value()},
                {"kind", row.kind},
                {"state", row.state},
                {"sessions", std::move(sessions)},
                {"running", nullptr},
                {"queue_length", 0},
                {"queued", json::array()},
                {"ops_completed", 0},
                {"busy_ratio", row.busy_ratio},
                {"busy_seconds", row.busy_seconds},
                {"collective_seconds", row.collective_seconds},
                {"memory",
                 {{"budget_bytes", row.memory_budget_bytes},
                  {"used_bytes", nullptr},
                  {"waiting_bytes", nullptr}}}};
    if (row.status != nullptr) {
      const DeviceStatus& status = *row.status;
      if (status.running.has_value()) device["running"] = OpJson(*status.running);
      device["queue_length"] = status.queued.size();
      json queued = json::array();
      for (size_t i = 0;
           i < status.queued.size() && i < kMaxQueuedOpsListed; ++i) {
        queued.push_back(OpJson(status.queued[i]));
      }
      device["queued"] = std::move(queued);
      device["ops_completed"] = status.ops_completed;
      device["memory"] = json{{"budget_bytes", status.memory.budget_bytes},
                              {"used_bytes", status.memory.used_bytes},
                              {"waiting_bytes", status.memory.waiting_bytes}};
    }
    devices.push_back(std::move(device));
  }

  json sessions = json::array();
  for (const head::SessionView& session : state.view.sessions) {
    json slices = json::array();
    for (const head::SessionView::Slice& slice : session.slices) {
      json devices_of = json::array();
      for (DeviceId device : slice.devices) devices_of.push_back(device.value());
      slices.push_back(json{
          {"slice", slice.handle.value()},
          {"state", slice.state},
          {"requested_devices", slice.requested_devices},
          {"requested_island", slice.requested_island.has_value()
                                   ? json(slice.requested_island->value())
                                   : json(nullptr)},
          {"island", slice.devices.empty() ? json(nullptr)
                                           : json(slice.island.value())},
          {"devices", std::move(devices_of)},
          {"mesh_shape", slice.mesh_shape},
          {"generation", slice.generation},
          {"failure", slice.failure.empty() ? json(nullptr)
                                            : json(slice.failure)}});
    }
    sessions.push_back(json{{"session", session.id.value()},
                            {"name", session.name},
                            {"leased", session.leased},
                            {"priority", session.priority},
                            {"weight", session.weight},
                            {"executables", session.executables},
                            {"arrays", session.arrays},
                            {"deferred_ops", session.deferred},
                            {"slices", std::move(slices)}});
  }

  // Free devices per island, for what blocks a queued request.
  std::map<int64_t, int64_t> free_devices;
  for (const DeviceRow& row : rows) {
    if (row.state != "dead" && row.sessions.empty()) {
      ++free_devices[row.island.value()];
    }
  }
  json requests = json::array();
  int64_t position = 0;
  for (const head::SliceInfo& slice : state.view.slices) {
    if (slice.state != head::SliceState::kQueued) continue;
    std::string blocked;
    if (slice.request.island.has_value()) {
      blocked = absl::StrCat("needs ", slice.request.num_devices,
                             " devices on island ",
                             slice.request.island->value(), ", ",
                             free_devices[slice.request.island->value()],
                             " free there");
    } else {
      int64_t most = 0;
      for (const auto& [island, n] : free_devices) most = std::max(most, n);
      blocked = absl::StrCat("needs ", slice.request.num_devices,
                             " devices on one island, at most ", most,
                             " free on any");
    }
    if (position > 0) {
      absl::StrAppend(&blocked, "; ", position, " request(s) ahead of it");
    }
    ++position;
    requests.push_back(json{
        {"slice_id", slice.id.value()},
        {"session", slice.request.session.value()},
        {"devices", slice.request.num_devices},
        {"island", slice.request.island.has_value()
                       ? json(slice.request.island->value())
                       : json(nullptr)},
        {"priority", slice.request.priority},
        {"shared", slice.request.shared},
        {"blocked_by", blocked}});
  }

  std::vector<std::pair<absl::Time, json>> dated_deaths;
  for (const auto& [host, death] : state.view.deaths) {
    const absl::Time when = WallTime(death.declared, state.now);
    dated_deaths.emplace_back(
        when, json{{"host", host.value()},
                   {"reason", death.reason},
                   {"reason_label", DeathReasonLabel(death.reason)},
                   {"time_unix_seconds", UnixSeconds(when)}});
  }
  std::sort(dated_deaths.begin(), dated_deaths.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  json deaths = json::array();
  for (size_t i = 0; i < dated_deaths.size() && i < kMaxDeathsListed; ++i) {
    deaths.push_back(std::move(dated_deaths[i].second));
  }

  json failures = json::array();
  for (auto it = state.metrics.recent_failures.rbegin();
       it != state.metrics.recent_failures.rend(); ++it) {
    failures.push_back(json{{"time_unix_seconds", UnixSeconds(it->time)},
                            {"device", it->device.value()},
                            {"host", it->host.value()},
                            {"session", it->session},
                            {"program", it->program},
                            {"seq", it->seq},
                            {"code", it->code},
                            {"message", it->message}});
  }

  json transfers = json::array();
  int64_t transfer_bytes = 0;
  for (const TransferInFlight& transfer : state.metrics.transfers_in_flight) {
    transfer_bytes += transfer.bytes;
    if (transfers.size() >= kMaxTransfersListed) continue;
    transfers.push_back(
        json{{"transfer", transfer.transfer_id},
             {"source_device", transfer.source_device.value()},
             {"destination_device", transfer.destination_device.value()},
             {"bytes", transfer.bytes},
             {"age_seconds",
              std::max(0.0, absl::ToDoubleSeconds(state.now - transfer.started))},
             {"description", transfer.description}});
  }

  // Launches per second and mean utilisation of the alive devices, from
  // one sample to the next.
  int64_t alive_devices = 0;
  for (const DeviceRow& row : rows) {
    if (row.state != "dead") ++alive_devices;
  }
  json history = json::array();
  const size_t first = state.samples.size() > kMaxHistoryPoints + 1
                           ? state.samples.size() - kMaxHistoryPoints - 1
                           : 0;
  for (size_t i = first + 1; i < state.samples.size(); ++i) {
    const Sample& a = state.samples[i - 1];
    const Sample& b = state.samples[i];
    const double span = absl::ToDoubleSeconds(b.time - a.time);
    if (span <= 0) continue;
    double busy = 0;
    for (const auto& [device, seconds] : b.busy_seconds) {
      auto before = a.busy_seconds.find(device);
      busy += seconds - (before == a.busy_seconds.end() ? 0.0 : before->second);
    }
    history.push_back(json{
        {"time_unix_seconds", UnixSeconds(b.time)},
        {"launches_per_second", (b.launches - a.launches) / span},
        {"utilisation",
         alive_devices == 0
             ? 0.0
             : std::clamp(busy / span / alive_devices, 0.0, 1.0)}});
  }

  int64_t ops = 0, launch_failures = 0;
  for (const auto& [code, n] : state.metrics.ops) ops += n;
  for (const auto& [code, n] : state.metrics.launch_failures) {
    launch_failures += n;
  }
  json states = json::object();
  for (const char* name :
       {"busy", "waiting", "idle", "spare", "dead", "unknown"}) {
    states[name] = device_states[name];
  }
  return json{
      {"schema", kStatusSchema},
      {"time_unix_seconds", UnixSeconds(state.now)},
      {"workers_time_unix_seconds", state.workers == nullptr
                                        ? json(nullptr)
                                        : json(UnixSeconds(state.workers_at))},
      {"topology_version", topology.version()},
      {"summary",
       {{"islands", topology.num_islands()},
        {"hosts", topology.num_hosts()},
        {"hosts_alive", hosts_alive},
        {"devices", topology.num_devices()},
        {"device_states", std::move(states)},
        {"sessions", state.view.sessions.size()},
        {"slice_requests_waiting", requests.size()},
        {"launches", state.metrics.TotalLaunches()},
        {"launch_failures", launch_failures},
        {"ops", ops},
        {"transfers_in_flight", state.metrics.transfers_in_flight.size()},
        {"transfer_bytes_in_flight", transfer_bytes}}},
      {"islands", std::move(islands)},
      {"hosts", std::move(hosts)},
      {"devices", std::move(devices)},
      {"sessions", std::move(sessions)},
      {"slice_requests", std::move(requests)},
      {"deaths", std::move(deaths)},
      {"failures", std::move(failures)},
      {"transfers_in_flight", std::move(transfers)},
      {"history", std::move(history)}};
}

std::string PrometheusText(const ObservedState& state) {
  const transport::Topology& topology = *state.view.topology;
  const std::vector<DeviceRow> rows = DeviceRows(state);
  const MetricsSnapshot& m = state.metrics;
  PrometheusWriter w;
  auto device_labels = [](const DeviceRow& row) {
    return std::vector<std::pair<std::string, std::string>>{
        {"device", absl::StrCat(row.device.value())},
        {"host", absl::StrCat(row.host.value())},
        {"island", absl::StrCat(row.island.value())}};
  };

  w.Family("causeway_islands", "gauge", "Islands of the cluster.");
  w.Sample("causeway_islands", {}, topology.num_islands());
  std::map<std::string, int64_t> host_states = {
      {"joining", 0}, {"alive", 0}, {"dead", 0}};
  for (int64_t h = 0; h < topology.num_hosts(); ++h) {
    ++host_states[transport::HostStateName(topology.host(HostId(h)).state)];
  }
  w.Family("causeway_hosts", "gauge", "Hosts (worker processes) by state.");
  for (const auto& [name, n] : host_states) {
    w.Sample("causeway_hosts", {{"state", name}}, n);
  }
  std::map<std::string, int64_t> device_states = {
      {"busy", 0}, {"waiting", 0}, {"idle", 0},
      {"spare", 0}, {"dead", 0},   {"unknown", 0}};
  for (const DeviceRow& row : rows) ++device_states[row.state];
  w.Family("causeway_devices", "gauge", "Devices by state.");
  for (const auto& [name, n] : device_states) {
    w.Sample("causeway_devices", {{"state", name}}, n);
  }

  w.Family("causeway_device_busy_ratio", "gauge",
           "Share of the last minute the device spent running ops (0..1).");
  for (const DeviceRow& row : rows) {
    w.Sample("causeway_device_busy_ratio", device_labels(row), row.busy_ratio);
  }
  w.Family("causeway_device_busy_seconds_total", "counter",
           "Seconds the device spent running ops since the head started.");
  for (const DeviceRow& row : rows) {
    w.Sample("causeway_device_busy_seconds_total", device_labels(row),
             row.busy_seconds);
  }
  w.Family("causeway_device_collective_seconds_total", "counter",
           "Seconds the device's ops spent inside collectives (waiting for "
           "their peers included) since the head started; part of its busy "
           "seconds.");
  for (const DeviceRow& row : rows) {
    w.Sample("causeway_device_collective_seconds_total", device_labels(row),
             row.collective_seconds);
  }
  w.Family("causeway_device_memory_used_bytes", "gauge",
           "Bytes of the device's buffers (reserved and ready).");
  for (const DeviceRow& row : rows) {
    if (row.status == nullptr) continue;
    w.Sample("causeway_device_memory_used_bytes", device_labels(row),
             row.status->memory.used_bytes);
  }
  w.Family("causeway_device_memory_budget_bytes", "gauge",
           "The device's memory budget in bytes.");
  for (const DeviceRow& row : rows) {
    w.Sample("causeway_device_memory_budget_bytes", device_labels(row),
             row.memory_budget_bytes);
  }
  w.Family("causeway_device_queue_length", "gauge",
           "Ops queued on the device behind the running one.");
  for (const DeviceRow& row : rows) {
    if (row.status == nullptr) continue;
    w.Sample("causeway_device_queue_length", device_labels(row),
             row.status->queued.size());
  }

  w.Family("causeway_launches_total", "counter",
           "Launches (program executions) dispatched, by island.");
  for (int64_t i = 0; i < topology.num_islands(); ++i) {
    auto it = m.launches.find(IslandId(i));
    w.Sample("causeway_launches_total", {{"island", absl::StrCat(i)}},
             it == m.launches.end() ? 0 : it->second);
  }
  w.Family("causeway_launch_failures_total", "counter",
           "Launches with a failed op, by the first failure's status code.");
  for (const auto& [code, n] : m.launch_failures) {
    w.Sample("causeway_launch_failures_total", {{"code", code}}, n);
  }
  w.Family("causeway_device_ops_total", "counter",
           "Ops (one partition of a launch on one device) finished, by "
           "status code.");
  for (const auto& [code, n] : m.ops) {
    w.Sample("causeway_device_ops_total", {{"code", code}}, n);
  }
  w.Family("causeway_dispatch_latency_seconds", "histogram",
           "From the head dispatching a launch to its op reaching a "
           "device's queue.");
  w.HistogramSamples("causeway_dispatch_latency_seconds", m.dispatch_latency);
  w.Family("causeway_op_duration_seconds", "histogram",
           "Running time of ops on their devices.");
  w.HistogramSamples("causeway_op_duration_seconds", m.op_duration);
  w.Family("causeway_op_collective_seconds", "histogram",
           "Per op of a program with collectives: its time inside them "
           "(all-reduce, all-gather, reduce-scatter, all-to-all, "
           "collective-permute), waiting for its peers included.");
  w.HistogramSamples("causeway_op_collective_seconds", m.op_collective_time);
  w.Family("causeway_collectives_total", "counter",
           "Collective operations made by finished ops (one per device).");
  w.Sample("causeway_collectives_total", {}, m.collectives);

  w.Family("causeway_transfer_bytes_total", "counter",
           "Bytes moved between devices by transfers that completed.");
  w.Sample("causeway_transfer_bytes_total", {}, m.transfer_bytes);
  w.Family("causeway_transfers_total", "counter",
           "Transfer pieces finished, by status code.");
  for (const auto& [code, n] : m.transfers) {
    w.Sample("causeway_transfers_total", {{"code", code}}, n);
  }
  w.Family("causeway_transfer_duration_seconds", "histogram",
           "From a piece leaving its source to its destination taking it.");
  w.HistogramSamples("causeway_transfer_duration_seconds",
                     m.transfer_duration);
  w.Family("causeway_transfers_in_flight", "gauge",
           "Transfer pieces started and not finished.");
  w.Sample("causeway_transfers_in_flight", {}, m.transfers_in_flight.size());

  std::map<std::string, int64_t> deaths = {
      {"heartbeat", 0}, {"connection", 0}, {"start", 0}, {"other", 0}};
  for (const auto& [reason, n] : m.host_deaths) deaths[reason] += n;
  w.Family("causeway_host_deaths_total", "counter",
           "Hosts declared dead, by reason.");
  for (const auto& [reason, n] : deaths) {
    w.Sample("causeway_host_deaths_total", {{"reason", reason}}, n);
  }
  w.Family("causeway_host_heartbeat_age_seconds", "gauge",
           "Seconds since the host last answered a heartbeat (alive hosts).");
  for (const auto& [host, age] : state.view.heartbeat_ages) {
    w.Sample("causeway_host_heartbeat_age_seconds",
             {{"host", absl::StrCat(host.value())}},
             absl::ToDoubleSeconds(age));
  }

  w.Family("causeway_sessions", "gauge", "Open client sessions.");
  w.Sample("causeway_sessions", {}, state.view.sessions.size());
  int64_t waiting = 0;
  for (const head::SliceInfo& slice : state.view.slices) {
    if (slice.state == head::SliceState::kQueued) ++waiting;
  }
  w.Family("causeway_slice_requests_waiting", "gauge",
           "Slice requests queued for devices.");
  w.Sample("causeway_slice_requests_waiting", {}, waiting);
  return w.Take();
}

}  // namespace causeway::observe
