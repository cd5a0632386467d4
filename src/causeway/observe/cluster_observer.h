// ClusterObserver: what the head's HTTP endpoints show, gathered off the
// dispatch path. Once a second (its own thread) it asks every worker for
// its status (Head::GetWorkerStatuses: the devices' running and queued ops
// and memory) and samples the MetricsSink's counters into a bounded series
// (launches per second, device utilisation over the last minutes). Requests
// read the latest result: serving a page or a scrape never reaches a
// worker and never waits for one, however often it comes.
//
// Observe() adds what is cheap to take fresh on each request: the head's
// View (sessions, slices, hosts, deaths, heartbeat ages; its locks taken
// briefly) and a copy of the counters.
//
// Thread-safe.
#ifndef CAUSEWAY_OBSERVE_CLUSTER_OBSERVER_H_
#define CAUSEWAY_OBSERVE_CLUSTER_OBSERVER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/head/head.h"
#include "causeway/observe/metrics_sink.h"

namespace causeway::observe {

// The counters at one moment of the series.
struct Sample {
  absl::Time time;
  int64_t launches = 0;
  int64_t ops = 0;
  std::map<DeviceId, double> busy_seconds;  // Running op's share included.
};

// Everything one response is formatted from.
struct ObservedState {
  absl::Time now;
  head::ClusterView view;
  MetricsSnapshot metrics;
  // The latest worker statuses (null before the first round) and when
  // they were gathered.
  std::shared_ptr<const head::WorkerStatuses> workers;
  absl::Time workers_at;
  std::vector<Sample> samples;  // Oldest first.
  // Utilisation is averaged over the samples of this last window.
  absl::Duration busy_window = absl::Seconds(60);
};

class ClusterObserver {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(1);
    size_t max_samples = 600;  // Ten minutes at one a second.
    absl::Duration worker_timeout = absl::Seconds(2);
  };

  // `head` and `metrics` are not owned and outlive the observer.
  ClusterObserver(head::Head* head, MetricsSink* metrics, Options options);
  ~ClusterObserver();  // Stop().

  ClusterObserver(const ClusterObserver&) = delete;
  ClusterObserver& operator=(const ClusterObserver&) = delete;

  // RefreshNow at once, then every interval on a thread of its own.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // One round: the workers' statuses (waits up to the worker timeout, on
  // the calling thread) and one sample.
  void RefreshNow() ABSL_LOCKS_EXCLUDED(mu_);

  // The latest round plus the head's view and counters now.
  ObservedState Observe() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();

  head::Head* const head_;
  MetricsSink* const metrics_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const head::WorkerStatuses> workers_ ABSL_GUARDED_BY(mu_);
  absl::Time workers_at_ ABSL_GUARDED_BY(mu_);
  std::deque<Sample> samples_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_CLUSTER_OBSERVER_H_
