// A client of the head's HTTP endpoint (`causeway top`, `causeway trace`)
// with the cluster's security flags (docs/security.md): HTTPS when a CA is
// given (the head's certificate is checked against it, and --tls-cert /
// --tls-key are presented to a head that requires client certificates),
// plain HTTP otherwise. The token is proven, never sent (HeadHttpHeaders).
#ifndef CAUSEWAY_CLI_HEAD_HTTP_CLIENT_H_
#define CAUSEWAY_CLI_HEAD_HTTP_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/cli/flags.h"
#include "causeway/transport/grpc_common.h"
#include "httplib.h"

namespace causeway::cli {

// InvalidArgument for a client certificate without its key (or the other
// way round).
absl::StatusOr<std::unique_ptr<httplib::Client>> MakeHeadHttpClient(
    const std::string& address, const transport::GrpcSecurity& security);

// The security flags of a command (SecurityFromFlags) into `security`, and
// a client of `address` made with them into `http`; the first error, if
// any, for the command's usage message.
absl::Status HeadHttpFromFlags(const ParsedFlags& flags,
                               const std::string& address,
                               transport::GrpcSecurity* security,
                               std::unique_ptr<httplib::Client>* http);

// The headers of one request: a fresh proof of the token, if any
// (`Authorization: Causeway-Proof ...`; the head accepts each proof once).
httplib::Headers HeadHttpHeaders(const transport::GrpcSecurity& security);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_HEAD_HTTP_CLIENT_H_
