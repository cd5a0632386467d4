// A worker: one host's side of the runtime. It owns the host's devices (each
// an in-order launch stream with its object store), the programs loaded on
// it, and its end of the data plane. The head reaches it only through a
// ControlChannel; other workers only through the DataPlane.
//
// Dispatch messages are handled in order: receives are reserved (data from
// other devices will land there), launches are enqueued on their devices
// (inputs referenced, outputs reserved), and sends are armed: each pushes
// its piece through the data plane as soon as its source buffer is ready (or
// pushes the source's error, so the destination fails instead of waiting).
//
// Pieces (docs/data_plane.md): a receive knows each of its pieces by the
// transfer that sends it, and counts each exactly once: arrived (as a
// literal or written in place), reported undelivered by its sender
// (FailBuffers), or lost with its host (PeerLost). A piece that cannot be
// pushed is reported to the head (WorkerListener::OnPushFailed), which
// fails its destination.
//
// Thread-safe. Every method returns promptly: waiting happens on the device
// threads and the worker's transfer thread. Futures it returns resolve on
// worker threads; attach continuations with an executor of your own, not
// InlineExecutor, if they may call back into a worker.
#ifndef CAUSEWAY_WORKER_WORKER_H_
#define CAUSEWAY_WORKER_WORKER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/exec/evaluator.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/data_plane.h"
#include "causeway/transport/launch_collectives.h"
#include "causeway/transport/topology.h"
#include "causeway/worker/device.h"
#include "causeway/worker/op_done_batcher.h"
#include "causeway/worker/sim_program.h"

namespace causeway::worker {

struct WorkerOptions {
  HostId host;
  IslandId island;
  std::vector<transport::DeviceInfo> devices;  // This host's devices.
  // Not owned; must outlive the worker (or its Stop).
  transport::DataPlane* data_plane = nullptr;            // Required.
  transport::LaunchCollectives* collectives =
      nullptr;  // The island's; required.
  transport::WorkerListener* listener = nullptr;         // May be null.
  trace::EventSink* events = nullptr;                // Null: NullEventSink().
  // Told of every newer membership (peers' data-plane addresses, island
  // epochs), on the thread of UpdateMembership: a worker process wires its
  // data plane and collectives to it. May be null.
  std::function<void(const transport::MembershipUpdate&)> on_membership;
  // How the devices' evaluator runs programs (tests turn the fused loops
  // off to compare them with op-by-op evaluation).
  exec::Evaluator::Options evaluator = {};
  // Set for sim devices (every device's kind "sim"): programs take the
  // modelled time instead of running (sim_program.h, docs/sim_devices.md).
  std::optional<SimModel> sim;
};

class Worker final : public transport::WorkerService,
                     public transport::PieceReceiver {
 public:
  // InvalidArgument for a worker without devices, without its required
  // collaborators, or whose devices' kind ("sim" or not) disagrees with
  // WorkerOptions::sim.
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options);
  ~Worker() override;  // Stop() if still running.

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  HostId host() const { return options_.host; }
  // The newest membership the head sent (version 0 before any).
  transport::MembershipUpdate membership() const;

  // --- transport::WorkerService (see control_channel.h). ---
  Future<> LoadProgram(transport::LoadProgramRequest request) override;
  void UnloadProgram(transport::ProgramId program) override;
  void Dispatch(transport::WorkerBatch batch) override;
  Future<> PutBuffer(transport::PutBufferRequest request) override;
  Future<> AwaitBuffers(std::vector<transport::DeviceBuffer> buffers) override;
  Future<hlo::Literal> FetchBuffer(transport::DeviceBuffer buffer) override;
  void ReleaseBuffers(std::vector<transport::DeviceBuffer> buffers) override;
  void PeerLost(HostId host, absl::Status status) override;
  void FailBuffers(std::vector<transport::UndeliveredPiece> pieces) override;
  void CancelSession(SessionId session, absl::Status status) override;
  // Keeps the update with the highest version and passes it to
  // WorkerOptions::on_membership.
  void UpdateMembership(transport::MembershipUpdate update) override;
  Future<> Heartbeat() override;
  Future<transport::WorkerStatus> GetStatus() override;

  // --- transport::PieceReceiver: the data plane delivers pieces here. ---
  void ReceivePiece(transport::PieceMessage piece) override;
  absl::StatusOr<std::unique_ptr<transport::PieceWriter>> BeginPiece(
      const transport::PieceHeader& header) override;
  void ConnectionLost(HostId peer, absl::Status status) override;

  // Stops the host as a crash would, minus the mess: its devices stop after
  // the op they run (queued ops are dropped), every buffer becomes
  // DATA_LOSS, pushes to it fail, and every later call fails (or resolves)
  // with Unavailable. Idempotent. Do not call from a worker thread.
  void Stop();
  bool stopped() const;

 private:
  enum class PieceState { kWaiting, kWriting, kDone };
  struct ExpectedPiece {
    transport::PieceOrigin origin;
    PieceState state = PieceState::kWaiting;
  };
  // A receive still waiting for pieces, by transfer id. It holds a
  // reference to its buffer, so that late pieces find it even if the owner
  // let go; the reference goes when the buffer fails or its last piece is
  // in. The receive is forgotten once every piece is accounted for.
  struct PendingReceive {
    hlo::Shape shape;
    bool whole = false;
    bool failed = false;  // The buffer failed; the reference is gone.
    std::map<uint64_t, ExpectedPiece> pieces;
    int64_t unresolved = 0;  // Pieces not kDone.
  };
  using BufferKey = std::pair<DeviceId, BufferId>;
  // Lets push continuations, which run on data-plane threads, report until
  // the worker stops (and never after: Stop waits for those running).
  struct PushReports;

  explicit Worker(WorkerOptions options);

  // Call guard: false once stopped; otherwise the worker stays up until
  // Exit.
  bool Enter();
  void Exit();
  absl::Status StoppedError() const;
  Device* FindDevice(DeviceId device);

  void SetUpReceive(const transport::ReceiveSpec& spec);
  void EnqueueLaunch(transport::LaunchOp op);
  void ArmSend(transport::SendSpec spec);
  void Send(const transport::SendSpec& spec,
            const absl::StatusOr<hlo::Literal>& source);
  // Writes one piece (data or an error) into its pending receive, or holds
  // it until the receive is announced.
  void AcceptPiece(transport::PieceMessage piece);
  // An in-place write of piece `transfer` of `key` ended.
  void FinishPiece(BufferKey key, uint64_t transfer, absl::Status written);
  // Forgets a receive whose pieces are all accounted for.
  void ForgetLocked(std::map<BufferKey, PendingReceive>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every receive that still waits for a piece from `host` with
  // `status`; with `resolve`, those pieces count as accounted for (the host
  // is gone: they will never come).
  void FailReceivesFrom(HostId host, const absl::Status& status, bool resolve);

  const WorkerOptions options_;
  trace::EventSink* const events_;
  // One launch's OpDone notices from this host's devices leave together;
  // null without a listener. Outlives the devices, which report to it.
  std::unique_ptr<OpDoneBatcher> op_dones_;
  std::map<DeviceId, std::unique_ptr<Device>> devices_;  // Fixed at Create.
  // Pushes pieces out once their sources are ready.
  std::unique_ptr<ThreadPool> transfers_;
  std::shared_ptr<PushReports> reports_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int64_t active_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<transport::ProgramId, std::shared_ptr<const LoadedProgram>> programs_
      ABSL_GUARDED_BY(mu_);
  std::map<BufferKey, PendingReceive> pending_receives_ ABSL_GUARDED_BY(mu_);
  // Pieces that came before their receive was announced.
  transport::MembershipUpdate membership_ ABSL_GUARDED_BY(mu_);
  std::multimap<BufferKey, transport::PieceMessage> early_pieces_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::worker

#endif  // CAUSEWAY_WORKER_WORKER_H_
