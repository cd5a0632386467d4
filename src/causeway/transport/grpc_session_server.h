// The head's side of the session protocol (proto/session.proto) over gRPC:
// serves each client's Session stream, uploads and downloads, and cluster
// status, by calling the head's SessionService. It never sees the head's
// types: transport code depends on the interface only.
//
// One Session stream is one session, on gRPC's callback API: its requests
// are read one at a time, on gRPC's threads, and handed to the
// SessionService, whose answers go out in completion order (matched by
// op_id) through a StreamWriter, written by whichever thread
// answers. No thread waits for a client: none per session reads, writes or
// waits. A request that may take a while to hand over (a compile, which
// parses the program; a `put_array` or `put_shards`, which waits for its
// bytes on PutHostBuffer, bounded by `upload_timeout`, then places them;
// `close`) runs on the server's own threads, and the next read starts only
// once the head has it: the head sees the session's requests in stream
// order. A failed or missing upload ends the session, as in IFRT Proxy.
//
// The session ends when the client closes it, when its stream breaks
// (cancelled, the connection dropped: at once), or when the head expires
// its lease; then it is closed on the head and everything it held is
// released. A malformed request fails that request (InvalidArgument naming
// the field, in its answer) or, if it cannot even be answered (no op_id,
// a second `open`), the session; the server goes on serving everyone else.
//
// Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_SESSION_SERVER_H_
#define CAUSEWAY_TRANSPORT_GRPC_SESSION_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/base/rate_limiter.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/proto/session.grpc.pb.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"
#include "causeway/transport/wire_convert.h"

namespace causeway::transport {

struct GrpcSessionServerOptions {
  WireLimits limits;
  // How long a `put_array` or `put_shards` waits for its bytes before the
  // session ends.
  absl::Duration upload_timeout = absl::Seconds(60);
  // Bytes of uploads a session may have received and not yet handed to
  // the head, and of downloads waiting to be fetched.
  int64_t max_host_buffer_bytes_per_session = int64_t{32} << 30;
  // The same, for all sessions together.
  int64_t max_host_buffer_bytes = int64_t{64} << 30;
  // Sessions opened per second, for all clients together (a token bucket
  // of `session_open_burst`): a client opening and closing sessions in a
  // loop cannot take the head's time from the others. Over it, `open`
  // fails RESOURCE_EXHAUSTED naming the limit.
  double max_session_opens_per_second = 1000;
  double session_open_burst = 1000;
  // Requests per second within one session (a token bucket of
  // `session_request_burst`; keepalives are not counted): a client that
  // floods its session cannot take the head's time from the others. Over
  // it the session ends RESOURCE_EXHAUSTED naming the limit (most requests
  // are fire-and-forget: there is no answer to carry the refusal).
  double max_requests_per_second_per_session = 200000;
  double session_request_burst = 200000;
  // Bytes of one session's answers waiting to be written: a client that
  // does not read them loses its session past this.
  int64_t max_answer_bytes_per_session = int64_t{64} << 20;
  // The cluster's topology, for GetClusterStatus (clients list its
  // devices). Null: none is sent.
  std::function<std::shared_ptr<const Topology>()> topology;
  // Announced to clients so that they send keepalives well within it.
  absl::Duration lease = absl::Seconds(10);
};

class GrpcSessionServer final
    : public wire::HeadSessions::WithCallbackMethod_Session<
          wire::HeadSessions::Service> {
 public:
  // `service` and `auth` must outlive the server.
  GrpcSessionServer(SessionService* service, const TokenCheck* auth,
                    GrpcSessionServerOptions options);
  ~GrpcSessionServer() override;

  // Ends every session's stream (their calls are cancelled, so their
  // handlers return) and refuses new ones. Idempotent.
  void Shutdown();

  int64_t num_sessions() const;

  grpc::Status GetVersion(grpc::ServerContext* context,
                          const wire::VersionRequest* request,
                          wire::VersionResponse* response) override;
  grpc::ServerBidiReactor<wire::SessionRequest, wire::SessionResponse>*
  Session(grpc::CallbackServerContext* context) override;
  grpc::Status PutHostBuffer(grpc::ServerContext* context,
                             grpc::ServerReader<wire::HostBufferPut>* reader,
                             wire::HostBufferPutResponse* response) override;
  grpc::Status GetHostBuffer(
      grpc::ServerContext* context, const wire::HostBufferGet* request,
      grpc::ServerWriter<wire::HostBufferData>* writer) override;
  grpc::Status GetClusterStatus(
      grpc::ServerContext* context, const wire::ClusterStatusRequest* request,
      wire::ClusterStatusResponse* response) override;

 private:
  class HostBufferBudget;
  class HostBuffers;
  class SessionStream;
  struct SessionState;

  // What a session's stream does once a request was handed to the head:
  // reads the next (`go_on`), or ends the session, with `error`, or closed
  // by its client when `error` is OK. Called once.
  using Then = absl::AnyInvocable<void(bool go_on, absl::Status error)>;

  // The open session `id` whose key is `key`; NotFound for anything else
  // (an unknown id and a wrong key read the same), Unavailable once the
  // server is shut down.
  absl::StatusOr<std::shared_ptr<SessionState>> FindSession(
      int64_t id, const std::string& key) const;
  // Ends session `id` whose answers overflowed (its client reads none):
  // cancels its call. Any thread.
  void EndUnreadSession(SessionId id);
  // Handles one request after `open`, then `then`: at once on this thread,
  // or (compile, close, put_array, put_shards) later on `slow_`.
  void HandleRequest(const std::shared_ptr<SessionState>& session,
                     const wire::SessionRequest& request, Then then);
  // The requests handed to the head at once. False ends the session (the
  // client closed it, or it cannot go on).
  bool HandleAtOnce(const std::shared_ptr<SessionState>& session,
                    const wire::SessionRequest& request,
                    absl::Status* session_error);
  void HandlePutArray(const std::shared_ptr<SessionState>& session,
                      uint64_t op_id, const wire::PutArray& request, Then then);
  void HandlePutShards(const std::shared_ptr<SessionState>& session,
                       uint64_t op_id, const wire::PutShards& request,
                       Then then);

  SessionService* const service_;
  const TokenCheck* const auth_;
  const GrpcSessionServerOptions options_;
  const std::shared_ptr<HostBufferBudget> host_buffer_budget_;
  RateLimiter session_opens_;

  mutable absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<SessionState>> sessions_
      ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Where requests that take a while are handed to the head, and sessions
  // are ended: never on gRPC's threads. Last: stopped first.
  ThreadPool slow_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_SESSION_SERVER_H_
