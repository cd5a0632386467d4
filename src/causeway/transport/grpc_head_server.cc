#include "causeway/transport/grpc_head_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::transport {

absl::StatusOr<std::unique_ptr<GrpcHeadServer>> GrpcHeadServer::Start(
    SessionService* sessions, WorkerMembership* workers,
    GrpcHeadServerOptions options) {
  CW_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      MakeServerCredentials(options.security));
  std::unique_ptr<GrpcHeadServer> server(new GrpcHeadServer());
  server->auth_ = std::make_unique<TokenCheck>(options.security.token);
  if (sessions != nullptr) {
    server->session_server_ = std::make_unique<GrpcSessionServer>(
        sessions, server->auth_.get(), std::move(options.sessions));
  }
  if (workers != nullptr) {
    server->worker_server_ = std::make_unique<GrpcWorkerServer>(
        workers, server->auth_.get(), std::move(options.workers));
  }

  const size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the listening address '", options.listen, "' is not HOST:PORT"));
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, credentials, &port);
  ConfigureServerBuilder(options.keepalive, &builder);
  if (server->session_server_ != nullptr) {
    builder.RegisterService(server->session_server_.get());
  }
  if (server->worker_server_ != nullptr) {
    builder.RegisterService(server->worker_server_.get());
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  server->address_ = absl::StrCat(options.listen.substr(0, colon), ":", port);
  return server;
}

GrpcHeadServer::~GrpcHeadServer() { Shutdown(); }

void GrpcHeadServer::Shutdown() {
  if (server_ == nullptr) return;
  // Streams first (their handlers return), then the server.
  if (session_server_ != nullptr) session_server_->Shutdown();
  if (worker_server_ != nullptr) worker_server_->Shutdown();
  StopServer(*server_);
  server_.reset();
}

}  // namespace causeway::transport
