// MetricsSink: an EventSink that counts what the runtime reports (launches,
// ops and their outcomes, device busy time, transfers, host deaths) for the
// head's `/metrics` and `/api/status` (docs/operate.md), and passes every
// event on to another sink (the head's trace recorder).
//
// Everything it keeps is bounded: counters by island, device, status code
// or death reason (small sets), fixed-bucket histograms, the last
// kMaxRecentFailures failures, at most kMaxTrackedLaunches launches whose
// ops are still expected and kMaxTrackedTransfers transfers in flight
// (beyond that the oldest are forgotten, and counted).
//
// Thread-safe: every EventSink method takes one short lock, counts, and
// calls the next sink after releasing it; Snapshot copies under the lock.
#ifndef CAUSEWAY_OBSERVE_METRICS_SINK_H_
#define CAUSEWAY_OBSERVE_METRICS_SINK_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/trace/events.h"

namespace causeway::observe {

// Observations in cumulative-ready form: counts[i] is how many fell in
// (bounds[i-1], bounds[i]]; the last count is above the last bound.
struct Histogram {
  std::vector<double> bounds;  // Upper bounds, increasing, in seconds.
  std::vector<int64_t> counts;  // bounds.size() + 1.
  double sum = 0;
  int64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void Observe(double value);
};

// Bucket bounds for latencies from 10 µs to 10 s, in seconds.
std::vector<double> LatencyBuckets();

// Classifies a death reason (Membership's text) into a small set for a
// metric label: "heartbeat", "connection", "start", "other".
std::string DeathReasonLabel(const std::string& reason);

struct DeviceActivity {
  HostId host;
  double busy_seconds = 0;  // Finished ops' running time.
  // Finished ops' time inside collectives (part of busy_seconds).
  double collective_seconds = 0;
  // The op running now (OpStarted with no OpFinished yet), and since when.
  std::optional<absl::Time> running_since;
  int64_t ops_finished = 0;
};

struct OpFailure {
  absl::Time time;
  DeviceId device;
  HostId host;
  std::string session;
  std::string program;
  uint64_t seq = 0;
  std::string code;     // "DATA_LOSS".
  std::string message;  // Cut at 512 bytes.
};

struct TransferInFlight {
  absl::Time started;
  uint64_t transfer_id = 0;
  DeviceId source_device;
  DeviceId destination_device;
  int64_t bytes = 0;
  std::string description;
};

struct HostDeathRecord {
  absl::Time time;
  HostId host;
  std::string reason;
};

struct MetricsSnapshot {
  absl::Time taken;
  std::map<IslandId, int64_t> launches;           // Dispatched.
  std::map<std::string, int64_t> launch_failures;  // By first failed code.
  std::map<std::string, int64_t> ops;              // Finished, by code.
  std::map<DeviceId, DeviceActivity> devices;
  Histogram dispatch_latency;  // Dispatched -> enqueued on a device.
  Histogram op_duration;       // Started -> finished.
  // Per op of a program with collectives: its time inside them.
  Histogram op_collective_time;
  int64_t collectives = 0;  // Collective calls made by finished ops.
  Histogram transfer_duration;
  std::map<std::string, int64_t> transfers;  // Finished, by code.
  int64_t transfer_bytes = 0;                // Of finished OK transfers.
  std::vector<TransferInFlight> transfers_in_flight;  // Oldest first.
  std::map<std::string, int64_t> host_deaths;  // By DeathReasonLabel.
  std::deque<OpFailure> recent_failures;       // Oldest first.
  std::deque<HostDeathRecord> recent_deaths;   // Oldest first.
  int64_t forgotten = 0;  // Tracked launches/transfers dropped (bounds).

  // Busy seconds of `device` up to `now`, the running op's share included.
  double BusySeconds(DeviceId device, absl::Time now) const;
  int64_t TotalLaunches() const;
};

class MetricsSink final : public trace::EventSink {
 public:
  static constexpr size_t kMaxRecentFailures = 32;
  static constexpr size_t kMaxRecentDeaths = 64;
  static constexpr size_t kMaxTrackedLaunches = size_t{1} << 16;
  static constexpr size_t kMaxTrackedTransfers = size_t{1} << 14;

  // `next` (not owned, may be null) gets every event after it is counted.
  explicit MetricsSink(trace::EventSink* next = nullptr);

  MetricsSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  void LaunchDispatched(const trace::LaunchEvent& event) override;
  void OpEnqueued(const trace::OpEvent& event) override;
  void OpStarted(const trace::OpEvent& event) override;
  void OpFinished(const trace::OpEvent& event,
                  const absl::Status& status) override;
  void WaitStarted(const trace::WaitEvent& event) override;
  void WaitFinished(const trace::WaitEvent& event) override;
  void TransferStarted(const trace::TransferEvent& event) override;
  void TransferFinished(const trace::TransferEvent& event,
                        const absl::Status& status) override;
  void HostStateChanged(const trace::HostEvent& event) override;
  void SessionOpened(const trace::SessionEvent& event) override;
  void SessionEnded(const trace::SessionEvent& event) override;
  absl::StatusOr<std::string> ExportChromeTrace() override;

 private:
  struct Launch {
    std::optional<absl::Time> dispatched;
    bool failure_counted = false;
  };
  using LaunchKey = std::pair<IslandId, uint64_t>;
  Launch& TrackLaunchLocked(const LaunchKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  trace::EventSink* const next_;
  mutable absl::Mutex mu_;
  MetricsSnapshot counts_ ABSL_GUARDED_BY(mu_);
  std::map<LaunchKey, Launch> launches_ ABSL_GUARDED_BY(mu_);
  std::deque<LaunchKey> launch_order_ ABSL_GUARDED_BY(mu_);
  // Pieces in flight by (transfer id, source, destination device): the
  // sender reports them (worker.cc), once each.
  using TransferKey = std::tuple<uint64_t, DeviceId, DeviceId>;
  std::map<TransferKey, TransferInFlight> transfers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_METRICS_SINK_H_
