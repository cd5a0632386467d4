#include "causeway/runtime/in_process_session_channel.h"

#include <utility>

namespace causeway::runtime {

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
    transport::OpenSessionRequest request) {
  absl::MutexLock lock(&mu_);
  if (session_.has_value()) {
    return MakeErrorFuture<SessionId>(absl::FailedPreconditionError(
        "this channel already has an open session; open another channel "
        "for another session"));
  }
  session_ = head_->OpenSession(request);
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

Future<transport::SliceInfo> InProcessSessionChannel::RequestSlice(
    transport::SliceRequest request) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<transport::SliceInfo>(session.status());
  }
  return head_->RequestSlice(*session, std::move(request));
}

Future<transport::SliceInfo> InProcessSessionChannel::GetSlice(
    SliceHandle slice) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<transport::SliceInfo>(session.status());
  }
  return head_->GetSlice(*session, slice);
}

Future<> InProcessSessionChannel::ReleaseSlice(SliceHandle slice) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->ReleaseSlice(*session, slice);
}

Future<transport::CompileInfo> InProcessSessionChannel::Compile(
    transport::CompileRequest request) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(session.status());
  }
  return head_->Compile(*session, std::move(request));
}

Future<> InProcessSessionChannel::PutArray(transport::ArraySpec spec,
                                           hlo::Literal global) {
  absl::StatusOr<SessionId> session = Session();
  if (!session.ok()) return MakeErrorFuture(session.status());
  return head_->PutArray(*session, std::move(spec), std::move(global));
}

void InProcessSessionChannel::Execute(transport::ExecuteOp op) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Execute(*session, std::move(op));
}

void InProcessSessionChannel::Copy(transport::CopyOp op) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Copy(*session, std::move(op));
}

void InProcessSessionChannel::Submit(transport::ProgramGraph graph) {
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

void InProcessSessionChannel::Delete(std::vector<ArrayHandle> arrays) {
  absl::StatusOr<SessionId> session = Session();
  if (session.ok()) head_->Delete(*session, std::move(arrays));
}

Future<transport::StatusReport> InProcessSessionChannel::GetStatus() {
  return head_->GetStatus();
}

Future<std::string> InProcessSessionChannel::GetTrace() {
  return head_->GetTrace();
}

}  // namespace causeway::runtime
