#include "causeway/cli/head_http_client.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "causeway/transport/call_proof.h"

namespace causeway::cli {

absl::StatusOr<std::unique_ptr<httplib::Client>> MakeHeadHttpClient(
    const std::string& address, const transport::GrpcSecurity& security) {
  if (security.tls_cert_file.empty() != security.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key: give --tls-cert and --tls-key "
        "together");
  }
  if (security.tls_ca_file.empty()) {
    if (!security.tls_cert_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-cert without --tls-ca: give the CA that signed the head's "
          "certificate to speak HTTPS to it");
    }
    return std::make_unique<httplib::Client>("http://" + address);
  }
  auto client = std::make_unique<httplib::Client>(
      "https://" + address, security.tls_cert_file, security.tls_key_file);
  client->set_ca_cert_path(security.tls_ca_file.c_str());
  client->enable_server_certificate_verification(true);
  return client;
}

httplib::Headers HeadHttpHeaders(const transport::GrpcSecurity& security) {
  httplib::Headers headers;
  if (!security.token.empty()) {
    headers.emplace("Authorization",
                    "Causeway-Proof " +
                        transport::MakeCallProof(security.token, absl::Now()));
  }
  return headers;
}

absl::Status HeadHttpFromFlags(const ParsedFlags& flags,
                               const std::string& address,
                               transport::GrpcSecurity* security,
                               std::unique_ptr<httplib::Client>* http) {
  absl::StatusOr<transport::GrpcSecurity> read = SecurityFromFlags(flags);
  if (!read.ok()) return read.status();
  *security = *std::move(read);
  absl::StatusOr<std::unique_ptr<httplib::Client>> made =
      MakeHeadHttpClient(address, *security);
  if (!made.ok()) return made.status();
  *http = *std::move(made);
  return absl::OkStatus();
}

}  // namespace causeway::cli
