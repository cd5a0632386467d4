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
// Thread-safe. Every method returns promptly: waiting happens on the device
// threads and the worker's transfer thread. Futures it returns resolve on
// worker threads; attach continuations with an executor of your own, not
// InlineExecutor, if they may call back into a worker.
#ifndef CAUSEWAY_RUNTIME_WORKER_H_
#define CAUSEWAY_RUNTIME_WORKER_H_

#include <cstdint>
#include <map>
#include <memory>
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
#include "causeway/runtime/control_channel.h"
#include "causeway/runtime/data_plane.h"
#include "causeway/runtime/device.h"
#include "causeway/runtime/events.h"
#include "causeway/runtime/launch_collectives.h"
#include "causeway/runtime/topology.h"

namespace causeway::runtime {

struct WorkerOptions {
  HostId host;
  IslandId island;
  std::vector<DeviceInfo> devices;  // This host's devices.
  // Not owned; must outlive the worker (or its Stop).
  DataPlane* data_plane = nullptr;            // Required.
  LaunchCollectives* collectives = nullptr;   // The island's; required.
  WorkerListener* listener = nullptr;         // May be null.
  EventSink* events = nullptr;                // Null: NullEventSink().
};

class Worker final : public PieceReceiver {
 public:
  // InvalidArgument for a worker without devices or without its required
  // collaborators.
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options);
  ~Worker() override;  // Stop() if still running.

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  HostId host() const { return options_.host; }

  // --- What a ControlChannel carries (see control_channel.h). ---
  Future<> LoadProgram(LoadProgramRequest request);
  void UnloadProgram(ProgramId program);
  void Dispatch(WorkerBatch batch);
  Future<> PutBuffer(PutBufferRequest request);
  Future<> AwaitBuffers(std::vector<DeviceBuffer> buffers);
  Future<hlo::Literal> FetchBuffer(DeviceBuffer buffer);
  void ReleaseBuffers(std::vector<DeviceBuffer> buffers);
  void PeerLost(HostId host, absl::Status status);
  void CancelSession(SessionId session, absl::Status status);
  Future<> Heartbeat();
  Future<WorkerStatus> GetStatus();

  // The data plane delivers pieces here.
  void ReceivePiece(PieceMessage piece) override;

  // Stops the host as a crash would, minus the mess: its devices stop after
  // the op they run (queued ops are dropped), every buffer becomes
  // DATA_LOSS, pushes to it fail, and every later call fails (or resolves)
  // with Unavailable. Idempotent. Do not call from a worker thread.
  void Stop();
  bool stopped() const;

 private:
  // A receive still waiting for pieces. It holds a reference to its buffer
  // so that late pieces find it even if the owner let go.
  struct PendingReceive {
    int64_t remaining = 0;
    bool whole = false;
    bool failed = false;  // A piece failed; the reference is gone.
    std::vector<PieceOrigin> origins;
  };
  using BufferKey = std::pair<DeviceId, BufferId>;

  explicit Worker(WorkerOptions options);

  // Call guard: false once stopped; otherwise the worker stays up until
  // Exit.
  bool Enter();
  void Exit();
  absl::Status StoppedError() const;
  Device* FindDevice(DeviceId device);

  void SetUpReceive(const ReceiveSpec& spec);
  void EnqueueLaunch(LaunchOp op);
  void ArmSend(SendSpec spec);
  void Send(const SendSpec& spec, const absl::StatusOr<hlo::Literal>& source);
  // Writes one piece into a pending receive (the caller removed nothing).
  void AcceptPiece(PieceMessage piece);

  const WorkerOptions options_;
  EventSink* const events_;
  std::map<DeviceId, std::unique_ptr<Device>> devices_;  // Fixed at Create.
  // Pushes pieces out once their sources are ready.
  std::unique_ptr<ThreadPool> transfers_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int64_t active_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<ProgramId, std::shared_ptr<const LoadedProgram>> programs_
      ABSL_GUARDED_BY(mu_);
  std::map<BufferKey, PendingReceive> pending_receives_ ABSL_GUARDED_BY(mu_);
  // Pieces that came before their receive was announced.
  std::multimap<BufferKey, PieceMessage> early_pieces_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::runtime

#endif  // CAUSEWAY_RUNTIME_WORKER_H_
