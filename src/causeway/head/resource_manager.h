// The resource manager: grants virtual slices (n devices in one island) on
// the physical devices of the cluster, queues what does not fit, remaps
// slices around failed devices and onto hosts that join. See
// docs/resource_manager.md.
//
// A slice moves through
//
//   queued --grant--> granted --device lost--> granted (remapped, generation+1)
//      |                 |  \                  broken  (waits, first in line)
//      |                 |   `--------------------'  --devices free--> granted
//      |                 `--shrunk (allow_smaller)--> granted, smaller
//      |                                  --a host joins--> granted, regrown
//      `--cancel/release-+--release-----------------> gone
//
// * Hosts join at any time (AddHost: their devices join the pool); a dead
//   host's devices never come back.
// * RequestSlice returns at once with the slice's id and a Future that
//   resolves when the slice is granted (at once if it fits, later if it
//   queues), or with an error: ResourceExhausted if it can never fit (no
//   island is, or may become, big enough: see Options::wait_for_hosts),
//   Cancelled if it was cancelled, released, its session ended or the manager
//   was destroyed. The id is usable before the grant: an executable can be
//   compiled for a queued slice and loaded when the future resolves ("compile
//   before provisioning").
// * Exclusive slices (the default) own their devices. Shared slices may map
//   onto devices other shared slices also use; the island scheduler then
//   interleaves their launches (time-sharing, as in the paper's
//   multi-tenancy experiments). A device is either free, owned by one
//   exclusive slice, or used by any number of shared slices.
// * Queue: broken slices first, then requests by priority (higher first),
//   FIFO within a priority. A waiting request holds back later requests that
//   could use the same islands, so a large request is never starved by small
//   ones.
//
// Thread-safe. Results (futures) and events (listeners) are delivered
// outside the manager's lock, one at a time, in the order they happened, on
// the thread of a caller whose call produced them: usually the caller itself
// before it returns; if another thread is delivering at that moment, that
// thread delivers them instead (so a call may return before its own events
// are delivered). Listeners and future continuations may call back into the
// manager.
#ifndef CAUSEWAY_HEAD_RESOURCE_MANAGER_H_
#define CAUSEWAY_HEAD_RESOURCE_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Names one slice for its whole life (it keeps its id across remaps).
using SliceId = StrongId<struct SliceIdTag>;

struct SliceRequest {
  SessionId session;
  int64_t num_devices = 1;
  // Optional; the product must equal num_devices. Empty means {num_devices}.
  std::vector<int64_t> mesh_shape;
  std::optional<IslandId> island;  // Empty: any island.
  int priority = 0;                // Higher is granted first.
  // When a failure leaves too few spare devices, the slice may shrink along
  // its first mesh axis instead of breaking.
  bool allow_smaller = false;
  // Time-shared devices (see the header comment); exclusive when false.
  bool shared = false;
};

// A granted slice's current mapping.
struct SliceGrant {
  SliceId id;
  SessionId session;
  IslandId island;
  std::vector<DeviceId> devices;  // Virtual device i -> physical device.
  std::vector<int64_t> mesh_shape;
  // 1 at the first grant; +1 every time the mapping changes (remap, break).
  uint64_t generation = 0;
  bool shared = false;
};

// What RequestSlice returns: the id at once, the grant when it happens.
struct SliceTicket {
  SliceId id;
  Future<SliceGrant> grant;
};

enum class SliceState { kQueued, kGranted, kBroken };

// A snapshot of one slice, for queries and status.
struct SliceInfo {
  SliceId id;
  SliceState state = SliceState::kQueued;
  SliceRequest request;
  // Granted: the mapping. Broken: the last mapping, lost devices included
  // (the healthy ones stay reserved for the slice). Queued: empty.
  IslandId island;
  std::vector<DeviceId> devices;
  std::vector<int64_t> mesh_shape;
  uint64_t generation = 0;
};

struct SliceEvent {
  enum class Kind {
    kGranted,   // A queued request got devices: old empty, new the mapping.
    kRemapped,  // New mapping (failure, repair, rebalance): old -> new.
    kBroken,    // Lost devices and no spares: old the mapping, new empty.
                // The slice waits first in line; a kRemapped follows when
                // devices come back.
    kReleased,  // Released (or its session ended): old the mapping.
  };
  Kind kind;
  SliceId slice;
  SessionId session;
  IslandId island;
  std::vector<DeviceId> old_devices;
  std::vector<DeviceId> new_devices;
  std::vector<int64_t> mesh_shape;  // After the event.
  uint64_t generation = 0;          // After the event.
};

const char* SliceStateName(SliceState state);
const char* SliceEventKindName(SliceEvent::Kind kind);

class ResourceManager {
 public:
  struct Options {
    // Requests waiting at once; more are refused with ResourceExhausted.
    int64_t max_queued_requests = 10000;
    // A request for more devices than any island has now, or for an island
    // no host has joined yet, waits for hosts to join instead of being
    // refused (a cluster whose workers connect after its clients).
    bool wait_for_hosts = false;
    // With wait_for_hosts: what the cluster is configured to become. A
    // request no such cluster could grant (an island >= `islands`, more
    // devices than `island_devices`) is refused at once instead of waiting
    // for hosts that will never come. Zero: not configured (it waits). An
    // island that grew beyond its configured size counts at its real size.
    int64_t islands = 0;
    int64_t island_devices = 0;
  };

  // Every alive host of `topology` is in the pool.
  explicit ResourceManager(std::shared_ptr<const transport::Topology> topology)
      : ResourceManager(std::move(topology), Options()) {}
  ResourceManager(std::shared_ptr<const transport::Topology> topology,
                  Options options);
  // Fails every queued request with Cancelled. Listeners are not called.
  ~ResourceManager();

  ResourceManager(const ResourceManager&) = delete;
  ResourceManager& operator=(const ResourceManager&) = delete;

  // The snapshot it works on (the last AddHost's).
  std::shared_ptr<const transport::Topology> topology() const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Grants at once if the slice fits (and no earlier request waits for the
  // same islands), else queues it. Devices are chosen on as few hosts as
  // possible, contiguous where they can be, in the island where the slice
  // needs the fewest hosts. The future fails with InvalidArgument for a bad
  // request, ResourceExhausted if no island is big enough (ever) or the
  // queue is full, Cancelled as described in the header comment.
  SliceTicket RequestSlice(SliceRequest request);

  // Fails a queued request with Cancelled. NotFound for an unknown slice,
  // FailedPrecondition for one already granted (use Release).
  absl::Status CancelRequest(SliceId slice);

  // Returns a slice's devices to the pool (a queued request is cancelled
  // instead) and grants queued requests that now fit. NotFound if unknown.
  absl::Status Release(SliceId slice);

  // Releases every slice of the session and cancels its queued requests.
  // Returns how many slices it ended.
  int64_t ReleaseSession(SessionId session);

  // Failure: the devices leave the pool, and every slice that used one is
  // remapped onto spare healthy devices of its island (keeping its id and
  // the virtual positions of its surviving devices), shrunk if it allows it,
  // or broken. InvalidArgument for an unknown id. Marking a dead device dead
  // again does nothing.
  absl::Status MarkDeviceDead(DeviceId device);
  absl::Status MarkHostDead(HostId host);

  // A host joined: `topology` is a snapshot that has it alive (the manager
  // keeps the newest it has seen). Its devices join the pool, free; then
  // slices of its island that shrank regrow (by whole rows, up to the size
  // they asked for), broken slices are repaired and queued requests
  // granted. InvalidArgument for a host not alive in `topology`; nothing
  // happens if it is dead in a newer snapshot the manager has.
  absl::Status AddHost(std::shared_ptr<const transport::Topology> topology,
                       HostId host);

  // Moves a granted (or broken) slice. With `devices`: exactly that mapping
  // (same count as now, one island, healthy, not held by other slices as
  // the slice's kind requires); without: the best placement in its island,
  // as for a new request. Emits kRemapped and bumps the generation when the
  // mapping changes. FailedPrecondition for a queued slice, InvalidArgument
  // for a bad device list, Unavailable when the devices are not free.
  absl::StatusOr<SliceGrant> Remap(
      SliceId slice, std::optional<std::vector<DeviceId>> devices);

  // `listener` is called for every event from now on (see the header comment
  // for threads and order). Listeners live as long as the manager.
  void AddListener(std::function<void(const SliceEvent&)> listener);

  absl::StatusOr<SliceInfo> GetSlice(SliceId slice) const;
  // Every slice, by id.
  std::vector<SliceInfo> ListSlices() const;
  // Healthy devices no slice uses, in id order (empty for an unknown island).
  std::vector<DeviceId> FreeDevices(IslandId island) const;
  // A multi-line view for `causeway status`: every device's holder, every
  // slice, the queue in order.
  std::string DebugString() const;

 private:
  struct DeviceState {
    bool healthy = true;   // In the pool: its host joined and has not died.
    SliceId exclusive;     // Invalid (-1) when none.
    int64_t shared_users = 0;
  };
  struct Slice {
    SliceId id;
    SliceRequest request;
    SliceState state = SliceState::kQueued;
    IslandId island;
    std::vector<DeviceId> devices;
    std::vector<bool> held;  // Per position: false once that device is lost.
    std::vector<int64_t> mesh_shape;
    uint64_t generation = 0;
    Promise<SliceGrant> promise;  // Valid until the first grant.
    bool in_queue = false;
    std::tuple<int, int64_t, uint64_t> queue_key;  // While in_queue.
  };
  // One thing to deliver outside the lock: an event and/or a future result.
  struct Notification {
    Notification() = default;
    explicit Notification(SliceEvent e) : event(std::move(e)) {}
    std::optional<SliceEvent> event;
    Promise<SliceGrant> promise;
    absl::StatusOr<SliceGrant> result = absl::UnknownError("unset");
  };
  using Notifications = std::vector<Notification>;

  absl::Status ValidateRequest(const SliceRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With wait_for_hosts: refuses what the configured cluster never grants.
  absl::Status ValidateAgainstConfigurationLocked(
      const SliceRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a queued request waits: how many devices it needs and how many
  // its islands have (healthy and free now), for status.
  std::string WaitReasonLocked(const Slice& slice) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Device bookkeeping.
  bool EligibleLocked(DeviceId device, bool shared) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AcquireLocked(const Slice& slice, DeviceId device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseDeviceLocked(const Slice& slice, DeviceId device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseHoldingsLocked(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AcquireAllLocked(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Placement {
    std::vector<DeviceId> devices;  // In id order.
    int64_t hosts = 0;     // How many hosts they are on.
    int64_t eligible = 0;  // Devices of the island the slice could use.
    int64_t load = 0;      // Shared slices already on the chosen devices.
  };
  // `count` eligible devices of `island` on as few hosts as possible,
  // contiguous where they can be, none of `exclude` (a slice's own devices
  // when it grows or is repaired: a shared slice's devices are eligible for
  // other shared slices, not twice for itself); nullopt if the island has
  // too few.
  std::optional<Placement> ChoosePlacementLocked(
      IslandId island, int64_t count, bool shared,
      const std::vector<DeviceId>& exclude = {}) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t CountEligibleLocked(IslandId island, bool shared,
                              const std::vector<DeviceId>& exclude = {}) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Queue.
  void EnqueueLocked(Slice& slice, int klass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DequeueLocked(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Grants (and repairs) in queue order whatever fits now.
  void ServeQueueLocked(Notifications& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TryGrantLocked(Slice& slice, const std::vector<IslandId>& islands,
                      Notifications& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces the lost positions of a slice with spares (or shrinks it).
  // Returns false, changing nothing, if it cannot.
  bool TryRepairLocked(Slice& slice, Notifications& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void MarkDeadLocked(const std::vector<DeviceId>& devices, Notifications& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A shrunk slice takes free devices back, by whole rows.
  bool TryRegrowLocked(Slice& slice, Notifications& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a slice in any state; a queued one's future gets `cancelled`.
  void EndSliceLocked(Slice& slice, const absl::Status& cancelled,
                      Notifications& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SliceGrant GrantOf(const Slice& slice) const;
  SliceInfo InfoOf(const Slice& slice) const;
  SliceEvent EventOf(const Slice& slice, SliceEvent::Kind kind,
                     std::vector<DeviceId> old_devices,
                     std::vector<DeviceId> new_devices) const;

  // Queues `notifications` and delivers everything pending unless another
  // thread is delivering already. Call without holding mu_.
  void Deliver(Notifications notifications) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const transport::Topology> topology_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceState> devices_ ABSL_GUARDED_BY(mu_);
  std::map<SliceId, Slice> slices_ ABSL_GUARDED_BY(mu_);  // By id.
  // Broken slices (class 0) before requests (class 1); by priority, FIFO.
  std::map<std::tuple<int, int64_t, uint64_t>, SliceId> queue_
      ABSL_GUARDED_BY(mu_);
  int64_t queued_requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_slice_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_queue_seq_ ABSL_GUARDED_BY(mu_) = 0;

  // Delivery (see Deliver).
  std::vector<std::shared_ptr<const std::function<void(const SliceEvent&)>>>
      listeners_ ABSL_GUARDED_BY(mu_);
  Notifications pending_ ABSL_GUARDED_BY(mu_);
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_RESOURCE_MANAGER_H_
