// The in-process control channel: calls the worker's service directly.
// Messages are moved, not serialized.
#ifndef CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_

#include <utility>
#include <vector>

#include "causeway/transport/control_channel.h"

namespace causeway::transport {

// Thread-safe (the service is). `worker` must outlive the channel; a
// stopped worker answers every call with Unavailable.
class InProcessControlChannel final : public ControlChannel {
 public:
  explicit InProcessControlChannel(WorkerService* worker) : worker_(worker) {}

  Future<> LoadProgram(LoadProgramRequest request) override {
    return worker_->LoadProgram(std::move(request));
  }
  void UnloadProgram(ProgramId program) override {
    worker_->UnloadProgram(program);
  }
  void Dispatch(WorkerBatch batch) override {
    worker_->Dispatch(std::move(batch));
  }
  Future<> PutBuffer(PutBufferRequest request) override {
    return worker_->PutBuffer(std::move(request));
  }
  Future<> AwaitBuffers(std::vector<DeviceBuffer> buffers) override {
    return worker_->AwaitBuffers(std::move(buffers));
  }
  Future<hlo::Literal> FetchBuffer(DeviceBuffer buffer) override {
    return worker_->FetchBuffer(buffer);
  }
  void ReleaseBuffers(std::vector<DeviceBuffer> buffers) override {
    worker_->ReleaseBuffers(std::move(buffers));
  }
  void PeerLost(HostId host, absl::Status status) override {
    worker_->PeerLost(host, std::move(status));
  }
  void FailBuffers(std::vector<UndeliveredPiece> pieces) override {
    worker_->FailBuffers(std::move(pieces));
  }
  void CancelSession(SessionId session, absl::Status status) override {
    worker_->CancelSession(session, std::move(status));
  }
  Future<> Heartbeat() override { return worker_->Heartbeat(); }
  Future<WorkerStatus> GetStatus() override { return worker_->GetStatus(); }

 private:
  WorkerService* const worker_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_IN_PROCESS_CONTROL_CHANNEL_H_
