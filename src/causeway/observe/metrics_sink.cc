#include "causeway/observe/metrics_sink.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace causeway::observe {
namespace {

constexpr size_t kMaxFailureMessage = 512;

double Seconds(absl::Duration d) {
  return std::max(0.0, absl::ToDoubleSeconds(d));
}

std::string CodeName(const absl::Status& status) {
  return absl::StatusCodeToString(status.code());
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  ++counts[bucket];
  sum += value;
  ++count;
}

std::vector<double> LatencyBuckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
          1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1,    2.5,    5,    10};
}

std::string DeathReasonLabel(const std::string& reason) {
  if (absl::StartsWith(reason, "no heartbeat")) return "heartbeat";
  if (absl::StartsWith(reason, "its connection broke")) return "connection";
  if (absl::StrContains(reason, "could not start")) return "start";
  return "other";
}

double MetricsSnapshot::BusySeconds(DeviceId device, absl::Time now) const {
  auto it = devices.find(device);
  if (it == devices.end()) return 0;
  double busy = it->second.busy_seconds;
  if (it->second.running_since.has_value()) {
    busy += Seconds(now - *it->second.running_since);
  }
  return busy;
}

int64_t MetricsSnapshot::TotalLaunches() const {
  int64_t total = 0;
  for (const auto& [island, n] : launches) total += n;
  return total;
}

MetricsSink::MetricsSink(trace::EventSink* next) : next_(next) {
  counts_.dispatch_latency = Histogram(LatencyBuckets());
  counts_.op_duration = Histogram(LatencyBuckets());
  counts_.op_collective_time = Histogram(LatencyBuckets());
  counts_.transfer_duration = Histogram(LatencyBuckets());
}

MetricsSnapshot MetricsSink::Snapshot() const {
  MetricsSnapshot snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = counts_;
    snapshot.transfers_in_flight.reserve(transfers_.size());
    for (const auto& [key, transfer] : transfers_) {
      snapshot.transfers_in_flight.push_back(transfer);
    }
  }
  std::sort(snapshot.transfers_in_flight.begin(),
            snapshot.transfers_in_flight.end(),
            [](const TransferInFlight& a, const TransferInFlight& b) {
              return a.started < b.started;
            });
  snapshot.taken = absl::Now();
  return snapshot;
}

MetricsSink::Launch& MetricsSink::TrackLaunchLocked(const LaunchKey& key) {
  auto [it, inserted] = launches_.try_emplace(key);
  if (inserted) {
    launch_order_.push_back(key);
    while (launch_order_.size() > kMaxTrackedLaunches) {
      launches_.erase(launch_order_.front());
      launch_order_.pop_front();
      ++counts_.forgotten;
    }
  }
  return it->second;
}

void MetricsSink::LaunchDispatched(const trace::LaunchEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    ++counts_.launches[event.island];
    TrackLaunchLocked({event.island, event.seq}).dispatched = event.time;
  }
  if (next_ != nullptr) next_->LaunchDispatched(event);
}

void MetricsSink::OpEnqueued(const trace::OpEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    counts_.devices[event.device].host = event.host;
    auto it = launches_.find({event.island, event.seq});
    if (it != launches_.end() && it->second.dispatched.has_value()) {
      counts_.dispatch_latency.Observe(
          Seconds(event.time - *it->second.dispatched));
    }
  }
  if (next_ != nullptr) next_->OpEnqueued(event);
}

void MetricsSink::OpStarted(const trace::OpEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    DeviceActivity& device = counts_.devices[event.device];
    device.host = event.host;
    device.running_since = event.time;
  }
  if (next_ != nullptr) next_->OpStarted(event);
}

void MetricsSink::OpFinished(const trace::OpEvent& event,
                             const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    DeviceActivity& device = counts_.devices[event.device];
    if (device.running_since.has_value()) {
      const double ran = Seconds(event.time - *device.running_since);
      device.busy_seconds += ran;
      counts_.op_duration.Observe(ran);
      device.running_since.reset();
    }
    ++device.ops_finished;
    ++counts_.ops[CodeName(status)];
    if (event.collectives > 0) {
      const double in_collectives = Seconds(event.collective_time);
      device.collective_seconds += in_collectives;
      counts_.op_collective_time.Observe(in_collectives);
      counts_.collectives += event.collectives;
    }
    if (!status.ok()) {
      Launch& launch = TrackLaunchLocked({event.island, event.seq});
      if (!launch.failure_counted) {
        launch.failure_counted = true;
        ++counts_.launch_failures[CodeName(status)];
      }
      std::string message(status.message());
      if (message.size() > kMaxFailureMessage) {
        message.resize(kMaxFailureMessage);
      }
      counts_.recent_failures.push_back(
          OpFailure{event.time, event.device, event.host, event.session_name,
                    event.program, event.seq, CodeName(status),
                    std::move(message)});
      while (counts_.recent_failures.size() > kMaxRecentFailures) {
        counts_.recent_failures.pop_front();
      }
    }
  }
  if (next_ != nullptr) next_->OpFinished(event, status);
}

void MetricsSink::WaitStarted(const trace::WaitEvent& event) {
  if (next_ != nullptr) next_->WaitStarted(event);
}

void MetricsSink::WaitFinished(const trace::WaitEvent& event) {
  if (next_ != nullptr) next_->WaitFinished(event);
}

void MetricsSink::TransferStarted(const trace::TransferEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    if (transfers_.size() >= kMaxTrackedTransfers) {
      transfers_.erase(transfers_.begin());
      ++counts_.forgotten;
    }
    transfers_[{event.transfer_id, event.source_device,
                event.destination_device}] =
        TransferInFlight{event.time,         event.transfer_id,
                         event.source_device, event.destination_device,
                         event.bytes,        event.description};
  }
  if (next_ != nullptr) next_->TransferStarted(event);
}

void MetricsSink::TransferFinished(const trace::TransferEvent& event,
                                   const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    auto it = transfers_.find(
        {event.transfer_id, event.source_device, event.destination_device});
    if (it != transfers_.end()) {
      counts_.transfer_duration.Observe(
          Seconds(event.time - it->second.started));
      transfers_.erase(it);
    }
    ++counts_.transfers[CodeName(status)];
    if (status.ok()) counts_.transfer_bytes += event.bytes;
  }
  if (next_ != nullptr) next_->TransferFinished(event, status);
}

void MetricsSink::HostStateChanged(const trace::HostEvent& event) {
  constexpr char kDead[] = "dead: ";
  if (absl::StartsWith(event.what, kDead)) {
    const std::string reason = event.what.substr(sizeof(kDead) - 1);
    absl::MutexLock lock(&mu_);
    ++counts_.host_deaths[DeathReasonLabel(reason)];
    counts_.recent_deaths.push_back(
        HostDeathRecord{event.time, event.host, reason});
    while (counts_.recent_deaths.size() > kMaxRecentDeaths) {
      counts_.recent_deaths.pop_front();
    }
    // The dead host's running ops will never report: they stop counting.
    for (auto& [id, device] : counts_.devices) {
      if (device.host != event.host || !device.running_since.has_value()) {
        continue;
      }
      device.busy_seconds += Seconds(event.time - *device.running_since);
      device.running_since.reset();
    }
  }
  if (next_ != nullptr) next_->HostStateChanged(event);
}

void MetricsSink::SessionOpened(const trace::SessionEvent& event) {
  if (next_ != nullptr) next_->SessionOpened(event);
}

void MetricsSink::SessionEnded(const trace::SessionEvent& event) {
  if (next_ != nullptr) next_->SessionEnded(event);
}

absl::StatusOr<std::string> MetricsSink::ExportChromeTrace() {
  if (next_ == nullptr) return trace::EventSink::ExportChromeTrace();
  return next_->ExportChromeTrace();
}

}  // namespace causeway::observe
