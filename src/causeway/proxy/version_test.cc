#include "causeway/proxy/version.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::proxy {
namespace version_test {

using ::testing::HasSubstr;
namespace pb = xla::ifrt::proxy;

pb::GrpcGetVersionRequest Offer(int min, int max, int serdes_min, int serdes_max) {
  pb::GrpcGetVersionRequest request;
  request.mutable_min_version()->set_protocol_version(min);
  request.mutable_min_version()->set_ifrt_serdes_version_number(serdes_min);
  request.mutable_max_version()->set_protocol_version(max);
  request.mutable_max_version()->set_ifrt_serdes_version_number(serdes_max);
  return request;
}

TEST(VersionTest, Jaxlib0102ClientGetsItsHighestVersions) {
  // What jaxlib 0.10.2's client sends: min {16}, max {25, serdes 3}.
  absl::StatusOr<pb::IfrtProxyVersion> version = NegotiateVersion(Offer(16, 25, 0, 3));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->protocol_version(), 25);
  EXPECT_EQ(version->ifrt_serdes_version_number(), 3);
}

TEST(VersionTest, NewerClientMeetsUsAtOurHighest) {
  absl::StatusOr<pb::IfrtProxyVersion> version = NegotiateVersion(Offer(20, 40, 0, 9));
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(version->protocol_version(), 25);
  EXPECT_EQ(version->ifrt_serdes_version_number(), 3);
}

TEST(VersionTest, ClientOutsideOurRangeIsRefusedNamingBothRanges) {
  absl::StatusOr<pb::IfrtProxyVersion> version = NegotiateVersion(Offer(26, 30, 0, 3));
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(version.status().message(), HasSubstr("26..30"));
  EXPECT_THAT(version.status().message(), HasSubstr("16..25"));
}

TEST(VersionTest, OlderClientIsRefused) {
  EXPECT_FALSE(NegotiateVersion(Offer(3, 15, 0, 3)).ok());
}

TEST(VersionTest, EmptyClientRangeIsRefused) {
  EXPECT_FALSE(NegotiateVersion(Offer(25, 16, 0, 3)).ok());
}

TEST(VersionTest, SessionMetadataOutsideOurRangeIsRefused) {
  pb::IfrtProxyVersion version;
  version.set_protocol_version(25);
  EXPECT_TRUE(CheckSessionVersion(version).ok());
  version.set_protocol_version(12);
  EXPECT_FALSE(CheckSessionVersion(version).ok());
}

}  // namespace version_test
}  // namespace causeway::proxy
