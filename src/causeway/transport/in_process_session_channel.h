// The in-process session channel: a client's connection to a head (its
// SessionService) in the same process. Each channel is one session: OpenSession
// creates it, CloseSession (or destroying the channel) ends it.
#ifndef CAUSEWAY_TRANSPORT_IN_PROCESS_SESSION_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_IN_PROCESS_SESSION_CHANNEL_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "causeway/transport/session_channel.h"

namespace causeway::transport {

// Thread-safe. Calls before OpenSession (or after CloseSession) fail with
// FailedPrecondition; the fire-and-forget calls are dropped then. `head`
// must outlive the channel.
class InProcessSessionChannel final : public SessionChannel {
 public:
  explicit InProcessSessionChannel(SessionService* head) : head_(head) {}
  ~InProcessSessionChannel() override;  // Closes the session if open.

  Future<SessionId> OpenSession(OpenSessionRequest request) override;
  Future<> CloseSession() override;
  Future<SliceInfo> RequestSlice(
      SliceRequest request) override;
  Future<SliceInfo> GetSlice(SliceHandle slice) override;
  Future<> ReleaseSlice(SliceHandle slice) override;
  Future<CompileInfo> Compile(
      CompileRequest request) override;
  Future<> PutArray(ArraySpec spec, hlo::Literal global) override;
  Future<> PutShards(ArraySpec spec, std::vector<hlo::Literal> shards) override;
  void Execute(ExecuteOp op) override;
  void Copy(CopyOp op) override;
  void Submit(ProgramGraph graph) override;
  Future<> ArrayReady(ArrayHandle array) override;
  Future<hlo::Literal> Fetch(ArrayHandle array) override;
  Future<std::vector<hlo::Literal>> FetchShards(ArrayHandle array) override;
  void Delete(std::vector<ArrayHandle> arrays) override;
  Future<StatusReport> GetStatus() override;
  Future<std::string> GetTrace() override;

 private:
  // The open session, or FailedPrecondition.
  absl::StatusOr<SessionId> Session() const;

  SessionService* const head_;
  mutable absl::Mutex mu_;
  std::optional<SessionId> session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_IN_PROCESS_SESSION_CHANNEL_H_
