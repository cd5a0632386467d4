#include "causeway/transport/testing/fake_control_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway::transport {

void FakeControlChannel::Record(std::string call) {
  std::function<void(const std::string&)> on_call;
  {
    absl::MutexLock lock(&mu_);
    calls_.push_back(call);
    on_call = on_call_;
  }
  if (on_call) on_call(call);
}

std::vector<std::string> FakeControlChannel::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

bool FakeControlChannel::AwaitCall(const std::string& call,
                                   absl::Duration timeout, int times) const {
  auto made = [this, &call, times]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::count(calls_.begin(), calls_.end(), call) >= times;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&made), timeout);
}

std::vector<WorkerBatch> FakeControlChannel::batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}

void FakeControlChannel::set_heartbeats(Heartbeats heartbeats) {
  absl::MutexLock lock(&mu_);
  heartbeats_ = heartbeats;
}

void FakeControlChannel::ReleaseHeldHeartbeats(absl::Status status) {
  std::vector<Promise<>> held;
  {
    absl::MutexLock lock(&mu_);
    held.swap(held_);
  }
  for (Promise<>& promise : held) promise.Set(status);
}

void FakeControlChannel::set_fetch_result(absl::StatusOr<hlo::Literal> result) {
  absl::MutexLock lock(&mu_);
  fetch_ = std::move(result);
}

void FakeControlChannel::set_on_call(
    std::function<void(const std::string& call)> on_call) {
  absl::MutexLock lock(&mu_);
  on_call_ = std::move(on_call);
}

Future<> FakeControlChannel::LoadProgram(LoadProgramRequest request) {
  Record(absl::StrCat("LoadProgram ", request.program.value()));
  return MakeReadyFuture();
}

void FakeControlChannel::UnloadProgram(ProgramId program) {
  Record(absl::StrCat("UnloadProgram ", program.value()));
}

void FakeControlChannel::Dispatch(WorkerBatch batch) {
  {
    absl::MutexLock lock(&mu_);
    batches_.push_back(batch);
  }
  Record("Dispatch");
}

Future<> FakeControlChannel::PutBuffer(PutBufferRequest request) {
  Record(absl::StrCat("PutBuffer ", request.buffer.ToString()));
  return MakeReadyFuture();
}

Future<> FakeControlChannel::AwaitBuffers(std::vector<DeviceBuffer> buffers) {
  Record(absl::StrCat("AwaitBuffers ", buffers.size()));
  return MakeReadyFuture();
}

Future<hlo::Literal> FakeControlChannel::FetchBuffer(DeviceBuffer buffer) {
  Record(absl::StrCat("FetchBuffer ", buffer.buffer.ToString()));
  absl::MutexLock lock(&mu_);
  return MakeReadyFuture(fetch_);
}

void FakeControlChannel::ReleaseBuffers(std::vector<DeviceBuffer> buffers) {
  Record(absl::StrCat("ReleaseBuffers ", buffers.size()));
}

void FakeControlChannel::PeerLost(HostId host, absl::Status status) {
  Record(absl::StrCat("PeerLost ", host.value()));
}

void FakeControlChannel::FailBuffers(std::vector<UndeliveredPiece> pieces) {
  for (const UndeliveredPiece& piece : pieces) {
    Record(absl::StrCat("FailBuffers ", piece.destination.buffer.ToString()));
  }
}

void FakeControlChannel::CancelSession(SessionId session, absl::Status status) {
  Record(absl::StrCat("CancelSession ", session.value()));
}

void FakeControlChannel::UpdateMembership(MembershipUpdate update) {
  const uint64_t version = update.version;
  {
    absl::MutexLock lock(&mu_);
    memberships_.push_back(std::move(update));
  }
  Record(absl::StrCat("UpdateMembership ", version));
}

std::vector<MembershipUpdate> FakeControlChannel::memberships() const {
  absl::MutexLock lock(&mu_);
  return memberships_;
}

Future<> FakeControlChannel::Heartbeat() {
  Record("Heartbeat");
  absl::MutexLock lock(&mu_);
  switch (heartbeats_) {
    case Heartbeats::kAnswer:
      return MakeReadyFuture();
    case Heartbeats::kFail:
      return MakeErrorFuture(absl::UnavailableError("the fake fails it"));
    case Heartbeats::kHang:
      break;
  }
  auto [promise, future] = MakePromise<>();
  held_.push_back(std::move(promise));
  return future;
}

Future<WorkerStatus> FakeControlChannel::GetStatus() {
  Record("GetStatus");
  return MakeReadyFuture(WorkerStatus{});
}

}  // namespace causeway::transport
