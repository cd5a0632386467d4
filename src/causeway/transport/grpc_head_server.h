// The head's gRPC server: one listening address serving clients (the
// session protocol, GrpcSessionServer) and workers (the worker protocol,
// GrpcWorkerServer), with TLS, the token check and keepalive configured as
// docs/distributed.md says. It knows the head only through the transport
// interfaces (SessionService, and the worker server's hooks).
//
// Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_HEAD_SERVER_H_
#define CAUSEWAY_TRANSPORT_GRPC_HEAD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_control_channel.h"
#include "causeway/transport/grpc_session_server.h"
#include "causeway/transport/session_channel.h"

namespace causeway::transport {

struct GrpcHeadServerOptions {
  // HOST:PORT; port 0 picks a free port (address() says which).
  std::string listen = "127.0.0.1:0";
  GrpcSecurity security;
  KeepaliveOptions keepalive;
  GrpcSessionServerOptions sessions;
  GrpcWorkerServerOptions workers;
};

class GrpcHeadServer {
 public:
  // Listens and serves clients through `sessions` and workers through
  // `workers` (either may be null: not served); both must outlive the
  // server.
  // InvalidArgument for unreadable TLS files, Unavailable if the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<GrpcHeadServer>> Start(
      SessionService* sessions, WorkerMembership* workers,
      GrpcHeadServerOptions options);
  ~GrpcHeadServer();  // Shutdown().

  // "HOST:PORT" it listens on, the port resolved.
  const std::string& address() const { return address_; }
  // Null when the server serves no sessions / no workers.
  GrpcSessionServer* session_server() { return session_server_.get(); }
  GrpcWorkerServer* worker_server() { return worker_server_.get(); }

  // Ends every stream and stops serving; waits for the handlers to return.
  // Idempotent.
  void Shutdown();

 private:
  GrpcHeadServer() = default;

  std::string address_;
  std::unique_ptr<TokenCheck> auth_;
  std::unique_ptr<GrpcSessionServer> session_server_;
  std::unique_ptr<GrpcWorkerServer> worker_server_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_HEAD_SERVER_H_
