// Which IFRT proxy protocol versions Causeway's proxy serves, and the
// GetVersion negotiation: the highest protocol version both sides speak,
// and independently the highest IFRT SerDes version.
//
// Causeway serves exactly the protocol versions jaxlib 0.10.2's client
// offers (it asks GetVersion(min 16, max 25), SerDes 0..3): what the proxy
// was written against and is tested with.
#ifndef CAUSEWAY_PROXY_VERSION_H_
#define CAUSEWAY_PROXY_VERSION_H_

#include "absl/status/statusor.h"
#include "causeway/proxy/proto/grpc_ifrt_service.pb.h"

namespace causeway::proxy {

struct VersionRange {
  int min = 0;
  int max = 0;
};
inline constexpr VersionRange kProtocolVersions{16, 25};
inline constexpr VersionRange kSerDesVersions{0, 3};

// The versions to speak; FailedPrecondition naming both ranges when the
// client's protocol (or SerDes) range and ours do not meet, or the
// client's range is empty.
absl::StatusOr<xla::ifrt::proxy::IfrtProxyVersion> NegotiateVersion(
    const xla::ifrt::proxy::GrpcGetVersionRequest& request);

// OK when a session's metadata names versions Causeway serves.
absl::Status CheckSessionVersion(const xla::ifrt::proxy::IfrtProxyVersion& version);

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_VERSION_H_
