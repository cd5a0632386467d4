// TraceRecorder: an EventSink that keeps the most recent runtime events in
// memory and exports them as Chrome trace-event JSON, which opens in
// Perfetto (ui.perfetto.dev) and chrome://tracing.
//
// Layout of the exported trace:
//  * one process per host ("host 1", pid = host id) with one track per
//    device ("device 3", tid = device id): each op is a complete event
//    ("ph":"X") named by its program, with its session, gang sequence
//    number and partition in args; waits at the front of a device's queue
//    are complete events "wait for inputs" / "wait for memory" on the same
//    track, just before the op they delay;
//  * transfers are complete events on a second track per device
//    ("device 3 transfers"): "send" on the source device and "recv" on the
//    destination, joined by a flow arrow ("ph":"s" / "ph":"f");
//  * the head is one more process ("head", pid = kHeadPid), with one track
//    per island holding an instant event per dispatched launch; host state
//    changes are global instant events.
// Times are microseconds since the recorder was created.
//
// Bounded: at most `max_events` finished events are kept (the oldest are
// dropped first, and the export says how many were dropped), and at most
// `max_events` started-but-unfinished ones.
//
// Thread-safe; every EventSink method takes one short lock and never
// blocks on anything else.
#ifndef CAUSEWAY_TRACE_TRACE_RECORDER_H_
#define CAUSEWAY_TRACE_TRACE_RECORDER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/trace/events.h"

namespace causeway::trace {

class TraceRecorder final : public EventSink {
 public:
  // The pid of the head's process in the exported trace.
  static constexpr int64_t kHeadPid = 1'000'000;
  // Transfer tracks use tid = kTransferTidOffset + device id.
  static constexpr int64_t kTransferTidOffset = 1'000'000;

  struct Options {
    size_t max_events = 1 << 18;
  };

  TraceRecorder() : TraceRecorder(Options()) {}
  explicit TraceRecorder(Options options);

  void LaunchDispatched(const LaunchEvent& event) override;
  void OpEnqueued(const OpEvent& event) override;
  void OpStarted(const OpEvent& event) override;
  void OpFinished(const OpEvent& event, const absl::Status& status) override;
  void WaitStarted(const WaitEvent& event) override;
  void WaitFinished(const WaitEvent& event) override;
  void TransferStarted(const TransferEvent& event) override;
  void TransferFinished(const TransferEvent& event,
                        const absl::Status& status) override;
  void HostStateChanged(const HostEvent& event) override;

  // {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
  absl::StatusOr<std::string> ExportChromeTrace() override;
  // The same with only the events recorded at or after `since` (by this
  // process's clock when the recorder got them): the recent work, for the
  // head's /trace?seconds=N.
  absl::StatusOr<std::string> ExportChromeTraceSince(absl::Time since);

  // Finished events held now, and how many were dropped to stay bounded.
  size_t num_events() const;
  int64_t num_dropped() const;
  // Forgets everything recorded so far.
  void Clear();

 private:
  // (device, seq, partition): one op.
  using OpKey = std::tuple<int64_t, uint64_t, int64_t>;
  // (device, seq, reason).
  using WaitKey = std::tuple<int64_t, uint64_t, int>;

  // Events are kept as they came and written as JSON (nlohmann-json) only
  // when the trace is exported, outside the lock: recording one costs a
  // copy, and never waits for a formatting.
  struct FinishedOp {
    OpEvent event;
    absl::Status status;
    std::optional<absl::Time> started;  // Empty: it never ran.
    std::optional<absl::Duration> queued;
  };
  struct FinishedWait {
    WaitEvent event;
    absl::Time started;
  };
  struct FinishedTransfer {
    TransferEvent event;
    absl::Status status;
    absl::Time started;
  };
  using Entry = std::variant<FinishedOp, FinishedWait, FinishedTransfer,
                             LaunchEvent, HostEvent>;

  // Microseconds since `epoch_`.
  double Micros(absl::Time time) const;
  // Appends the trace events `entry` stands for to `out`, one per line.
  void AppendJson(const Entry& entry, std::string& out) const;
  // Appends one finished event, dropping the oldest when full.
  void AddLocked(Entry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteTrackLocked(int64_t pid, int64_t tid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const absl::Time epoch_;
  mutable absl::Mutex mu_;
  struct Recorded {
    absl::Time at;  // When AddLocked got it.
    Entry entry;
  };
  std::deque<Recorded> events_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<OpKey, absl::Time> enqueued_ ABSL_GUARDED_BY(mu_);
  std::map<OpKey, absl::Time> started_ ABSL_GUARDED_BY(mu_);
  std::map<WaitKey, absl::Time> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, absl::Time> transfers_ ABSL_GUARDED_BY(mu_);
  // Tracks seen, for the name metadata: (pid, tid).
  std::set<std::pair<int64_t, int64_t>> tracks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::trace

#endif  // CAUSEWAY_TRACE_TRACE_RECORDER_H_
