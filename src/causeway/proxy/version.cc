#include "causeway/proxy/version.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace causeway::proxy {
namespace {

absl::StatusOr<int> Choose(const char* what, VersionRange ours, int peer_min,
                           int peer_max) {
  const int low = std::max(peer_min, ours.min);
  const int high = std::min(peer_max, ours.max);
  if (peer_min > peer_max || low > high) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no common IFRT proxy ", what, " version: this client speaks ",
        peer_min, "..", peer_max, ", Causeway's proxy serves ", ours.min, "..",
        ours.max, " (jaxlib 0.10.2's client)"));
  }
  return high;
}

}  // namespace

absl::StatusOr<xla::ifrt::proxy::IfrtProxyVersion> NegotiateVersion(
    const xla::ifrt::proxy::GrpcGetVersionRequest& request) {
  absl::StatusOr<int> protocol =
      Choose("protocol", kProtocolVersions, request.min_version().protocol_version(),
             request.max_version().protocol_version());
  if (!protocol.ok()) return protocol.status();
  absl::StatusOr<int> serdes = Choose(
      "SerDes", kSerDesVersions, request.min_version().ifrt_serdes_version_number(),
      request.max_version().ifrt_serdes_version_number());
  if (!serdes.ok()) return serdes.status();
  xla::ifrt::proxy::IfrtProxyVersion version;
  version.set_protocol_version(*protocol);
  version.set_ifrt_serdes_version_number(*serdes);
  return version;
}

absl::Status CheckSessionVersion(const xla::ifrt::proxy::IfrtProxyVersion& version) {
  return Choose("protocol", kProtocolVersions, version.protocol_version(),
                version.protocol_version())
      .status();
}

}  // namespace causeway::proxy
