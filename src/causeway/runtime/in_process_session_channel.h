// The in-process session channel: a client's connection to a Head in the
// same process. Each channel is one session: OpenSession creates it,
// CloseSession (or destroying the channel) ends it.
#ifndef CAUSEWAY_RUNTIME_IN_PROCESS_SESSION_CHANNEL_H_
#define CAUSEWAY_RUNTIME_IN_PROCESS_SESSION_CHANNEL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/runtime/head.h"
#include "causeway/transport/session_channel.h"

namespace causeway::runtime {

// Thread-safe. Calls before OpenSession (or after CloseSession) fail with
// FailedPrecondition; the fire-and-forget calls are dropped then. `head`
// must outlive the channel.
class InProcessSessionChannel final : public transport::SessionChannel {
 public:
  explicit InProcessSessionChannel(Head* head) : head_(head) {}
  ~InProcessSessionChannel() override;  // Closes the session if open.

  Future<SessionId> OpenSession(transport::OpenSessionRequest request) override;
  Future<> CloseSession() override;
  Future<transport::SliceInfo> RequestSlice(
      transport::SliceRequest request) override;
  Future<transport::SliceInfo> GetSlice(SliceHandle slice) override;
  Future<> ReleaseSlice(SliceHandle slice) override;
  Future<transport::CompileInfo> Compile(
      transport::CompileRequest request) override;
  Future<> PutArray(transport::ArraySpec spec, hlo::Literal global) override;
  void Execute(transport::ExecuteOp op) override;
  void Copy(transport::CopyOp op) override;
  void Submit(transport::ProgramGraph graph) override;
  Future<> ArrayReady(ArrayHandle array) override;
  Future<hlo::Literal> Fetch(ArrayHandle array) override;
  void Delete(std::vector<ArrayHandle> arrays) override;
  Future<transport::StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

 private:
  // The open session, or FailedPrecondition.
  absl::StatusOr<SessionId> Session() const;

  Head* const head_;
  mutable absl::Mutex mu_;
  std::optional<SessionId> session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::runtime

#endif  // CAUSEWAY_RUNTIME_IN_PROCESS_SESSION_CHANNEL_H_
