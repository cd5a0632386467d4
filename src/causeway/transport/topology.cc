#include "causeway/transport/topology.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"

namespace causeway::transport {
namespace {

std::string FormatBytes(int64_t bytes) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (bytes >= kGiB) {
    return absl::StrFormat("%.1fGiB", static_cast<double>(bytes) / kGiB);
  }
  if (bytes >= kMiB) {
    return absl::StrFormat("%.1fMiB", static_cast<double>(bytes) / kMiB);
  }
  return absl::StrCat(bytes, "B");
}

absl::Status OutOfRange(const char* what, int64_t value, int64_t count) {
  if (count == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", value, " does not exist: the cluster has no ",
                     what, "s"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " ", value, " does not exist: the cluster has ",
                   what, "s 0..", count - 1));
}

}  // namespace

absl::StatusOr<Topology> Topology::Uniform(int64_t islands,
                                           int64_t hosts_per_island,
                                           int64_t devices_per_host,
                                           int64_t memory_per_device,
                                           std::string kind) {
  if (islands < 1 || hosts_per_island < 1 || devices_per_host < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a cluster needs at least 1 island, 1 host per island and 1 device "
        "per host; got ",
        islands, " x ", hosts_per_island, " x ", devices_per_host));
  }
  if (islands > kMaxIslands || hosts_per_island > kMaxHosts ||
      devices_per_host > kMaxDevices ||
      islands * hosts_per_island > kMaxHosts ||
      islands * hosts_per_island * devices_per_host > kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster of ", islands, " x ", hosts_per_island, " x ",
        devices_per_host, " is too large: at most ", kMaxIslands,
        " islands, ", kMaxHosts, " hosts and ", kMaxDevices, " devices"));
  }
  HostSpec host{devices_per_host, std::move(kind), memory_per_device};
  std::vector<IslandSpec> specs(
      islands, IslandSpec{std::vector<HostSpec>(hosts_per_island, host)});
  return Create(specs);
}

absl::Status Topology::ValidateHostSpec(const HostSpec& spec,
                                        const std::string& where) {
  if (spec.num_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has ", spec.num_devices, " devices; it needs at least 1"));
  }
  if (spec.num_devices > kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has ", spec.num_devices, " devices; at most ", kMaxDevices));
  }
  if (spec.kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": device kind is empty"));
  }
  if (spec.memory_per_device <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": memory per device must be positive, got ",
                     spec.memory_per_device));
  }
  return absl::OkStatus();
}

const char* HostStateName(HostState state) {
  switch (state) {
    case HostState::kJoining:
      return "joining";
    case HostState::kAlive:
      return "alive";
    case HostState::kDead:
      return "dead";
  }
  return "?";
}

HostId Topology::AddHostUnchecked(IslandId island, const HostSpec& spec,
                                  std::string incarnation, std::string address,
                                  HostState state) {
  while (num_islands() <= island.value()) {
    island_devices_.emplace_back();
    island_hosts_.emplace_back();
    island_epochs_.push_back(0);
  }
  const HostId host(num_hosts());
  HostInfo info;
  info.id = host;
  info.island = island;
  info.incarnation = std::move(incarnation);
  info.address = std::move(address);
  info.state = state;
  for (int64_t d = 0; d < spec.num_devices; ++d) {
    const DeviceId device(num_devices());
    devices_.push_back(DeviceInfo{device, host, island, d, spec.kind,
                                  spec.memory_per_device});
    info.devices.push_back(device);
    island_devices_[island.value()].push_back(device);
  }
  hosts_.push_back(std::move(info));
  island_hosts_[island.value()].push_back(host);
  max_island_size_ = std::max(
      max_island_size_,
      static_cast<int64_t>(island_devices_[island.value()].size()));
  return host;
}

absl::StatusOr<Topology> Topology::Create(
    absl::Span<const IslandSpec> islands) {
  if (islands.empty()) {
    return absl::InvalidArgumentError("a cluster needs at least one island");
  }
  if (static_cast<int64_t>(islands.size()) > kMaxIslands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster has ", islands.size(), " islands; at most ", kMaxIslands));
  }
  Topology topology;
  topology.version_ = 1;
  for (size_t i = 0; i < islands.size(); ++i) {
    const IslandId island(static_cast<int64_t>(i));
    if (islands[i].hosts.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("island ", i, " has no hosts"));
    }
    for (size_t h = 0; h < islands[i].hosts.size(); ++h) {
      const HostSpec& spec = islands[i].hosts[h];
      CW_RETURN_IF_ERROR(
          ValidateHostSpec(spec, absl::StrCat("island ", i, " host ", h)));
      if (topology.num_hosts() >= kMaxHosts ||
          spec.num_devices > kMaxDevices - topology.num_devices()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cluster is too large: at most ", kMaxHosts,
                         " hosts and ", kMaxDevices, " devices"));
      }
      topology.AddHostUnchecked(island, spec, "", "", HostState::kAlive);
    }
    topology.island_epochs_[i] = 1;
  }
  return topology;
}

Topology Topology::Empty() { return Topology(); }

absl::StatusOr<Topology> Topology::WithHost(IslandId island,
                                            const HostSpec& spec,
                                            std::string incarnation,
                                            std::string address) const {
  if (island.value() < 0 || island.value() >= kMaxIslands) {
    return absl::InvalidArgumentError(
        absl::StrCat("island ", island.value(), " is out of range: islands "
                     "are numbered 0..", kMaxIslands - 1));
  }
  CW_RETURN_IF_ERROR(ValidateHostSpec(
      spec, absl::StrCat("a new host on island ", island.value())));
  if (num_hosts() >= kMaxHosts ||
      spec.num_devices > kMaxDevices - num_devices()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the cluster is full: it has ", num_hosts(), " hosts and ",
        num_devices(), " devices, and allows at most ", kMaxHosts,
        " hosts and ", kMaxDevices, " devices"));
  }
  Topology next = *this;
  next.AddHostUnchecked(island, spec, std::move(incarnation),
                        std::move(address), HostState::kJoining);
  ++next.version_;
  return next;
}

Topology Topology::WithHostAlive(HostId host) const {
  CW_CHECK(HasHost(host)) << "no host " << host;
  CW_CHECK(hosts_[host.value()].state == HostState::kJoining)
      << "host " << host << " is " << HostStateName(hosts_[host.value()].state)
      << ", not joining";
  Topology next = *this;
  HostInfo& info = next.hosts_[host.value()];
  info.state = HostState::kAlive;
  ++next.island_epochs_[info.island.value()];
  ++next.version_;
  return next;
}

Topology Topology::WithHostDead(HostId host) const {
  CW_CHECK(HasHost(host)) << "no host " << host;
  Topology next = *this;
  HostInfo& info = next.hosts_[host.value()];
  if (info.state == HostState::kDead) return next;
  if (info.state == HostState::kAlive) ++next.island_epochs_[info.island.value()];
  info.state = HostState::kDead;
  ++next.version_;
  return next;
}

Topology Topology::WithNewEpoch(IslandId island) const {
  CW_CHECK(HasIsland(island)) << "no island " << island;
  Topology next = *this;
  ++next.island_epochs_[island.value()];
  ++next.version_;
  return next;
}

uint64_t Topology::epoch(IslandId island) const {
  CW_CHECK(HasIsland(island)) << "no island " << island;
  return island_epochs_[island.value()];
}

absl::Status Topology::ValidateDevice(DeviceId device) const {
  if (HasDevice(device)) return absl::OkStatus();
  return OutOfRange("device", device.value(), num_devices());
}

absl::Status Topology::ValidateHost(HostId host) const {
  if (HasHost(host)) return absl::OkStatus();
  return OutOfRange("host", host.value(), num_hosts());
}

absl::Status Topology::ValidateIsland(IslandId island) const {
  if (HasIsland(island)) return absl::OkStatus();
  return OutOfRange("island", island.value(), num_islands());
}

const DeviceInfo& Topology::device(DeviceId device) const {
  CW_CHECK(HasDevice(device)) << "no device " << device;
  return devices_[device.value()];
}

IslandId Topology::IslandOfHost(HostId host) const {
  return this->host(host).island;
}

const HostInfo& Topology::host(HostId host) const {
  CW_CHECK(HasHost(host)) << "no host " << host;
  return hosts_[host.value()];
}

absl::Span<const DeviceId> Topology::DevicesOfHost(HostId host) const {
  return this->host(host).devices;
}

absl::Span<const DeviceId> Topology::DevicesOfIsland(IslandId island) const {
  CW_CHECK(HasIsland(island)) << "no island " << island;
  return island_devices_[island.value()];
}

absl::Span<const HostId> Topology::HostsOfIsland(IslandId island) const {
  CW_CHECK(HasIsland(island)) << "no island " << island;
  return island_hosts_[island.value()];
}

std::string Topology::DebugString() const {
  std::string out = absl::StrCat(num_islands(), " islands, ", num_hosts(),
                                 " hosts, ", num_devices(), " devices");
  for (int64_t i = 0; i < num_islands(); ++i) {
    absl::StrAppend(&out, "\n  island ", i, ":");
    for (HostId host : island_hosts_[i]) {
      const std::vector<DeviceId>& devices = hosts_[host.value()].devices;
      const DeviceInfo& first = devices_[devices.front().value()];
      absl::StrAppend(&out, " host ", host.value(), " [",
                      devices.front().value());
      if (devices.size() > 1) {
        absl::StrAppend(&out, "-", devices.back().value());
      }
      absl::StrAppend(&out, " ", first.kind, " ",
                      FormatBytes(first.memory_bytes), "]");
      if (hosts_[host.value()].state != HostState::kAlive) {
        absl::StrAppend(&out, " ", HostStateName(hosts_[host.value()].state));
      }
    }
  }
  return out;
}

}  // namespace causeway::transport
