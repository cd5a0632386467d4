// The head's hosts: who they are (the topology snapshot), how to reach each
// (its control channel) and whether it is alive. See docs/membership.md.
//
// A host joins in two steps. Register gives it its HostId and DeviceIds
// (new ones, never reused) and puts it in the topology as joining; the
// caller then tells the worker its ids and, once the worker can take calls,
// Activate makes it alive with its channel: from then on the head uses it.
// A host dies at most once (MarkDead, joining or alive) and never comes
// back; why and when it was declared dead stay on record (Deaths); a restarted
// worker is a new incarnation and registers as a new host. Every change
// publishes a new topology snapshot (a higher version); a join or a death of an
// alive host also bumps its island's epoch.
//
// Thread-safe; nothing is called while the lock is held.
#ifndef CAUSEWAY_HEAD_MEMBERSHIP_H_
#define CAUSEWAY_HEAD_MEMBERSHIP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// What a worker says about itself when it joins. Everything in it comes
// from a remote party and is validated (Membership::Limits).
struct HostRegistration {
  IslandId island;
  transport::HostSpec devices;  // How many, of which kind, how much memory.
  // Chosen by the worker process, different for every start.
  std::string incarnation;
  // Where its data plane listens, passed on to its peers.
  std::string address;
};

// What the head gave a joining host.
struct HostAssignment {
  HostId host;
  IslandId island;
  std::vector<transport::DeviceInfo> devices;
  std::shared_ptr<const transport::Topology> topology;  // Including it.
};

// Why and when the head declared a host dead. `declared` is on the steady
// clock (CLOCK_MONOTONIC on Linux), so that another process of the same
// machine (a test that killed the worker) can compare it with its own.
struct HostDeath {
  std::string reason;  // "its connection broke: ...".
  std::chrono::steady_clock::time_point declared;
};

// What workers are told of `topology` (WorkerService::UpdateMembership).
transport::MembershipUpdate MembershipUpdateOf(
    const transport::Topology& topology);

class Membership {
 public:
  // Bounds on what a registering worker may ask for.
  struct Limits {
    int64_t max_islands = 1024;  // Island ids 0..max_islands-1.
    int64_t max_devices_per_host = 1024;
    int64_t max_memory_per_device = int64_t{1} << 50;
    size_t max_name_length = 256;    // Incarnation, address, device kind.
    int64_t max_joining_hosts = 64;  // Registered, not yet activated.
  };

  Membership() : Membership(Limits()) {}
  explicit Membership(Limits limits);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Step one of a join. InvalidArgument for a registration out of bounds
  // (naming the field), ResourceExhausted when too many hosts are joining
  // or the cluster is full, AlreadyExists for the incarnation of a host
  // that is alive or joining, FailedPrecondition for that of a dead one
  // (it must restart as a new incarnation).
  absl::StatusOr<HostAssignment> Register(const HostRegistration& host)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Step two: the joining host is alive and reached through `channel`.
  // FailedPrecondition unless it is joining (dead already, say).
  absl::Status Activate(HostId host,
                        std::shared_ptr<transport::ControlChannel> channel)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The host is dead (it was joining or alive) because of `reason`: its
  // channel is dropped, its death recorded. Returns its state before: kDead
  // if it was dead already or is unknown (nothing changes then).
  transport::HostState MarkDead(HostId host, std::string reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Moves `island` (which must exist) to a new epoch: a launch across its
  // hosts failed. Returns the new epoch.
  uint64_t BumpEpoch(IslandId island) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops every channel (the head is going away): a channel whose last
  // holder this was fails what it still has pending, now.
  void DropChannels() ABSL_LOCKS_EXCLUDED(mu_);

  std::shared_ptr<const transport::Topology> topology() const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The channel of an alive host; null otherwise.
  std::shared_ptr<transport::ControlChannel> Channel(HostId host) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every alive host with its channel, by host id.
  std::vector<std::pair<HostId, std::shared_ptr<transport::ControlChannel>>>
  LiveChannels() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every host declared dead so far, by host id.
  std::map<HostId, HostDeath> Deaths() const ABSL_LOCKS_EXCLUDED(mu_);
  // The head has finished handling `host`'s death (its arrays failed, its
  // slices remapped): AwaitDeathHandled returns.
  void DeathHandled(HostId host) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until DeathHandled(host); DeadlineExceeded if not by `deadline`.
  absl::Status AwaitDeathHandled(HostId host, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The error of a call to `host` that failed: DATA_LOSS if the host is
  // dead (what it held is gone), the call's own error otherwise (a
  // transient failure is not a death). OK stays OK.
  absl::Status CallError(HostId host, const absl::Status& status) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status Validate(const HostRegistration& host) const;

  const Limits limits_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const transport::Topology> topology_ ABSL_GUARDED_BY(mu_);
  std::map<HostId, std::shared_ptr<transport::ControlChannel>> channels_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, HostId> incarnations_ ABSL_GUARDED_BY(mu_);
  std::map<HostId, HostDeath> deaths_ ABSL_GUARDED_BY(mu_);
  std::set<HostId> deaths_handled_ ABSL_GUARDED_BY(mu_);
  int64_t joining_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_MEMBERSHIP_H_
