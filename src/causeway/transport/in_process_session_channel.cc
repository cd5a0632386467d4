#include "causeway/transport/in_process_session_channel.h"

#include <utility>

namespace causeway::transport {

InProcessSessionChannel::~InProcessSessionChannel() {
  std::optional<SessionId> session;
  {
    absl::MutexLock lock(&mu_);
    session.swap(session_);
  }
  if (session.has_value()) head_->CloseSession(*session);
}

absl::StatusOr<SessionId> InProcessSessionChannel::Session() const {
  absl::MutexLock lock(&mu_);
  if (!session_.has_value()) {
    return absl::FailedPreconditionError(
        "this channel has no open session: call OpenSession first");
  }
  return *session_;
}

Future<SessionId> InProcessSessionChannel::OpenSession(
    OpenSessionRequest request) {
  absl::MutexLock lock(&mu_);
  if (session_.has_value()) {
    return MakeErrorFuture<SessionId>(absl::FailedPreconditionError(
        "this channel already has an open session; open another channel "
        "for another session"));
  }
  absl::StatusOr<SessionId> opened =
      head_->OpenSession(request, SessionLease::kHeld);
  if (!opened.ok()) return MakeErrorFuture<SessionId>(opened.status());
  session_ = *opened;
  return MakeReadyFuture(*session_);
}

Future<> InProcessSessionChannel::CloseSession() {
  std::optional<SessionId> session;
  {
    absl::MutexLock lock(&mu_);
    session.swap(session_);
  }
  if (!session.has_value()) {
    return MakeErrorFuture(absl::FailedPreconditionError(
        "this channel has no open session to close"));
  }
  return head_->CloseSession(*session);
}

Future<SliceInfo> InProcessSessionChannel::RequestSlice(
    SliceRequest request) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<SliceInfo>(session.status());
  }
  return head_->RequestSlice(*session, std::move(request));
}

Future<SliceInfo> InProcessSessionChannel::GetSlice(
    SliceHandle slice) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<SliceInfo>(session.status());
  }
  return head_->GetSlice(*session, slice);
}

Future<> InProcessSessionChannel::ReleaseSlice(SliceHandle slice) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->ReleaseSlice(*session, slice);
}

Future<CompileInfo> InProcessSessionChannel::Compile(
    CompileRequest request) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<CompileInfo>(session.status());
  }
  return head_->Compile(*session, std::move(request));
}

Future<> InProcessSessionChannel::PutArray(ArraySpec spec,
                                           hlo::Literal global) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->PutArray(*session, std::move(spec), std::move(global));
}

Future<> InProcessSessionChannel::PutShards(ArraySpec spec,
                                            std::vector<hlo::Literal> shards) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->PutShards(*session, std::move(spec), std::move(shards));
}

void InProcessSessionChannel::Execute(ExecuteOp op) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Execute(*session, std::move(op));
}

void InProcessSessionChannel::Copy(CopyOp op) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Copy(*session, std::move(op));
}

void InProcessSessionChannel::Submit(ProgramGraph graph) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Submit(*session, std::move(graph));
}

Future<> InProcessSessionChannel::ArrayReady(ArrayHandle array) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->ArrayReady(*session, array);
}

Future<hlo::Literal> InProcessSessionChannel::Fetch(ArrayHandle array) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture<hlo::Literal>(session.status());
  return head_->Fetch(*session, array);
}

Future<std::vector<hlo::Literal>> InProcessSessionChannel::FetchShards(
    ArrayHandle array) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<std::vector<hlo::Literal>>(session.status());
  }
  return head_->FetchShards(*session, array);
}

void InProcessSessionChannel::Delete(std::vector<ArrayHandle> arrays) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Delete(*session, std::move(arrays));
}

Future<StatusReport> InProcessSessionChannel::GetStatus() {
  return head_->GetStatus();
}

Future<std::string> InProcessSessionChannel::GetTrace() {
  return head_->GetTrace();
}

}  // namespace causeway::transport
