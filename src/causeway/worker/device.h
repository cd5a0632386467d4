// One device of a worker: an in-order stream of launches run by one thread,
// and the device's object store (its memory).
//
// A launch is enqueued with everything it needs already arranged: its input
// buffers referenced (so a Delete cannot free them first), the futures of
// their values, and its output buffers reserved (reservation happens at
// enqueue, in order, so memory back-pressure keeps the stream's order). The
// device thread takes launches strictly in the order enqueued, one at a
// time: it waits for the front launch's inputs and memory, runs it, writes
// its outputs and drops its input references. A launch whose inputs failed,
// or whose peer host died, fails its outputs with that error (everything
// computed from them fails in turn) and cancels its peers' collectives.
#ifndef CAUSEWAY_WORKER_DEVICE_H_
#define CAUSEWAY_WORKER_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/future.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/ir.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/launch_collectives.h"
#include "causeway/transport/topology.h"
#include "causeway/worker/object_store.h"
#include "causeway/worker/sim_program.h"

namespace causeway::worker {

// A program prepared on a worker: shared by its devices. Immutable.
struct LoadedProgram {
  transport::ProgramId id;
  std::string name;
  std::shared_ptr<const hlo::Module> module;
  // Runs `module`: the evaluator on cpu devices, the model on sim devices
  // (exactly one is set).
  std::unique_ptr<exec::Evaluator> evaluator;
  std::unique_ptr<SimProgram> sim;
  bool has_collectives = false;
};

// A launch as the device keeps it (see the header comment).
struct QueuedLaunch {
  transport::LaunchOp op;
  std::shared_ptr<const LoadedProgram> program;  // Null: `error` says why.
  absl::Status error;  // Known at enqueue: the launch fails with it.
  // Per input: whether the device holds a reference (AddRef succeeded), and
  // the value.
  std::vector<bool> input_referenced;
  std::vector<Future<hlo::Literal>> input_values;
  std::vector<Future<>> output_reservations;
  // When it could start, as far as its own inputs and memory go: enqueued,
  // or later when it waited for them (a sim program's modelled start).
  absl::Time ready;
  // Set (under the device's lock) when a peer host died or the session
  // ended: the launch must not run (or, running, must stop).
  absl::Status abandoned;
  // Set with `abandoned` while the launch runs: the evaluator stops at its
  // next while-loop iteration.
  std::atomic<bool> cancel{false};
  // Once it ran: its time inside collectives and how many it made (for its
  // OpFinished event).
  absl::Duration collective_time;
  int64_t collectives = 0;
};

class Device {
 public:
  struct Options {
    transport::DeviceInfo info;
    trace::EventSink* events = nullptr;          // Not owned; required.
    transport::WorkerListener* listener = nullptr;   // Not owned; may be null.
    transport::LaunchCollectives* collectives =
        nullptr;  // Not owned; required.
  };

  explicit Device(Options options);
  ~Device();  // Stop() if not stopped.

  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  DeviceId id() const { return options_.info.id; }
  const transport::DeviceInfo& info() const { return options_.info; }
  ObjectStore& store() { return store_; }

  // Arranges `op` (references its inputs, reserves its outputs) and queues
  // it behind the launches already enqueued. Thread-safe; call from one
  // thread at a time per device to keep an order (the worker does).
  void Enqueue(transport::LaunchOp op,
               std::shared_ptr<const LoadedProgram> program,
               absl::Status error);

  // A peer host is gone: every queued launch with a device there fails
  // with `status` (its outputs at once), and a running one has its
  // collectives aborted.
  void AbandonLaunchesOnHost(HostId host, const absl::Status& status);

  // The session ended: its queued launches fail with `status` (their
  // outputs at once), and its running launch stops at its next while-loop
  // iteration (with its collectives aborted), so a program that loops
  // forever does not hold the device after its session is gone.
  void CancelSession(SessionId session, const absl::Status& status);

  // The host stops: every buffer becomes `status` (DATA_LOSS), the running
  // launch is stopped at its next while-loop iteration and its collectives
  // are aborted, the thread ends after it. Queued launches are dropped
  // without notice (as a crashed host would).
  void Stop(const absl::Status& status);

  transport::DeviceStatus Status() const;

 private:
  enum class FrontState { kWaiting, kRunning };

  void Loop();
  void RunFront(QueuedLaunch& launch);
  // Waits for the launch's inputs; the first error, if any.
  absl::Status AwaitInputs(QueuedLaunch& launch);
  absl::Status AwaitOutputs(QueuedLaunch& launch);
  absl::Status Execute(QueuedLaunch& launch,
                       std::vector<hlo::Literal>* outputs);
  void Finish(QueuedLaunch& launch, absl::Status status,
              std::vector<hlo::Literal> outputs);
  // Abandons the queued launches that `matches` (see AbandonLaunchesOnHost);
  // a running one has its collectives aborted, and is stopped too when
  // `stop_running`.
  void AbandonLaunches(absl::FunctionRef<bool(const QueuedLaunch&)> matches,
                       const absl::Status& status, bool stop_running);
  trace::OpEvent MakeOpEvent(const transport::LaunchOp& op) const;
  // A wait of `op` at the front of the queue, starting now.
  trace::WaitEvent MakeWaitEvent(const transport::LaunchOp& op,
                                 trace::WaitEvent::Reason reason,
                                 std::string detail) const;
  transport::OpStatus MakeOpStatus(const QueuedLaunch& launch) const;

  const Options options_;
  // False for the null sink: events are not even built then.
  const bool recording_;
  ObjectStore store_;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<QueuedLaunch>> queue_ ABSL_GUARDED_BY(mu_);
  FrontState front_state_ ABSL_GUARDED_BY(mu_) = FrontState::kWaiting;
  bool front_waits_for_memory_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  // Sim devices: when the last modelled launch ended. The device thread's.
  absl::Time sim_free_at_ = absl::InfinitePast();
  std::thread thread_;
};

}  // namespace causeway::worker

#endif  // CAUSEWAY_WORKER_DEVICE_H_
