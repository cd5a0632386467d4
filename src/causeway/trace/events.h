// Runtime events: what the head and the workers report as work moves through
// the system, for traces (Chrome trace-event JSON), metrics and tests.
//
// The runtime calls one method per event on an EventSink. Events are plain
// structs with the time they happened (absl::Now() at the emitter), so a
// sink needs no clock of its own. The default sink ignores everything.
//
// Thread contract: every method may be called concurrently from any runtime
// thread (device threads, the dispatcher, transfer threads) and must return
// quickly without blocking on runtime work and without calling back into the
// runtime. Events of one device come from that device's thread in the order
// they happened; events of different devices are not ordered with each
// other except through their times.
#ifndef CAUSEWAY_TRACE_EVENTS_H_
#define CAUSEWAY_TRACE_EVENTS_H_

#include <cstdint>
#include <deque>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"

namespace causeway::trace {

// One op of one device: a partition of a launch (one execution of a program
// on its devices). `seq` is the launch's gang sequence number on its island:
// every device of the island runs its ops in increasing seq.
struct OpEvent {
  absl::Time time;
  DeviceId device;
  HostId host;
  IslandId island;
  uint64_t seq = 0;
  SessionId session;
  std::string session_name;
  std::string program;  // The program's (module's) name.
  int64_t partition = 0;
  int64_t num_partitions = 1;
  // OpFinished only: how long the op's run spent inside collectives (from
  // entering each one to leaving it, waiting for its peers included) and
  // how many it made. Zero for a program without collectives, or an op
  // that never ran.
  absl::Duration collective_time;
  int64_t collectives = 0;
};

// An op at the front of its device's queue that cannot start yet.
struct WaitEvent {
  enum class Reason {
    kInputs,  // Input buffers not ready yet (a producer or transfer).
    kMemory,  // Output buffers not reserved yet (back-pressure).
  };
  absl::Time time;
  DeviceId device;
  HostId host;
  uint64_t seq = 0;
  std::string program;
  Reason reason = Reason::kInputs;
  // What it waits for, e.g. "array 12 shard 0 (from device 3 on host 1)".
  std::string detail;
};

// Bytes moving between two devices (possibly on one host) through the data
// plane: one piece of a source shard into a destination buffer.
struct TransferEvent {
  absl::Time time;
  uint64_t transfer_id = 0;  // Same on Started and Finished.
  DeviceId source_device;
  HostId source_host;
  DeviceId destination_device;
  HostId destination_host;
  int64_t bytes = 0;
  std::string description;  // "array 3 shard 0 -> array 9 shard 1".
};

// The dispatcher sent a launch to its workers.
struct LaunchEvent {
  absl::Time time;
  IslandId island;
  uint64_t seq = 0;
  SessionId session;
  std::string session_name;
  std::string program;
  std::vector<DeviceId> devices;
};

// A client session opened or ended on the head (for the history of finished
// sessions, observe/history.h).
struct SessionEvent {
  absl::Time time;
  SessionId session;
  std::string session_name;
  std::string why;  // Ended: why ("it was closed", "its lease expired").
};

// A host changed state (declared dead by the head, ...).
struct HostEvent {
  absl::Time time;
  HostId host;
  std::string what;  // "dead: missed heartbeat deadline".
};

class EventSink {
 public:
  virtual ~EventSink() = default;

  virtual void LaunchDispatched(const LaunchEvent& /*event*/) {}

  // The op reached its device's queue (its outputs are being reserved).
  virtual void OpEnqueued(const OpEvent& /*event*/) {}
  // The op is at the front of its device's queue and started running (its
  // inputs are ready and its outputs reserved).
  virtual void OpStarted(const OpEvent& /*event*/) {}
  // The op left its device: finished, failed, or was abandoned (its inputs
  // failed, its host lost a peer). Ops that never started report only this.
  virtual void OpFinished(const OpEvent& /*event*/,
                          const absl::Status& /*status*/) {}

  // The front op of a device started / stopped waiting.
  virtual void WaitStarted(const WaitEvent& /*event*/) {}
  virtual void WaitFinished(const WaitEvent& /*event*/) {}

  virtual void TransferStarted(const TransferEvent& /*event*/) {}
  virtual void TransferFinished(const TransferEvent& /*event*/,
                                const absl::Status& /*status*/) {}

  virtual void HostStateChanged(const HostEvent& /*event*/) {}

  // The head opened / ended a session. Ended comes after every launch of
  // the session was dispatched; ops of it may still report after it (a
  // worker's events reach the head in batches).
  virtual void SessionOpened(const SessionEvent& /*event*/) {}
  virtual void SessionEnded(const SessionEvent& /*event*/) {}

  // The recorded events as Chrome trace-event JSON (opens in Perfetto), for
  // SessionChannel::GetTrace. Sinks that record nothing say so.
  virtual absl::StatusOr<std::string> ExportChromeTrace() {
    return absl::UnimplementedError(
        "this runtime records no trace: configure a trace-recording "
        "EventSink (LocalClusterOptions::event_sink)");
  }
};

// A sink that ignores every event (the default). Never destroyed.
EventSink& NullEventSink();

// One event as it travels from a worker process to the head's sink
// (transport::WorkerListener::OnTraceEvents): plain data that a transport
// can serialize field by field.
struct EventRecord {
  enum class Kind {
    kOpEnqueued,
    kOpStarted,
    kOpFinished,
    kWaitStarted,
    kWaitFinished,
    kTransferStarted,
    kTransferFinished,
  };
  Kind kind = Kind::kOpEnqueued;
  // OpEvent for the op kinds, WaitEvent for the waits, TransferEvent for
  // the transfers.
  std::variant<OpEvent, WaitEvent, TransferEvent> event;
  absl::Status status;  // kOpFinished and kTransferFinished.
};

// Replays `records` into `sink`, every time moved by `clock_offset` (the
// receiver's clock minus the sender's), so that one trace shows the devices
// of every process on one time line. Strings longer than
// kMaxReplayedString bytes are cut there (they come from another process);
// records whose kind and event disagree are skipped. Returns how many were
// replayed.
inline constexpr size_t kMaxReplayedString = 1024;
int64_t Replay(absl::Span<const EventRecord> records,
               absl::Duration clock_offset, EventSink& sink);

// An EventSink that keeps a worker's events for sending to the head:
// Take() returns what came since the last Take, in order. Bounded: beyond
// `max_events` the oldest are dropped (and counted). Head-side events
// (launches dispatched, host state) are not kept. Thread-safe.
class EventBuffer final : public EventSink {
 public:
  explicit EventBuffer(size_t max_events = size_t{1} << 16)
      : max_events_(max_events) {}

  void OpEnqueued(const OpEvent& event) override;
  void OpStarted(const OpEvent& event) override;
  void OpFinished(const OpEvent& event, const absl::Status& status) override;
  void WaitStarted(const WaitEvent& event) override;
  void WaitFinished(const WaitEvent& event) override;
  void TransferStarted(const TransferEvent& event) override;
  void TransferFinished(const TransferEvent& event,
                        const absl::Status& status) override;

  std::vector<EventRecord> Take() ABSL_LOCKS_EXCLUDED(mu_);
  // Events dropped since the buffer was made.
  int64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Add(EventRecord record) ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_events_;
  mutable absl::Mutex mu_;
  std::deque<EventRecord> records_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace causeway::trace

#endif  // CAUSEWAY_TRACE_EVENTS_H_
