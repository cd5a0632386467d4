#include "causeway/head/resource_manager.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"

namespace causeway::head {

using transport::Topology;
namespace {

// Queue classes: slices that lost devices wait before new requests.
constexpr int kRepairClass = 0;
constexpr int kRequestClass = 1;
constexpr size_t kMaxMeshRank = 8;

std::string IdList(const std::vector<DeviceId>& devices) {
  return absl::StrCat(
      "[",
      absl::StrJoin(devices, ",",
                    [](std::string* out, DeviceId d) {
                      absl::StrAppend(out, d.value());
                    }),
      "]");
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Takes `count` devices from one host's eligible devices (id order, or load
// order for shared slices). Exclusive slices take the shortest run of
// consecutive ids that is long enough, so larger runs stay whole.
std::vector<DeviceId> TakeFromHost(const std::vector<DeviceId>& eligible,
                                   int64_t count, bool shared) {
  if (!shared) {
    size_t best_start = 0;
    size_t best_length = 0;
    size_t start = 0;
    for (size_t i = 1; i <= eligible.size(); ++i) {
      if (i < eligible.size() &&
          eligible[i].value() == eligible[i - 1].value() + 1) {
        continue;
      }
      const size_t length = i - start;
      if (length >= static_cast<size_t>(count) &&
          (best_length == 0 || length < best_length)) {
        best_start = start;
        best_length = length;
      }
      start = i;
    }
    if (best_length > 0) {
      return std::vector<DeviceId>(eligible.begin() + best_start,
                                   eligible.begin() + best_start + count);
    }
  }
  return std::vector<DeviceId>(eligible.begin(), eligible.begin() + count);
}

}  // namespace

const char* SliceStateName(SliceState state) {
  switch (state) {
    case SliceState::kQueued:
      return "queued";
    case SliceState::kGranted:
      return "granted";
    case SliceState::kBroken:
      return "broken";
  }
  return "?";
}

const char* SliceEventKindName(SliceEvent::Kind kind) {
  switch (kind) {
    case SliceEvent::Kind::kGranted:
      return "granted";
    case SliceEvent::Kind::kRemapped:
      return "remapped";
    case SliceEvent::Kind::kBroken:
      return "broken";
    case SliceEvent::Kind::kReleased:
      return "released";
  }
  return "?";
}

ResourceManager::ResourceManager(std::shared_ptr<const Topology> topology,
                                 Options options)
    : options_(options), topology_(std::move(topology)) {
  CW_CHECK(topology_ != nullptr);
  absl::MutexLock lock(&mu_);
  devices_.resize(topology_->num_devices());
  for (int64_t d = 0; d < topology_->num_devices(); ++d) {
    devices_[d].healthy = topology_->IsAlive(topology_->HostOf(DeviceId(d)));
  }
}

std::shared_ptr<const Topology> ResourceManager::topology() const {
  absl::MutexLock lock(&mu_);
  return topology_;
}

ResourceManager::~ResourceManager() {
  std::vector<Promise<SliceGrant>> waiting;
  {
    absl::MutexLock lock(&mu_);
    CW_CHECK(!delivering_) << "ResourceManager destroyed while delivering";
    for (auto& [id, slice] : slices_) {
      if (slice.promise.IsValid()) waiting.push_back(std::move(slice.promise));
    }
  }
  for (Promise<SliceGrant>& promise : waiting) {
    promise.Set(absl::CancelledError(
        "the resource manager shut down before the slice was granted"));
  }
}

absl::Status ResourceManager::ValidateRequest(
    const SliceRequest& request) const {
  if (request.session.value() < 0) {
    return absl::InvalidArgumentError("slice request has no session");
  }
  if (request.num_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice request for ", request.num_devices,
                     " devices: a slice needs at least 1 device"));
  }
  if (!request.mesh_shape.empty()) {
    if (request.mesh_shape.size() > kMaxMeshRank) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape ", ShapeString(request.mesh_shape),
                       " has more than ", kMaxMeshRank, " axes"));
    }
    int64_t product = 1;
    for (int64_t dim : request.mesh_shape) {
      if (dim < 1 || dim > request.num_devices) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh shape ", ShapeString(request.mesh_shape),
            " does not fit a slice of ", request.num_devices,
            " devices: every axis must be between 1 and the device count"));
      }
      product *= dim;
      if (product > request.num_devices) break;
    }
    if (product != request.num_devices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh shape ", ShapeString(request.mesh_shape), " does not have ",
          request.num_devices, " devices: its axes must multiply to the "
          "requested device count"));
    }
  }
  if (request.num_devices > Topology::kMaxDevices) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a slice of ", request.num_devices,
                     " devices can never be granted: a cluster has at most ",
                     Topology::kMaxDevices));
  }
  if (request.island.has_value() &&
      (request.island->value() < 0 ||
       request.island->value() >= Topology::kMaxIslands)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "island ", request.island->value(), " does not exist: islands are "
        "numbered 0..", Topology::kMaxIslands - 1));
  }
  // Hosts that join later may make it fit, up to the configured cluster.
  if (options_.wait_for_hosts) {
    return ValidateAgainstConfigurationLocked(request);
  }
  if (request.island.has_value()) {
    if (absl::Status status = topology_->ValidateIsland(*request.island);
        !status.ok()) {
      return status;
    }
    const int64_t size = static_cast<int64_t>(
        topology_->DevicesOfIsland(*request.island).size());
    if (request.num_devices > size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a slice of ", request.num_devices,
          " devices can never be granted on island ",
          request.island->value(), ": it has ", size, " devices"));
    }
  } else if (request.num_devices > topology_->MaxIslandSize()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a slice of ", request.num_devices,
        " devices can never be granted: the largest island has ",
        topology_->MaxIslandSize(), " devices (a slice lives in one island)"));
  }
  return absl::OkStatus();
}

absl::Status ResourceManager::ValidateAgainstConfigurationLocked(
    const SliceRequest& request) const {
  const int64_t islands =
      std::max(options_.islands, topology_->num_islands());
  if (options_.islands > 0 && request.island.has_value() &&
      request.island->value() >= islands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "island ", request.island->value(), " does not exist and never "
        "will: the cluster is configured with ", islands,
        " islands (numbered 0..", islands - 1, ", head flag --islands)"));
  }
  if (options_.island_devices == 0) return absl::OkStatus();
  // An island that grew beyond its configuration counts at its real size.
  const int64_t largest = std::max(
      options_.island_devices,
      request.island.has_value() && topology_->HasIsland(*request.island)
          ? static_cast<int64_t>(
                topology_->DevicesOfIsland(*request.island).size())
          : topology_->MaxIslandSize());
  if (request.num_devices > largest) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a slice of ", request.num_devices, " devices can never be granted",
        request.island.has_value()
            ? absl::StrCat(" on island ", request.island->value())
            : std::string(),
        ": an island of this cluster has at most ", largest,
        " devices (head flag --max-island-devices; a slice lives in one "
        "island)"));
  }
  return absl::OkStatus();
}

std::string ResourceManager::WaitReasonLocked(const Slice& slice) const {
  const bool shared = slice.request.shared;
  auto describe = [&](IslandId island) {
    int64_t healthy = 0;
    for (DeviceId device : topology_->DevicesOfIsland(island)) {
      if (devices_[device.value()].healthy) ++healthy;
    }
    std::string text = absl::StrCat(healthy, " healthy, ",
                                    CountEligibleLocked(island, shared),
                                    " free");
    // Devices this session's own slices hold: a request that only they
    // could satisfy waits until the session releases one of them.
    std::vector<int64_t> own_slices;
    int64_t own_devices = 0;
    for (DeviceId device : topology_->DevicesOfIsland(island)) {
      const SliceId holder = devices_[device.value()].exclusive;
      if (holder.value() < 0) continue;
      auto it = slices_.find(holder);
      if (it == slices_.end() ||
          it->second.request.session != slice.request.session) {
        continue;
      }
      ++own_devices;
      if (std::find(own_slices.begin(), own_slices.end(), holder.value()) ==
          own_slices.end()) {
        own_slices.push_back(holder.value());
      }
    }
    if (own_devices > 0) {
      absl::StrAppend(&text, ", ", own_devices,
                      " held by this session's own slice",
                      own_slices.size() == 1 ? " " : "s ",
                      absl::StrJoin(own_slices, ", "));
    }
    return text;
  };
  std::string out =
      absl::StrCat(" (needs ", slice.request.num_devices, " devices; ");
  if (slice.request.island.has_value()) {
    const IslandId island = *slice.request.island;
    absl::StrAppend(&out, "island ", island.value(), " ",
                    topology_->HasIsland(island)
                        ? absl::StrCat("has ", describe(island))
                        : std::string("has no host yet"));
  } else if (topology_->num_islands() == 0) {
    absl::StrAppend(&out, "no host has joined yet");
  } else {
    // The island closest to fitting: the most healthy devices.
    IslandId best(0);
    int64_t best_size = -1;
    for (int64_t i = 0; i < topology_->num_islands(); ++i) {
      int64_t healthy = 0;
      for (DeviceId device : topology_->DevicesOfIsland(IslandId(i))) {
        if (devices_[device.value()].healthy) ++healthy;
      }
      if (healthy > best_size) {
        best_size = healthy;
        best = IslandId(i);
      }
    }
    absl::StrAppend(&out, "the largest island, ", best.value(), ", has ",
                    describe(best));
  }
  absl::StrAppend(&out, ")");
  return out;
}

// ---------------------------------------------------------------------------
// Device bookkeeping.

bool ResourceManager::EligibleLocked(DeviceId device, bool shared) const {
  const DeviceState& state = devices_[device.value()];
  if (!state.healthy || state.exclusive.value() >= 0) return false;
  return shared || state.shared_users == 0;
}

void ResourceManager::AcquireLocked(const Slice& slice, DeviceId device) {
  DeviceState& state = devices_[device.value()];
  CW_CHECK(EligibleLocked(device, slice.request.shared))
      << "device " << device << " is not free for slice " << slice.id;
  if (slice.request.shared) {
    ++state.shared_users;
  } else {
    state.exclusive = slice.id;
  }
}

void ResourceManager::ReleaseDeviceLocked(const Slice& slice, DeviceId device) {
  DeviceState& state = devices_[device.value()];
  if (slice.request.shared) {
    CW_CHECK(state.shared_users > 0);
    --state.shared_users;
  } else {
    CW_CHECK(state.exclusive == slice.id);
    state.exclusive = SliceId();
  }
}

void ResourceManager::ReleaseHoldingsLocked(Slice& slice) {
  for (size_t i = 0; i < slice.devices.size(); ++i) {
    if (slice.held[i]) ReleaseDeviceLocked(slice, slice.devices[i]);
  }
}

void ResourceManager::AcquireAllLocked(Slice& slice) {
  for (size_t i = 0; i < slice.devices.size(); ++i) {
    if (slice.held[i]) AcquireLocked(slice, slice.devices[i]);
  }
}

int64_t ResourceManager::CountEligibleLocked(
    IslandId island, bool shared, const std::vector<DeviceId>& exclude) const {
  int64_t count = 0;
  for (DeviceId device : topology_->DevicesOfIsland(island)) {
    if (EligibleLocked(device, shared) &&
        std::find(exclude.begin(), exclude.end(), device) == exclude.end()) {
      ++count;
    }
  }
  return count;
}

std::optional<ResourceManager::Placement>
ResourceManager::ChoosePlacementLocked(
    IslandId island, int64_t count, bool shared,
    const std::vector<DeviceId>& exclude) const {
  // Eligible devices per host, in id order (by load, then id, if shared).
  std::vector<std::vector<DeviceId>> hosts;
  int64_t eligible = 0;
  for (HostId host : topology_->HostsOfIsland(island)) {
    // (load, device): exclusive slices see load 0 everywhere.
    std::vector<std::pair<int64_t, DeviceId>> loaded;
    for (DeviceId device : topology_->DevicesOfHost(host)) {
      if (!EligibleLocked(device, shared) ||
          std::find(exclude.begin(), exclude.end(), device) != exclude.end()) {
        continue;
      }
      loaded.emplace_back(shared ? devices_[device.value()].shared_users : 0,
                          device);
    }
    std::sort(loaded.begin(), loaded.end());
    std::vector<DeviceId> devices;
    for (const auto& [load, device] : loaded) devices.push_back(device);
    eligible += static_cast<int64_t>(devices.size());
    hosts.push_back(std::move(devices));
  }
  if (eligible < count) return std::nullopt;

  // Fewest hosts: take the host that fits the rest most tightly if one
  // does; otherwise the host with the most eligible devices, all of them.
  Placement placement;
  placement.eligible = eligible;
  std::vector<bool> used(hosts.size(), false);
  int64_t remaining = count;
  while (remaining > 0) {
    int best_fit = -1;
    int largest = -1;
    for (size_t h = 0; h < hosts.size(); ++h) {
      const int64_t size = static_cast<int64_t>(hosts[h].size());
      if (used[h] || size == 0) continue;
      if (size >= remaining &&
          (best_fit < 0 ||
           size < static_cast<int64_t>(hosts[best_fit].size()))) {
        best_fit = static_cast<int>(h);
      }
      if (largest < 0 || size > static_cast<int64_t>(hosts[largest].size())) {
        largest = static_cast<int>(h);
      }
    }
    const int chosen = best_fit >= 0 ? best_fit : largest;
    CW_CHECK(chosen >= 0);
    used[chosen] = true;
    ++placement.hosts;
    const int64_t take = std::min<int64_t>(
        remaining, static_cast<int64_t>(hosts[chosen].size()));
    for (DeviceId device : TakeFromHost(hosts[chosen], take, shared)) {
      placement.devices.push_back(device);
      placement.load += devices_[device.value()].shared_users;
    }
    remaining -= take;
  }
  std::sort(placement.devices.begin(), placement.devices.end());
  return placement;
}

// ---------------------------------------------------------------------------
// Queue.

void ResourceManager::EnqueueLocked(Slice& slice, int klass) {
  CW_CHECK(!slice.in_queue);
  slice.queue_key = {klass, -static_cast<int64_t>(slice.request.priority),
                     next_queue_seq_++};
  slice.in_queue = true;
  queue_.emplace(slice.queue_key, slice.id);
  if (klass == kRequestClass) ++queued_requests_;
}

void ResourceManager::DequeueLocked(Slice& slice) {
  if (!slice.in_queue) return;
  queue_.erase(slice.queue_key);
  slice.in_queue = false;
  if (std::get<0>(slice.queue_key) == kRequestClass) --queued_requests_;
}

void ResourceManager::ServeQueueLocked(Notifications& out) {
  const int64_t num_islands = topology_->num_islands();
  // Islands an earlier waiting entry could use: later entries may not take
  // devices there, so nothing is starved by what queues behind it.
  std::vector<bool> blocked(num_islands, false);
  int64_t num_blocked = 0;
  for (auto it = queue_.begin();
       it != queue_.end() && num_blocked < num_islands;) {
    Slice& slice = slices_.at(it->second);
    const bool repair = std::get<0>(it->first) == kRepairClass;
    std::vector<IslandId> candidates;
    if (repair) {
      candidates.push_back(slice.island);
    } else if (slice.request.island.has_value()) {
      candidates.push_back(*slice.request.island);
    } else {
      for (int64_t i = 0; i < num_islands; ++i)
        candidates.push_back(IslandId(i));
    }
    std::erase_if(candidates, [&](IslandId island) {
      return !topology_->HasIsland(island) || blocked[island.value()];
    });
    if (candidates.empty()) {
      ++it;
      continue;
    }
    const bool done = repair ? TryRepairLocked(slice, out)
                             : TryGrantLocked(slice, candidates, out);
    if (done) {
      ++it;
      DequeueLocked(slice);
      continue;
    }
    for (IslandId island : candidates) {
      blocked[island.value()] = true;
      ++num_blocked;
    }
    ++it;
  }
}

bool ResourceManager::TryGrantLocked(Slice& slice,
                                     const std::vector<IslandId>& islands,
                                     Notifications& out) {
  const bool shared = slice.request.shared;
  std::optional<Placement> best;
  IslandId best_island;
  for (IslandId island : islands) {
    std::optional<Placement> placement =
        ChoosePlacementLocked(island, slice.request.num_devices, shared);
    if (!placement.has_value()) continue;
    // Fewest hosts; then, for exclusive slices, the island with the fewest
    // free devices (best fit keeps big islands whole); for shared slices the
    // least loaded devices.
    auto key = [shared](const Placement& p) {
      return std::make_pair(p.hosts, shared ? p.load : p.eligible);
    };
    if (!best.has_value() || key(*placement) < key(*best)) {
      best = std::move(placement);
      best_island = island;
    }
  }
  if (!best.has_value()) return false;

  slice.state = SliceState::kGranted;
  slice.island = best_island;
  slice.devices = std::move(best->devices);
  slice.held.assign(slice.devices.size(), true);
  slice.generation = 1;
  AcquireAllLocked(slice);
  out.push_back(Notification(
      EventOf(slice, SliceEvent::Kind::kGranted, {}, slice.devices)));
  Notification result;
  result.promise = std::move(slice.promise);
  result.result = GrantOf(slice);
  out.push_back(std::move(result));
  return true;
}

bool ResourceManager::TryRepairLocked(Slice& slice, Notifications& out) {
  const bool shared = slice.request.shared;
  std::vector<size_t> lost;
  for (size_t i = 0; i < slice.held.size(); ++i) {
    if (!slice.held[i]) lost.push_back(i);
  }
  std::vector<DeviceId> old_devices = slice.devices;
  if (lost.empty()) return true;

  std::optional<Placement> spares = ChoosePlacementLocked(
      slice.island, static_cast<int64_t>(lost.size()), shared, slice.devices);
  if (spares.has_value()) {
    // Each spare takes the virtual position of a lost device; survivors keep
    // theirs.
    for (size_t k = 0; k < lost.size(); ++k) {
      slice.devices[lost[k]] = spares->devices[k];
      slice.held[lost[k]] = true;
      AcquireLocked(slice, spares->devices[k]);
    }
  } else {
    if (!slice.request.allow_smaller) return false;
    // Shrink along the first mesh axis: keep whole rows of the other axes.
    int64_t row = 1;
    for (size_t a = 1; a < slice.mesh_shape.size(); ++a) {
      row *= slice.mesh_shape[a];
    }
    const int64_t available_spares =
        CountEligibleLocked(slice.island, shared, slice.devices);
    const int64_t survivors =
        static_cast<int64_t>(slice.devices.size() - lost.size());
    const int64_t new_size = (survivors + available_spares) / row * row;
    if (new_size == 0) return false;
    std::vector<DeviceId> spare_devices;
    if (available_spares > 0) {
      spare_devices =
          ChoosePlacementLocked(slice.island, available_spares, shared,
                                slice.devices)
              ->devices;
    }
    // Survivors in their virtual order, lost positions filled by spares
    // while they last, the rest dropped; then cut to whole rows.
    std::vector<DeviceId> mapping;
    size_t next_spare = 0;
    for (size_t i = 0; i < slice.devices.size(); ++i) {
      const bool keep = slice.held[i];
      DeviceId device = slice.devices[i];
      if (!keep) {
        if (next_spare == spare_devices.size()) continue;
        device = spare_devices[next_spare++];
      }
      if (static_cast<int64_t>(mapping.size()) < new_size) {
        mapping.push_back(device);
        if (!keep) AcquireLocked(slice, device);
      } else if (keep) {
        ReleaseDeviceLocked(slice, device);  // Beyond the last whole row.
      }
    }
    CW_CHECK(static_cast<int64_t>(mapping.size()) == new_size);
    slice.devices = std::move(mapping);
    slice.held.assign(slice.devices.size(), true);
    slice.mesh_shape[0] = new_size / row;
  }
  slice.state = SliceState::kGranted;
  ++slice.generation;
  out.push_back(Notification(EventOf(slice, SliceEvent::Kind::kRemapped,
                                     std::move(old_devices), slice.devices)));
  return true;
}

// ---------------------------------------------------------------------------
// Requests and releases.

SliceTicket ResourceManager::RequestSlice(SliceRequest request) {
  PromiseAndFuture<SliceGrant> pair = MakePromise<SliceGrant>();
  Notifications out;
  SliceId id;
  {
    absl::MutexLock lock(&mu_);
    id = SliceId(next_slice_id_++);
    absl::Status status = ValidateRequest(request);
    if (status.ok() && queued_requests_ >= options_.max_queued_requests) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "the slice queue is full (", queued_requests_,
          " requests wait, all sessions together; head flag "
          "--max-queued-slice-requests): release slices or try again later"));
    }
    if (!status.ok()) {
      Notification failed;
      failed.promise = std::move(pair.promise);
      failed.result = std::move(status);
      out.push_back(std::move(failed));
    } else {
      Slice& slice = slices_[id];
      slice.id = id;
      slice.mesh_shape = request.mesh_shape.empty()
                             ? std::vector<int64_t>{request.num_devices}
                             : request.mesh_shape;
      slice.request = std::move(request);
      slice.promise = std::move(pair.promise);
      EnqueueLocked(slice, kRequestClass);
      ServeQueueLocked(out);
    }
  }
  Deliver(std::move(out));
  return SliceTicket{id, std::move(pair.future)};
}

void ResourceManager::EndSliceLocked(Slice& slice,
                                     const absl::Status& cancelled,
                                     Notifications& out) {
  DequeueLocked(slice);
  if (slice.state == SliceState::kQueued) {
    Notification failed;
    failed.promise = std::move(slice.promise);
    failed.result = cancelled;
    out.push_back(std::move(failed));
  } else {
    ReleaseHoldingsLocked(slice);
    out.push_back(Notification(
        EventOf(slice, SliceEvent::Kind::kReleased, slice.devices, {})));
  }
  const SliceId id = slice.id;
  slices_.erase(id);
}

absl::Status ResourceManager::CancelRequest(SliceId id) {
  Notifications out;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(id);
    if (it == slices_.end()) {
      return absl::NotFoundError(absl::StrCat("no slice ", id.value()));
    }
    if (it->second.state != SliceState::kQueued) {
      return absl::FailedPreconditionError(
          absl::StrCat("slice ", id.value(),
                       " is already granted; release it instead"));
    }
    EndSliceLocked(it->second,
                   absl::CancelledError(absl::StrCat(
                       "slice request ", id.value(), " was cancelled")),
                   out);
    ServeQueueLocked(out);
  }
  Deliver(std::move(out));
  return absl::OkStatus();
}

absl::Status ResourceManager::Release(SliceId id) {
  Notifications out;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(id);
    if (it == slices_.end()) {
      return absl::NotFoundError(absl::StrCat("no slice ", id.value()));
    }
    EndSliceLocked(it->second,
                   absl::CancelledError(absl::StrCat(
                       "slice ", id.value(),
                       " was released before it was granted")),
                   out);
    ServeQueueLocked(out);
  }
  Deliver(std::move(out));
  return absl::OkStatus();
}

int64_t ResourceManager::ReleaseSession(SessionId session) {
  Notifications out;
  int64_t ended = 0;
  {
    absl::MutexLock lock(&mu_);
    std::vector<SliceId> ids;
    for (const auto& [id, slice] : slices_) {
      if (slice.request.session == session) ids.push_back(id);
    }
    const absl::Status cancelled = absl::CancelledError(
        absl::StrCat("session ", session.value(),
                     " ended before its slice request was granted"));
    for (SliceId id : ids) EndSliceLocked(slices_.at(id), cancelled, out);
    ended = static_cast<int64_t>(ids.size());
    ServeQueueLocked(out);
  }
  Deliver(std::move(out));
  return ended;
}

// ---------------------------------------------------------------------------
// Failure and recovery.

void ResourceManager::MarkDeadLocked(const std::vector<DeviceId>& devices,
                                     Notifications& out) {
  std::set<DeviceId> newly_dead;
  for (DeviceId device : devices) {
    DeviceState& state = devices_[device.value()];
    if (!state.healthy) continue;
    newly_dead.insert(device);
    state = DeviceState();
    state.healthy = false;
  }
  if (newly_dead.empty()) return;
  // Every slice that held one of them loses that position.
  std::vector<Slice*> affected;
  for (auto& [id, slice] : slices_) {
    bool lost_one = false;
    for (size_t i = 0; i < slice.devices.size(); ++i) {
      if (slice.held[i] && newly_dead.count(slice.devices[i]) > 0) {
        slice.held[i] = false;
        lost_one = true;
      }
    }
    if (lost_one && slice.state == SliceState::kGranted) {
      affected.push_back(&slice);
    }
  }
  // They wait for repair in front of every request, by priority, then id.
  std::sort(affected.begin(), affected.end(), [](Slice* a, Slice* b) {
    return std::make_pair(-a->request.priority, a->id) <
           std::make_pair(-b->request.priority, b->id);
  });
  for (Slice* slice : affected) EnqueueLocked(*slice, kRepairClass);
  ServeQueueLocked(out);
  for (Slice* slice : affected) {
    if (!slice->in_queue) continue;  // Repaired.
    slice->state = SliceState::kBroken;
    ++slice->generation;
    out.push_back(Notification(
        EventOf(*slice, SliceEvent::Kind::kBroken, slice->devices, {})));
  }
}

bool ResourceManager::TryRegrowLocked(Slice& slice, Notifications& out) {
  const int64_t size = static_cast<int64_t>(slice.devices.size());
  const std::vector<int64_t> wanted_mesh =
      slice.request.mesh_shape.empty()
          ? std::vector<int64_t>{slice.request.num_devices}
          : slice.request.mesh_shape;
  int64_t row = 1;
  for (size_t a = 1; a < wanted_mesh.size(); ++a) row *= wanted_mesh[a];
  const bool shared = slice.request.shared;
  const int64_t free = CountEligibleLocked(slice.island, shared, slice.devices);
  const int64_t new_size =
      std::min(slice.request.num_devices, (size + free) / row * row);
  if (new_size <= size) return false;
  std::optional<Placement> spares = ChoosePlacementLocked(
      slice.island, new_size - size, shared, slice.devices);
  if (!spares.has_value()) return false;
  std::vector<DeviceId> old_devices = slice.devices;
  // Survivors keep their virtual positions; the new devices come after.
  for (DeviceId device : spares->devices) {
    AcquireLocked(slice, device);
    slice.devices.push_back(device);
  }
  slice.held.assign(slice.devices.size(), true);
  slice.mesh_shape = wanted_mesh;
  slice.mesh_shape[0] = new_size / row;
  ++slice.generation;
  out.push_back(Notification(EventOf(slice, SliceEvent::Kind::kRemapped,
                                     std::move(old_devices), slice.devices)));
  return true;
}

absl::Status ResourceManager::AddHost(
    std::shared_ptr<const Topology> topology, HostId host) {
  if (topology == nullptr || !topology->HasHost(host) ||
      !topology->IsAlive(host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", host.value(), " is not alive in the snapshot"));
  }
  Notifications out;
  {
    absl::MutexLock lock(&mu_);
    // Joins may be reported out of order: the newest snapshot wins.
    if (topology->version() > topology_->version()) {
      topology_ = std::move(topology);
    }
    if (!topology_->HasHost(host) || !topology_->IsAlive(host)) {
      return absl::OkStatus();  // It died meanwhile.
    }
    // Devices of hosts still joining are not in the pool yet.
    DeviceState joining;
    joining.healthy = false;
    devices_.resize(topology_->num_devices(), joining);
    for (DeviceId device : topology_->DevicesOfHost(host)) {
      devices_[device.value()] = DeviceState{};
    }
    // Slices of its island that shrank grow back first, by priority.
    const IslandId island = topology_->IslandOfHost(host);
    std::vector<Slice*> shrunk;
    for (auto& [id, slice] : slices_) {
      if (slice.state == SliceState::kGranted && slice.island == island &&
          static_cast<int64_t>(slice.devices.size()) <
              slice.request.num_devices) {
        shrunk.push_back(&slice);
      }
    }
    std::sort(shrunk.begin(), shrunk.end(), [](Slice* a, Slice* b) {
      return std::make_pair(-a->request.priority, a->id) <
             std::make_pair(-b->request.priority, b->id);
    });
    for (Slice* slice : shrunk) TryRegrowLocked(*slice, out);
    ServeQueueLocked(out);
  }
  Deliver(std::move(out));
  return absl::OkStatus();
}

absl::Status ResourceManager::MarkDeviceDead(DeviceId device) {
  Notifications out;
  {
    absl::MutexLock lock(&mu_);
    CW_RETURN_IF_ERROR(topology_->ValidateDevice(device));
    MarkDeadLocked({device}, out);
  }
  Deliver(std::move(out));
  return absl::OkStatus();
}

absl::Status ResourceManager::MarkHostDead(HostId host) {
  Notifications out;
  {
    absl::MutexLock lock(&mu_);
    CW_RETURN_IF_ERROR(topology_->ValidateHost(host));
    absl::Span<const DeviceId> devices = topology_->DevicesOfHost(host);
    MarkDeadLocked(std::vector<DeviceId>(devices.begin(), devices.end()), out);
  }
  Deliver(std::move(out));
  return absl::OkStatus();
}

absl::StatusOr<SliceGrant> ResourceManager::Remap(
    SliceId id, std::optional<std::vector<DeviceId>> devices) {
  Notifications out;
  SliceGrant grant;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(id);
    if (it == slices_.end()) {
      return absl::NotFoundError(absl::StrCat("no slice ", id.value()));
    }
    Slice& slice = it->second;
    if (slice.state == SliceState::kQueued) {
      return absl::FailedPreconditionError(
          absl::StrCat("slice ", id.value(),
                       " is still queued: it has no devices to remap"));
    }
    const size_t size = slice.devices.size();
    IslandId island = slice.island;
    if (devices.has_value()) {
      if (devices->size() != size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "slice ", id.value(), " has ", size, " devices; remap got ",
            devices->size()));
      }
      std::set<DeviceId> seen;
      for (DeviceId device : *devices) {
        if (absl::Status status = topology_->ValidateDevice(device);
            !status.ok()) {
          return status;
        }
        if (!seen.insert(device).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "device ", device.value(), " appears twice in ",
              IdList(*devices)));
        }
      }
      island = topology_->IslandOf(devices->front());
      for (DeviceId device : *devices) {
        if (topology_->IslandOf(device) != island) {
          return absl::InvalidArgumentError(absl::StrCat(
              "devices ", IdList(*devices),
              " span several islands; a slice lives in one island"));
        }
      }
    }
    // Decide with the slice's own devices counted as free.
    ReleaseHoldingsLocked(slice);
    std::vector<DeviceId> mapping;
    if (devices.has_value()) {
      for (DeviceId device : *devices) {
        if (!EligibleLocked(device, slice.request.shared)) {
          AcquireAllLocked(slice);
          return absl::UnavailableError(absl::StrCat(
              "device ", device.value(), " is ",
              devices_[device.value()].healthy ? "in use by another slice"
                                               : "dead",
              "; cannot remap slice ", id.value(), " onto ",
              IdList(*devices)));
        }
      }
      mapping = std::move(*devices);
    } else {
      std::optional<Placement> placement = ChoosePlacementLocked(
          island, static_cast<int64_t>(size), slice.request.shared);
      if (!placement.has_value()) {
        AcquireAllLocked(slice);
        return absl::UnavailableError(absl::StrCat(
            "island ", island.value(), " has too few free devices for the ",
            size, " of slice ", id.value()));
      }
      mapping = std::move(placement->devices);
    }
    if (slice.state == SliceState::kGranted && mapping == slice.devices) {
      AcquireAllLocked(slice);
      return GrantOf(slice);  // Already there.
    }
    std::vector<DeviceId> old_devices = std::move(slice.devices);
    slice.devices = std::move(mapping);
    slice.held.assign(size, true);
    slice.island = island;
    AcquireAllLocked(slice);
    DequeueLocked(slice);
    slice.state = SliceState::kGranted;
    ++slice.generation;
    out.push_back(Notification(EventOf(slice, SliceEvent::Kind::kRemapped,
                                       std::move(old_devices),
                                       slice.devices)));
    grant = GrantOf(slice);
    ServeQueueLocked(out);
  }
  Deliver(std::move(out));
  return grant;
}

// ---------------------------------------------------------------------------
// Events and queries.

void ResourceManager::AddListener(
    std::function<void(const SliceEvent&)> listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(
      std::make_shared<const std::function<void(const SliceEvent&)>>(
          std::move(listener)));
}

void ResourceManager::Deliver(Notifications notifications) {
  {
    absl::MutexLock lock(&mu_);
    for (Notification& n : notifications) pending_.push_back(std::move(n));
    if (delivering_ || pending_.empty()) return;
    delivering_ = true;
  }
  while (true) {
    Notifications batch;
    std::vector<std::shared_ptr<const std::function<void(const SliceEvent&)>>>
        listeners;
    {
      absl::MutexLock lock(&mu_);
      if (pending_.empty()) {
        delivering_ = false;
        return;
      }
      batch.swap(pending_);
      listeners = listeners_;
    }
    for (Notification& n : batch) {
      if (n.event.has_value()) {
        for (const auto& listener : listeners) (*listener)(*n.event);
      }
      if (n.promise.IsValid()) n.promise.Set(std::move(n.result));
    }
  }
}

SliceGrant ResourceManager::GrantOf(const Slice& slice) const {
  return SliceGrant{slice.id,         slice.request.session, slice.island,
                    slice.devices,    slice.mesh_shape,      slice.generation,
                    slice.request.shared};
}

SliceInfo ResourceManager::InfoOf(const Slice& slice) const {
  SliceInfo info;
  info.id = slice.id;
  info.state = slice.state;
  info.request = slice.request;
  info.island = slice.island;
  info.devices = slice.devices;
  info.mesh_shape = slice.mesh_shape;
  info.generation = slice.generation;
  return info;
}

SliceEvent ResourceManager::EventOf(const Slice& slice, SliceEvent::Kind kind,
                                    std::vector<DeviceId> old_devices,
                                    std::vector<DeviceId> new_devices) const {
  return SliceEvent{kind,
                    slice.id,
                    slice.request.session,
                    slice.island,
                    std::move(old_devices),
                    std::move(new_devices),
                    slice.mesh_shape,
                    slice.generation};
}

absl::StatusOr<SliceInfo> ResourceManager::GetSlice(SliceId id) const {
  absl::MutexLock lock(&mu_);
  auto it = slices_.find(id);
  if (it == slices_.end()) {
    return absl::NotFoundError(absl::StrCat("no slice ", id.value()));
  }
  return InfoOf(it->second);
}

std::vector<SliceInfo> ResourceManager::ListSlices() const {
  absl::MutexLock lock(&mu_);
  std::vector<SliceInfo> out;
  out.reserve(slices_.size());
  for (const auto& [id, slice] : slices_) out.push_back(InfoOf(slice));
  return out;
}

std::vector<DeviceId> ResourceManager::FreeDevices(IslandId island) const {
  std::vector<DeviceId> out;
  absl::MutexLock lock(&mu_);
  if (!topology_->HasIsland(island)) return out;
  for (DeviceId device : topology_->DevicesOfIsland(island)) {
    if (EligibleLocked(device, /*shared=*/false)) out.push_back(device);
  }
  return out;
}

std::string ResourceManager::DebugString() const {
  absl::MutexLock lock(&mu_);
  int64_t healthy = 0;
  int64_t free = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (devices_[d].healthy) ++healthy;
    if (EligibleLocked(DeviceId(static_cast<int64_t>(d)), false)) ++free;
  }
  int64_t counts[3] = {0, 0, 0};
  for (const auto& [id, slice] : slices_) {
    ++counts[static_cast<int>(slice.state)];
  }
  std::string out = absl::StrCat(
      "resource manager: ", devices_.size(), " devices (", healthy,
      " healthy, ", free, " free); slices: ",
      counts[static_cast<int>(SliceState::kGranted)], " granted, ",
      counts[static_cast<int>(SliceState::kBroken)], " broken, ",
      counts[static_cast<int>(SliceState::kQueued)], " queued");
  for (int64_t i = 0; i < topology_->num_islands(); ++i) {
    absl::StrAppend(&out, "\n  island ", i, ":");
    for (DeviceId device : topology_->DevicesOfIsland(IslandId(i))) {
      const DeviceState& state = devices_[device.value()];
      absl::StrAppend(&out, " ", device.value(), "=");
      if (!state.healthy) {
        absl::StrAppend(&out, "dead");
      } else if (state.exclusive.value() >= 0) {
        absl::StrAppend(&out, "slice", state.exclusive.value());
      } else if (state.shared_users > 0) {
        absl::StrAppend(&out, "shared", state.shared_users);
      } else {
        absl::StrAppend(&out, "free");
      }
    }
  }
  for (const auto& [id, slice] : slices_) {
    absl::StrAppend(&out, "\n  slice ", id.value(), " (session ",
                    slice.request.session.value(), "): ",
                    SliceStateName(slice.state));
    if (slice.state == SliceState::kQueued) {
      absl::StrAppend(&out, " ", slice.request.num_devices, " devices on ",
                      slice.request.island.has_value()
                          ? absl::StrCat("island ",
                                         slice.request.island->value())
                          : std::string("any island"),
                      WaitReasonLocked(slice));
    } else {
      absl::StrAppend(&out, " island ", slice.island.value(), " devices ",
                      IdList(slice.devices), " generation ",
                      slice.generation);
    }
    absl::StrAppend(&out, " mesh ", ShapeString(slice.mesh_shape),
                    " priority ", slice.request.priority,
                    slice.request.shared ? " shared" : "");
  }
  if (!queue_.empty()) {
    std::vector<std::string> order;
    for (const auto& [key, id] : queue_) {
      order.push_back(absl::StrCat(id.value()));
    }
    absl::StrAppend(&out, "\n  queue: ", absl::StrJoin(order, ", "));
  }
  return out;
}

}  // namespace causeway::head
