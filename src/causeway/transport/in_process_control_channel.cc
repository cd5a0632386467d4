#include "causeway/transport/in_process_control_channel.h"

#include <utility>

namespace causeway::transport {

void InProcessControlChannel::Sever() {
  severed_.store(true, std::memory_order_release);
}

template <typename T>
Future<T> InProcessControlChannel::Lost() {
  auto [promise, future] = MakePromise<T>();
  absl::MutexLock lock(&mu_);
  lost_.push_back(std::make_shared<Promise<T>>(std::move(promise)));
  return future;
}

Future<> InProcessControlChannel::LoadProgram(LoadProgramRequest request) {
  if (severed()) return Lost<void>();
  return worker_->LoadProgram(std::move(request));
}

void InProcessControlChannel::UnloadProgram(ProgramId program) {
  if (!severed()) worker_->UnloadProgram(program);
}

void InProcessControlChannel::Dispatch(WorkerBatch batch) {
  if (!severed()) worker_->Dispatch(std::move(batch));
}

Future<> InProcessControlChannel::PutBuffer(PutBufferRequest request) {
  if (severed()) return Lost<void>();
  return worker_->PutBuffer(std::move(request));
}

Future<> InProcessControlChannel::AwaitBuffers(
    std::vector<DeviceBuffer> buffers) {
  if (severed()) return Lost<void>();
  return worker_->AwaitBuffers(std::move(buffers));
}

Future<hlo::Literal> InProcessControlChannel::FetchBuffer(DeviceBuffer buffer) {
  if (severed()) return Lost<hlo::Literal>();
  return worker_->FetchBuffer(buffer);
}

void InProcessControlChannel::ReleaseBuffers(
    std::vector<DeviceBuffer> buffers) {
  if (!severed()) worker_->ReleaseBuffers(std::move(buffers));
}

void InProcessControlChannel::PeerLost(HostId host, absl::Status status) {
  if (!severed()) worker_->PeerLost(host, std::move(status));
}

void InProcessControlChannel::FailBuffers(
    std::vector<UndeliveredPiece> pieces) {
  if (!severed()) worker_->FailBuffers(std::move(pieces));
}

void InProcessControlChannel::CancelSession(SessionId session,
                                            absl::Status status) {
  if (!severed()) worker_->CancelSession(session, std::move(status));
}

void InProcessControlChannel::UpdateMembership(MembershipUpdate update) {
  if (!severed()) worker_->UpdateMembership(std::move(update));
}

Future<> InProcessControlChannel::Heartbeat() {
  if (severed()) return Lost<void>();
  return worker_->Heartbeat();
}

Future<WorkerStatus> InProcessControlChannel::GetStatus() {
  if (severed()) return Lost<WorkerStatus>();
  return worker_->GetStatus();
}

}  // namespace causeway::transport
