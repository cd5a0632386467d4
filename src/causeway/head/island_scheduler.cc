#include "causeway/head/island_scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "causeway/base/logging.h"

namespace causeway::head {
namespace {

// Costs beyond this would swamp every other session's tags.
constexpr double kMaxCost = 1e12;

}  // namespace

IslandScheduler::IslandScheduler(Options options)
    : options_(std::move(options)) {
  CW_CHECK(options_.max_in_flight >= 1)
      << "max_in_flight must be at least 1, got " << options_.max_in_flight;
  CW_CHECK(options_.max_in_flight_per_device >= 0);
  CW_CHECK(options_.max_queued_per_session >= 1);
}

IslandScheduler::~IslandScheduler() {
  std::vector<Launch> dropped;
  {
    absl::MutexLock lock(&mu_);
    CW_CHECK(!releasing_) << "IslandScheduler destroyed while releasing";
    for (auto& [id, session] : sessions_) {
      for (Queued& queued : session.queue) {
        dropped.push_back(std::move(queued.launch));
      }
      session.queue.clear();
    }
    heads_.clear();
  }
  for (Launch& launch : dropped) {
    if (launch.on_drop) {
      launch.on_drop(absl::CancelledError(absl::StrCat(
          options_.name, ": the scheduler shut down before the launch of "
                         "session ",
          launch.session.value(), " was released")));
    }
  }
}

absl::Status IslandScheduler::ValidateLaunch(const Launch& launch) const {
  if (launch.session.value() < 0) {
    return absl::InvalidArgumentError("launch has no session");
  }
  if (!launch.release) {
    return absl::InvalidArgumentError("launch has no release callback");
  }
  if (launch.devices.empty()) {
    return absl::InvalidArgumentError("launch has no devices");
  }
  std::vector<DeviceId> sorted = launch.devices;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front().value() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch names device ", sorted.front().value(),
        "; device ids are non-negative"));
  }
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end());
      dup != sorted.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch names device ", dup->value(), " twice"));
  }
  if (!std::isfinite(launch.cost) || launch.cost <= 0 ||
      launch.cost > kMaxCost) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch cost must be positive, finite and at most ", kMaxCost,
        "; got ", launch.cost));
  }
  return absl::OkStatus();
}

absl::Status IslandScheduler::Submit(Launch launch) {
  if (absl::Status status = ValidateLaunch(launch); !status.ok()) {
    return status;
  }
  {
    absl::MutexLock lock(&mu_);
    const SessionId id = launch.session;
    Session& session = sessions_[id];
    if (static_cast<int64_t>(session.queue.size()) >=
        options_.max_queued_per_session) {
      return absl::ResourceExhaustedError(absl::StrCat(
          options_.name, ": session ", id.value(), " already has ",
          session.queue.size(),
          " launches waiting; wait for some to be released"));
    }
    session.queue.push_back(Queued{std::move(launch), next_arrival_++});
    ++queued_;
    if (session.queue.size() == 1) FileHeadLocked(id, session);
  }
  ReleaseReady();
  return absl::OkStatus();
}

void IslandScheduler::FileHeadLocked(SessionId id, Session& session) {
  const Queued& head = session.queue.front();
  session.head_tag = std::max(virtual_time_, session.last_tag) +
                     head.launch.cost / session.weight;
  heads_.emplace(session.head_tag, head.arrival, id);
}

bool IslandScheduler::DeviceWindowFullLocked(
    const std::vector<DeviceId>& devices) const {
  for (DeviceId device : devices) {
    auto it = device_in_flight_.find(device);
    if (it != device_in_flight_.end() &&
        it->second >= options_.max_in_flight_per_device) {
      return true;
    }
  }
  return false;
}

bool IslandScheduler::PickLocked(Launch& launch, uint64_t& seq) {
  if (static_cast<int64_t>(in_flight_.size()) >= options_.max_in_flight) {
    return false;
  }
  const bool per_device = options_.max_in_flight_per_device > 0;
  // Devices wanted by a launch earlier in fair-share order that has to wait
  // for a device window: later launches may not take them first.
  std::set<DeviceId> reserved;
  for (auto it = heads_.begin(); it != heads_.end(); ++it) {
    const auto [tag, arrival, id] = *it;
    Session& session = sessions_.at(id);
    Queued& head = session.queue.front();
    if (per_device) {
      const bool blocked =
          DeviceWindowFullLocked(head.launch.devices) ||
          std::any_of(head.launch.devices.begin(), head.launch.devices.end(),
                      [&](DeviceId d) { return reserved.count(d) > 0; });
      if (blocked) {
        reserved.insert(head.launch.devices.begin(), head.launch.devices.end());
        continue;
      }
    }
    heads_.erase(it);
    seq = next_seq_++;
    virtual_time_ = tag;
    session.last_tag = tag;
    ++session.launches_released;
    session.cost_released += head.launch.cost;
    ++session.in_flight;
    --queued_;
    for (DeviceId device : head.launch.devices) ++device_in_flight_[device];
    in_flight_.emplace(seq, InFlight{id, head.launch.devices});
    launch = std::move(head.launch);
    session.queue.pop_front();
    if (!session.queue.empty()) {
      FileHeadLocked(id, session);
    } else if (heads_.empty()) {
      // Nothing waits anywhere: restart virtual time (every tag is <= V, so
      // this changes no future decision) to keep the numbers small.
      virtual_time_ = 0;
      for (auto& [other_id, other] : sessions_) other.last_tag = 0;
    }
    return true;
  }
  return false;
}

void IslandScheduler::ReleaseReady() {
  Launch launch;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    if (releasing_ || !PickLocked(launch, seq)) return;
    releasing_ = true;
  }
  while (true) {
    launch.release(seq);
    launch = Launch();  // Destroys the callbacks outside the lock.
    absl::MutexLock lock(&mu_);
    if (!PickLocked(launch, seq)) {
      releasing_ = false;
      return;
    }
  }
}

absl::Status IslandScheduler::OnLaunchComplete(uint64_t seq) {
  {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(seq);
    if (it == in_flight_.end()) {
      return absl::NotFoundError(absl::StrCat(
          options_.name, ": launch ", seq,
          seq < next_seq_ ? " already completed" : " was never released"));
    }
    for (DeviceId device : it->second.devices) {
      auto count = device_in_flight_.find(device);
      if (--count->second == 0) device_in_flight_.erase(count);
    }
    auto session = sessions_.find(it->second.session);
    if (session != sessions_.end()) --session->second.in_flight;
    in_flight_.erase(it);
  }
  ReleaseReady();
  return absl::OkStatus();
}

absl::Status IslandScheduler::SetWeight(SessionId session, double weight) {
  if (session.value() < 0) {
    return absl::InvalidArgumentError("SetWeight needs a session");
  }
  if (!std::isfinite(weight) || weight < kMinWeight || weight > kMaxWeight) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight of session ", session.value(), " must be between ", kMinWeight,
        " and ", kMaxWeight, "; got ", weight));
  }
  absl::MutexLock lock(&mu_);
  sessions_[session].weight = weight;
  return absl::OkStatus();
}

int64_t IslandScheduler::RemoveSession(SessionId id) {
  std::vector<Launch> dropped;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return 0;
    Session& session = it->second;
    if (!session.queue.empty()) {
      heads_.erase(
          HeadKey(session.head_tag, session.queue.front().arrival, id));
    }
    for (Queued& queued : session.queue) {
      dropped.push_back(std::move(queued.launch));
    }
    queued_ -= static_cast<int64_t>(dropped.size());
    sessions_.erase(it);
    if (heads_.empty()) {
      virtual_time_ = 0;
      for (auto& [other_id, other] : sessions_) other.last_tag = 0;
    }
  }
  for (Launch& launch : dropped) {
    if (launch.on_drop) {
      launch.on_drop(absl::CancelledError(absl::StrCat(
          options_.name, ": session ", id.value(),
          " was removed before its launch was released")));
    }
  }
  const int64_t count = static_cast<int64_t>(dropped.size());
  dropped.clear();
  // A dropped launch may have held back others waiting for device windows.
  ReleaseReady();
  return count;
}

IslandSchedulingStats IslandScheduler::Stats() const {
  absl::MutexLock lock(&mu_);
  IslandSchedulingStats stats;
  stats.next_seq = next_seq_;
  stats.queued = queued_;
  stats.in_flight = static_cast<int64_t>(in_flight_.size());
  for (const auto& [id, session] : sessions_) {
    stats.sessions.push_back(SessionSchedulingStats{
        id, session.weight, static_cast<int64_t>(session.queue.size()),
        session.in_flight, session.launches_released, session.cost_released});
  }
  return stats;
}

std::string IslandScheduler::DebugString() const {
  IslandSchedulingStats stats = Stats();
  std::string out = absl::StrCat(
      options_.name, " scheduler: ", stats.next_seq, " released, ",
      stats.in_flight, "/", options_.max_in_flight, " in flight, ",
      stats.queued, " queued");
  for (const SessionSchedulingStats& s : stats.sessions) {
    absl::StrAppend(&out, "\n  session ", s.session.value(), " weight ",
                    absl::StrFormat("%g", s.weight), ": ", s.queued,
                    " queued, ", s.in_flight, " in flight, ",
                    s.launches_released, " released (cost ",
                    absl::StrFormat("%g", s.cost_released), ")");
  }
  return out;
}

}  // namespace causeway::head
