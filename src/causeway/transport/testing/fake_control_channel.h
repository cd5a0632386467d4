// A fake control channel for tests of the head's parts: it records every
// call and answers from a script. No worker behind it.
#ifndef CAUSEWAY_TRANSPORT_TESTING_FAKE_CONTROL_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_TESTING_FAKE_CONTROL_CHANNEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/transport/control_channel.h"

namespace causeway::transport {

// Thread-safe.
class FakeControlChannel final : public ControlChannel {
 public:
  // How Heartbeat answers.
  enum class Heartbeats { kAnswer, kFail, kHang };

  // Every call so far, one line each: "Dispatch", "LoadProgram 3",
  // "PutBuffer array 4 shard 0", "PeerLost 2", "CancelSession 1",
  // "Heartbeat", "GetStatus", ...
  std::vector<std::string> calls() const;
  // Waits up to `timeout` for `call` to be among them `times` times (calls
  // the head makes through its outbox may come from another thread, after
  // the head's entry point returned). Whether they came.
  bool AwaitCall(const std::string& call, absl::Duration timeout,
                 int times = 1) const;
  // The batches Dispatch was given, in order.
  std::vector<WorkerBatch> batches() const;
  // The membership updates it was sent, in order.
  std::vector<MembershipUpdate> memberships() const;
  void set_heartbeats(Heartbeats heartbeats);
  // Releases the heartbeats held by kHang with `status`.
  void ReleaseHeldHeartbeats(absl::Status status);
  // What FetchBuffer answers (default: Unimplemented).
  void set_fetch_result(absl::StatusOr<hlo::Literal> result);
  // Runs inside every call, on the caller's thread, after it is recorded
  // (a test can check there what the caller still holds).
  void set_on_call(std::function<void(const std::string& call)> on_call);

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
  void Record(std::string call) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerBatch> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<MembershipUpdate> memberships_ ABSL_GUARDED_BY(mu_);
  Heartbeats heartbeats_ ABSL_GUARDED_BY(mu_) = Heartbeats::kAnswer;
  std::vector<Promise<>> held_ ABSL_GUARDED_BY(mu_);
  absl::StatusOr<hlo::Literal> fetch_ ABSL_GUARDED_BY(mu_) =
      absl::UnimplementedError("the fake has no data");
  std::function<void(const std::string&)> on_call_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_TESTING_FAKE_CONTROL_CHANNEL_H_
