// The client's side of the session protocol (proto/session.proto) over
// gRPC: a SessionChannel to a head in another process.
//
// One channel is one session on one bidirectional Session stream, on
// gRPC's callback API: no thread of the channel's reads or writes it.
// Requests go out in the order they are made, each with the next op_id:
// the thread that sends starts the write when none is in progress, and a
// write's completion starts the next (StreamWriter; a run of
// queued deletes goes as one request). Execute, Copy, Submit and Delete are
// fire-and-forget (no answer, nothing waits for a round trip); answers come
// back in completion order, matched by op_id, on gRPC's threads, and the
// futures they resolve complete on a callback thread of the channel, never
// on gRPC's. A keepalive goes out every quarter of the head's lease (a gRPC
// alarm, no thread).
//
// Host bytes never ride the stream: PutArray starts an upload on its own
// call (PutHostBuffer, 1 MiB chunks, on the connection's bulk channel) and
// sends `put_array` naming it at once; Fetch asks the head for the value
// (`fetch`) and downloads it (GetHostBuffer) once the head holds it. A
// failed upload ends the session (fail-stop, as IFRT Proxy: the head would
// otherwise wait for bytes that never come).
//
// When the stream ends (the head closed it, died, or refused the session),
// every pending future fails with the reason and later calls fail (or are
// dropped) with it too.
//
// Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_SESSION_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_GRPC_SESSION_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_stream_writer.h"
#include "causeway/transport/proto/session.grpc.pb.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"
#include "causeway/transport/wire_convert.h"

namespace causeway::transport {

struct GrpcClientOptions {
  GrpcSecurity security;
  KeepaliveOptions keepalive;
  // How long connecting (the version handshake) may wait for the head.
  absl::Duration connect_timeout = absl::Seconds(10);
  WireLimits limits;
  // Bytes of one session's requests waiting to be written to the head (a
  // head that stops reading): past it the session ends RESOURCE_EXHAUSTED
  // naming this bound, instead of the client's memory growing.
  int64_t max_queued_request_bytes = int64_t{256} << 20;
};

// A client's connection to one head: the negotiated protocol version and
// the two gRPC channels (control: the Session streams; bulk: uploads and
// downloads). Shared by every session the client opens. Thread-safe.
class GrpcHeadConnection {
 public:
  // Dials `target` ("HOST:PORT") and negotiates the version. Unavailable
  // (naming the target) if the head does not answer within the connect
  // timeout; UNAUTHENTICATED if it refuses the token.
  static absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> Connect(
      const std::string& target, GrpcClientOptions options);

  const std::string& target() const { return target_; }
  uint32_t version() const { return version_; }
  const GrpcClientOptions& options() const { return options_; }
  wire::HeadSessions::Stub& control() { return *control_; }
  wire::HeadSessions::Stub& bulk() { return *bulk_; }

  // The cluster's status report and devices (GetClusterStatus), and its
  // trace if asked, within `timeout`. No session needed.
  struct ClusterStatus {
    StatusReport report;
    // Null when the head sent none.
    std::shared_ptr<const Topology> topology;
    std::string trace;  // Chrome trace-event JSON, with `include_trace`.
  };
  absl::StatusOr<ClusterStatus> GetClusterStatus(absl::Duration timeout,
                                                 bool include_trace = false);

 private:
  GrpcHeadConnection(std::string target, GrpcClientOptions options)
      : target_(std::move(target)), options_(std::move(options)) {}

  const std::string target_;
  const GrpcClientOptions options_;
  uint32_t version_ = 0;
  std::unique_ptr<wire::HeadSessions::Stub> control_;
  std::unique_ptr<wire::HeadSessions::Stub> bulk_;
};

class GrpcSessionChannel final : public SessionChannel {
 public:
  explicit GrpcSessionChannel(std::shared_ptr<GrpcHeadConnection> connection);
  // Closes the session if it is open (waiting a bounded time for the
  // head's answer), then ends the stream.
  ~GrpcSessionChannel() override;

  Future<SessionId> OpenSession(OpenSessionRequest request) override;
  Future<> CloseSession() override;
  Future<SliceInfo> RequestSlice(SliceRequest request) override;
  Future<SliceInfo> GetSlice(SliceHandle slice) override;
  Future<> ReleaseSlice(SliceHandle slice) override;
  Future<CompileInfo> Compile(CompileRequest request) override;
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
  // What an answer resolves: called once with the answer, or with the
  // error that ended the stream. Runs on `callbacks_`.
  using Pending =
      absl::AnyInvocable<void(const absl::StatusOr<wire::SessionResponse>&)>;

  // Why calls fail now: FailedPrecondition before OpenSession and after
  // CloseSession; the stream's end once it ended. OK while open.
  absl::Status UnusableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` with the next op_id; `pending` (if any) gets its
  // answer. Returns the op_id, or the reason it cannot be sent.
  absl::Status Send(wire::SessionRequest request, Pending pending);
  // A request whose answer resolves a Future<T> through `extract`.
  template <typename T, typename Extract>
  Future<T> Call(wire::SessionRequest request, Extract extract);

  // The session's stream (a ClientBidiReactor) and its keepalives.
  class Stream;
  class KeepAlive;

  // An answer came: it resolves its pending call, on `callbacks_`.
  void Answered(wire::SessionResponse response);
  // The call is over with `status`: the stream ends (EndStream).
  void StreamDone(const grpc::Status& status);
  // The stream is over (`why`): fail everything pending, refuse the rest.
  void EndStream(const absl::Status& why);
  // A failed upload (or requests the head does not take) ends the session
  // (fail-stop): `why` is what every op then fails with.
  // Returns why the session ends (`why`, or the earlier reason).
  absl::Status AbortSession(const absl::Status& why);

  void Upload(uint64_t host_buffer, hlo::Literal value);
  // What a failed upload or download says: UNAVAILABLE naming the head
  // when the call broke (the head is gone or unreachable), the head's own
  // code when it refused; "`what`: <gRPC's message>`then`".
  absl::Status TransferError(const grpc::Status& status, absl::string_view what,
                             absl::string_view then) const;
  // Reserves `n` consecutive host-buffer ids; the first, or why not.
  absl::StatusOr<uint64_t> ReserveHostBuffers(uint64_t n);
  void Download(uint64_t host_buffer, Promise<hlo::Literal> promise);

  const std::shared_ptr<GrpcHeadConnection> connection_;
  // Completes futures: user continuations never run on gRPC's threads.
  std::unique_ptr<ThreadPool> callbacks_;
  // Uploads, downloads and status calls without a session (each a
  // blocking call).
  std::unique_ptr<ThreadPool> transfers_;

  mutable absl::Mutex mu_;
  enum class State { kNew, kOpen, kClosed, kEnded };
  State state_ ABSL_GUARDED_BY(mu_) = State::kNew;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  SessionId session_ ABSL_GUARDED_BY(mu_);
  std::string key_ ABSL_GUARDED_BY(mu_);
  uint64_t next_op_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_host_buffer_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  // Bulk calls in progress, cancelled when the channel goes.
  std::set<grpc::ClientContext*> transfer_contexts_ ABSL_GUARDED_BY(mu_);
  // Set when an upload failed: the session is ending because of it.
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);

  // Serializes sends, so that op ids go out in order. Taken before mu_;
  // never by gRPC's reactions (a write may complete, and its reaction run,
  // inside the StartWrite that a send makes).
  absl::Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  grpc::ClientContext context_;
  // Set once by OpenSession (then read without mu_); done before the
  // channel goes.
  std::unique_ptr<Stream> stream_;
  std::shared_ptr<StreamWriter<wire::SessionRequest>> writer_;
  std::unique_ptr<KeepAlive> keep_alive_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_SESSION_CHANNEL_H_
