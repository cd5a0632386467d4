#include "causeway/transport/grpc_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/status.h"

namespace causeway::transport {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the ", what, " file '", path, "'"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int Milliseconds(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::StatusOr<uint32_t> ChooseProtocolVersion(const ProtocolVersions& ours,
                                               uint32_t peer_min,
                                               uint32_t peer_max) {
  const uint32_t low = std::max(peer_min, ours.min);
  const uint32_t high = std::min(peer_max, ours.max);
  if (peer_min > peer_max || low > high) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no common protocol version: the peer speaks ", peer_min, "..",
        peer_max, ", this build ", ours.min, "..", ours.max));
  }
  return high;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  CW_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "token"));
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file '", path, "' is empty"));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const GrpcSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  if (security.tls_cert_file.empty() || security.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  CW_ASSIGN_OR_RETURN(pair.cert_chain,
                      ReadFile(security.tls_cert_file, "TLS certificate"));
  CW_ASSIGN_OR_RETURN(pair.private_key,
                      ReadFile(security.tls_key_file, "TLS key"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!security.tls_ca_file.empty()) {
    // Mutual TLS: every client and worker presents a certificate signed by
    // this CA, or its TLS handshake fails before any call.
    CW_ASSIGN_OR_RETURN(options.pem_root_certs,
                        ReadFile(security.tls_ca_file, "TLS CA"));
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const GrpcSecurity& security) {
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!security.tls_ca_file.empty()) {
    CW_ASSIGN_OR_RETURN(options.pem_root_certs,
                        ReadFile(security.tls_ca_file, "TLS CA"));
  }
  if (!security.tls_cert_file.empty() || !security.tls_key_file.empty()) {
    if (security.tls_cert_file.empty() || security.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs its key, and a key its certificate");
    }
    CW_ASSIGN_OR_RETURN(options.pem_cert_chain,
                        ReadFile(security.tls_cert_file, "TLS certificate"));
    CW_ASSIGN_OR_RETURN(options.pem_private_key,
                        ReadFile(security.tls_key_file, "TLS key"));
  }
  return grpc::SslCredentials(options);
}

grpc::ChannelArguments MakeChannelArguments(const KeepaliveOptions& keepalive,
                                            const std::string& purpose) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(keepalive.time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(keepalive.timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Each channel its own connection: the control stream and bulk calls
  // never share a TCP connection (IFRT Proxy does the same).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("causeway.purpose", purpose);
  // Reconnect quickly after a head restart (the worker's own retry loop
  // bounds the total time).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

void StopServer(grpc::Server& server) {
  server.Shutdown(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
  server.Wait();
}

void ConfigureServerBuilder(const KeepaliveOptions& keepalive,
                            grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder->SetMaxSendMessageSize(kMaxMessageBytes);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                              Milliseconds(keepalive.time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                              Milliseconds(keepalive.timeout));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder->AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

void AddCredentials(const GrpcSecurity& security,
                    grpc::ClientContext* context) {
  if (!security.token.empty()) {
    context->AddMetadata(kProofMetadataKey,
                         MakeCallProof(security.token, absl::Now()));
  }
}

grpc::Status TokenCheck::Check(const grpc::ServerContextBase& context) const {
  if (!proofs_.needed()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kProofMetadataKey);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this head requires a token (--token-file): the call "
                        "carries no proof of it");
  }
  return ToGrpcStatus(proofs_.Check(
      absl::string_view(it->second.data(), it->second.size()), absl::Now()));
}

uint64_t RandomUint64() {
  static std::random_device device;
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

bool IsLoopbackHost(const std::string& host) {
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  if (bare == "localhost" || bare == "::1") return true;
  in_addr v4{};
  return inet_pton(AF_INET, bare.c_str(), &v4) == 1 &&
         (ntohl(v4.s_addr) >> 24) == 127;
}

absl::Status RefuseClearTextToRemoteHead(const std::string& target,
                                         const GrpcSecurity& security) {
  const std::string host = target.substr(0, target.rfind(':'));
  if (security.token.empty() || security.tls() || security.allow_clear_text ||
      IsLoopbackHost(host)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "refusing to talk to the head at ", target,
      " in clear text: it is not on loopback and this client has no TLS, so "
      "anyone on the network path could read the session's keys, programs "
      "and arrays (the token itself is only proven, never sent); give the "
      "head's certificate or CA (--tls-ca, tls_ca_file=...), or, to talk in "
      "clear anyway, --insecure (insecure=True; ConnectOptions::insecure) "
      "(docs/security.md)"));
}

}  // namespace causeway::transport
