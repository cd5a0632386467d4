// The in-process control channel: calls the worker's service directly.
// Messages are moved, not serialized.
#ifndef CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/control_channel.h"

namespace causeway::transport {

// Thread-safe (the service is). `worker` must outlive the channel; a
// stopped worker answers every call with Unavailable.
class InProcessControlChannel final : public ControlChannel {
 public:
  explicit InProcessControlChannel(WorkerService* worker) : worker_(worker) {}
  // Futures of calls lost to Sever fail with Cancelled now.
  ~InProcessControlChannel() override = default;

  // Simulates a link that went down, or a worker process that hangs: from
  // now on every call is lost, and its future never resolves until the
  // channel is destroyed. The worker itself is not told.
  void Sever();

  Future<> LoadProgram(LoadProgramRequest request) override;
  void UnloadProgram(ProgramId program) override;
  void Dispatch(WorkerBatch batch) override;
  Future<> PutBuffer(PutBufferRequest request) override;
  Future<> AwaitBuffers(std::vector<DeviceBuffer> buffers) override;
  Future<hlo::Literal> FetchBuffer(DeviceBuffer buffer) override;
  void ReleaseBuffers(std::vector<DeviceBuffer> buffers) override;
  void PeerLost(HostId host, absl::Status status) override;
  void FailBuffers(std::vector<UndeliveredPiece> pieces) override;
  void CancelSession(SessionId session, absl::Status status) override;
  void UpdateMembership(MembershipUpdate update) override;
  Future<> Heartbeat() override;
  Future<WorkerStatus> GetStatus() override;

 private:
  bool severed() const { return severed_.load(std::memory_order_acquire); }
  // A future that resolves when the channel is destroyed.
  template <typename T>
  Future<T> Lost();

  WorkerService* const worker_;
  std::atomic<bool> severed_{false};
  absl::Mutex mu_;
  std::vector<std::shared_ptr<void>> lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_
