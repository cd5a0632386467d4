#include "causeway/observe/cluster_observer.h"

#include <utility>

#include "absl/time/clock.h"

namespace causeway::observe {

ClusterObserver::ClusterObserver(head::Head* head, MetricsSink* metrics,
                                 Options options)
    : head_(head), metrics_(metrics), options_(options) {}

ClusterObserver::~ClusterObserver() { Stop(); }

void ClusterObserver::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void ClusterObserver::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ClusterObserver::Loop() {
  while (true) {
    RefreshNow();
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) {
      return;
    }
  }
}

void ClusterObserver::RefreshNow() {
  absl::StatusOr<head::WorkerStatuses> workers =
      head_->GetWorkerStatuses(options_.worker_timeout)
          .AwaitFor(options_.worker_timeout + absl::Seconds(1));
  const MetricsSnapshot metrics = metrics_->Snapshot();
  Sample sample;
  sample.time = metrics.taken;
  sample.launches = metrics.TotalLaunches();
  for (const auto& [code, n] : metrics.ops) sample.ops += n;
  for (const auto& [device, activity] : metrics.devices) {
    sample.busy_seconds[device] = metrics.BusySeconds(device, metrics.taken);
  }
  absl::MutexLock lock(&mu_);
  if (workers.ok()) {
    workers_ = std::make_shared<const head::WorkerStatuses>(*std::move(workers));
    workers_at_ = absl::Now();
  }
  samples_.push_back(std::move(sample));
  while (samples_.size() > options_.max_samples) samples_.pop_front();
}

ObservedState ClusterObserver::Observe() const {
  ObservedState state;
  state.view = head_->View();
  state.metrics = metrics_->Snapshot();
  state.now = state.metrics.taken;
  absl::MutexLock lock(&mu_);
  state.workers = workers_;
  state.workers_at = workers_at_;
  state.samples.assign(samples_.begin(), samples_.end());
  return state;
}

}  // namespace causeway::observe
