#include "causeway/client/connect.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/lock_order.h"
#include "causeway/base/status.h"
#include "causeway/transport/grpc_session_channel.h"

namespace causeway::client {

absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& head,
                                                ConnectOptions options) {
  SkipAbseilLockOrderGraph();
  transport::GrpcClientOptions grpc;
  grpc.security.token = options.token;
  if (!options.token_file.empty()) {
    if (!options.token.empty()) {
      return absl::InvalidArgumentError(
          "give the token or a token file, not both");
    }
    CW_ASSIGN_OR_RETURN(grpc.security.token,
                        transport::ReadTokenFile(options.token_file));
  }
  grpc.security.tls_ca_file = options.tls_ca_file;
  grpc.security.tls_cert_file = options.tls_cert_file;
  grpc.security.tls_key_file = options.tls_key_file;
  grpc.security.allow_clear_text = options.insecure;
  grpc.connect_timeout = options.connect_timeout;
  grpc.keepalive =
      transport::KeepaliveOptions::WithTimeout(options.keepalive_timeout);
  CW_ASSIGN_OR_RETURN(std::shared_ptr<transport::GrpcHeadConnection> connection,
                      transport::GrpcHeadConnection::Connect(head, grpc));
  CW_ASSIGN_OR_RETURN(
      transport::GrpcHeadConnection::ClusterStatus status,
      connection->GetClusterStatus(options.connect_timeout));
  return Client::Create(
      [connection]()
          -> absl::StatusOr<std::unique_ptr<transport::SessionChannel>> {
        return std::make_unique<transport::GrpcSessionChannel>(connection);
      },
      std::move(status.topology));
}

}  // namespace causeway::client
