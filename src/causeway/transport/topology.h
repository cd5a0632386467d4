// The physical cluster: islands of hosts, each host owning devices.
//
// Ids are dense and global: devices are numbered 0..num_devices()-1 and
// hosts 0..num_hosts()-1 in the order they joined, islands
// 0..num_islands()-1. A host's devices have consecutive ids. Device i of the
// cluster is always DeviceId(i). Ids are never reused: a host that dies
// stays in the topology, dead, with its devices; a restarted worker joins as
// a new host with new device ids (docs/membership.md).
//
// A Topology is an immutable snapshot, so it is thread-safe: share it as
// `std::shared_ptr<const Topology>`. Membership changes make a new snapshot
// (WithHost, WithHostDead) with a higher version(); every change to an
// island's hosts also bumps that island's membership epoch, which the
// collectives across processes key their communicators on. Lookups of an id
// the topology does not have are programmer errors (CHECK); validate ids
// that come from users with HasDevice / HasHost / HasIsland or
// ValidateDevice first.
#ifndef CAUSEWAY_TRANSPORT_TOPOLOGY_H_
#define CAUSEWAY_TRANSPORT_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"

namespace causeway::transport {

// One device as the topology knows it.
struct DeviceInfo {
  DeviceId id;
  HostId host;
  IslandId island;
  int64_t index_on_host = 0;  // 0..devices on its host - 1.
  std::string kind;           // "cpu" (later "cuda", "sim").
  int64_t memory_bytes = 0;   // The device's memory budget.
};

// A host joins (its ids are assigned, its devices are not used yet), is
// alive, and dies; a dead host never comes back.
enum class HostState { kJoining, kAlive, kDead };
const char* HostStateName(HostState state);

// One host as the topology knows it.
struct HostInfo {
  HostId id;
  IslandId island;
  std::vector<DeviceId> devices;  // Consecutive ids.
  // Chosen by the worker process, unique per start ("" in embedded mode).
  std::string incarnation;
  // Where its data plane listens ("" in embedded mode).
  std::string address;
  HostState state = HostState::kAlive;
};

// What to build: one entry per host of an island.
struct HostSpec {
  int64_t num_devices = 1;
  std::string kind = "cpu";
  int64_t memory_per_device = int64_t{1} << 30;
};
struct IslandSpec {
  std::vector<HostSpec> hosts;
};

class Topology {
 public:
  // Sizes beyond these are refused: a cluster description is user input.
  static constexpr int64_t kMaxIslands = 1 << 12;
  static constexpr int64_t kMaxHosts = 1 << 16;
  static constexpr int64_t kMaxDevices = 1 << 20;

  // `islands` × `hosts_per_island` × `devices_per_host` devices of `kind`,
  // each with a memory budget of `memory_per_device` bytes. Every count must
  // be at least 1 and the memory positive; InvalidArgument otherwise.
  static absl::StatusOr<Topology> Uniform(int64_t islands,
                                          int64_t hosts_per_island,
                                          int64_t devices_per_host,
                                          int64_t memory_per_device,
                                          std::string kind = "cpu");

  // Any shape: islands in order, hosts in order within each island. Every
  // island needs a host and every host a device; kinds must be non-empty and
  // memory positive; InvalidArgument otherwise.
  static absl::StatusOr<Topology> Create(absl::Span<const IslandSpec> islands);

  // No islands, no hosts: a head before any worker joined (version 0).
  static Topology Empty();

  // This topology plus one joining host on `island` (which comes into
  // being, with any missing islands below it, if it is new): its id is
  // num_hosts(), its devices num_devices() onwards. The version goes up by
  // one. InvalidArgument for a bad spec or island, ResourceExhausted
  // beyond the size limits.
  absl::StatusOr<Topology> WithHost(IslandId island, const HostSpec& spec,
                                    std::string incarnation,
                                    std::string address) const;
  // This topology with the joining `host` alive (it must be joining;
  // CHECK). The version and its island's epoch go up by one.
  Topology WithHostAlive(HostId host) const;
  // This topology with `host` dead (it must exist; CHECK). Its ids stay
  // taken. The version goes up by one, and its island's epoch if it was
  // alive; a host that is dead already gives an equal copy.
  Topology WithHostDead(HostId host) const;
  // This topology with `island`'s epoch one higher (it must exist; CHECK):
  // after a launch across hosts failed, whose collectives' communicators
  // may be closed. The version goes up by one.
  Topology WithNewEpoch(IslandId island) const;

  // Goes up with every membership change.
  uint64_t version() const { return version_; }
  // The membership epoch of `island` (which must exist; CHECK): 1 for an
  // island created with its hosts, +1 for every later join and death.
  uint64_t epoch(IslandId island) const;

  int64_t num_islands() const {
    return static_cast<int64_t>(island_devices_.size());
  }
  int64_t num_hosts() const {
    return static_cast<int64_t>(hosts_.size());
  }
  int64_t num_devices() const { return static_cast<int64_t>(devices_.size()); }

  bool HasDevice(DeviceId device) const {
    return device.value() >= 0 && device.value() < num_devices();
  }
  bool HasHost(HostId host) const {
    return host.value() >= 0 && host.value() < num_hosts();
  }
  bool HasIsland(IslandId island) const {
    return island.value() >= 0 && island.value() < num_islands();
  }
  // OK, or InvalidArgument naming the device and the valid range.
  absl::Status ValidateDevice(DeviceId device) const;
  absl::Status ValidateHost(HostId host) const;
  absl::Status ValidateIsland(IslandId island) const;

  // Lookups; the id must exist (CHECK).
  const DeviceInfo& device(DeviceId device) const;
  HostId HostOf(DeviceId device) const { return this->device(device).host; }
  IslandId IslandOf(DeviceId device) const {
    return this->device(device).island;
  }
  IslandId IslandOfHost(HostId host) const;
  const HostInfo& host(HostId host) const;
  bool IsAlive(HostId host) const {
    return this->host(host).state == HostState::kAlive;
  }
  // In id order.
  absl::Span<const DeviceId> DevicesOfHost(HostId host) const;
  absl::Span<const DeviceId> DevicesOfIsland(IslandId island) const;
  absl::Span<const HostId> HostsOfIsland(IslandId island) const;
  // The most devices any one island has (dead ones included).
  int64_t MaxIslandSize() const { return max_island_size_; }

  // "2 islands, 4 hosts, 16 devices: island 0: host 0 [0-3 cpu 1.0GiB] ..."
  std::string DebugString() const;

 private:
  Topology() = default;

  // Appends a host (validated by the caller) and its devices.
  HostId AddHostUnchecked(IslandId island, const HostSpec& spec,
                          std::string incarnation, std::string address,
                          HostState state);
  static absl::Status ValidateHostSpec(const HostSpec& spec,
                                       const std::string& where);

  std::vector<DeviceInfo> devices_;                    // By device id.
  std::vector<HostInfo> hosts_;                        // By host id.
  std::vector<std::vector<DeviceId>> island_devices_;  // By island id.
  std::vector<std::vector<HostId>> island_hosts_;      // By island id.
  std::vector<uint64_t> island_epochs_;                // By island id.
  int64_t max_island_size_ = 0;
  uint64_t version_ = 0;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_TOPOLOGY_H_
