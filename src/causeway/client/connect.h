// A Client for a cluster's head in another process (`causeway head`,
// `causeway cluster`), over gRPC: the same Client as ConnectLocal's, its
// sessions carried by transport::GrpcSessionChannel.
//
//   absl::StatusOr<std::unique_ptr<client::Client>> client =
//       client::Connect("127.0.0.1:7070", {.token_file = "token"});
#ifndef CAUSEWAY_CLIENT_CONNECT_H_
#define CAUSEWAY_CLIENT_CONNECT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/client/client.h"

namespace causeway::client {

struct ConnectOptions {
  // The cluster's token, or a file holding it (--token-file): a head with
  // a token refuses clients without it.
  std::string token;
  std::string token_file;
  // TLS: the certificate (or CA) the head's certificate is checked
  // against; a client certificate and key for mutual TLS.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // How long to wait for the head to answer.
  absl::Duration connect_timeout = absl::Seconds(10);
  // A connection to the head whose pings go unanswered this long is broken
  // (pings every half of it): `--keepalive-timeout` (docs/security.md).
  absl::Duration keepalive_timeout = absl::Seconds(2);
  // Talk in clear text to a head that is not on loopback, with no TLS.
  // Without it such a Connect fails FailedPrecondition, saying why (anyone
  // on the network path could read the session's keys and data).
  bool insecure = false;
};

// Dials `head` ("HOST:PORT") and checks that it speaks our protocol
// version. Unavailable (naming the address) when no head answers in time,
// UNAUTHENTICATED when it refuses the token, InvalidArgument for an
// unreadable token or TLS file. The client lists the cluster's devices as
// they were when it connected.
absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& head,
                                                ConnectOptions options = {});

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_CONNECT_H_
