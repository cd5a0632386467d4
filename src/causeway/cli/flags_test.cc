// The flags every connecting command shares: --keepalive-timeout sets both
// ends' keepalive (pings every half of it), within bounds.
#include "causeway/cli/flags.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::cli {
namespace flags_test {

using ::testing::HasSubstr;

absl::StatusOr<transport::KeepaliveOptions> Keepalive(
    const std::vector<std::string>& args) {
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(args, WithSecurityFlags({}));
  if (!parsed.ok()) return parsed.status();
  return KeepaliveFromFlags(*parsed);
}

TEST(KeepaliveFlagTest, DefaultsToTheTransportsAndScalesBothTimes) {
  absl::StatusOr<transport::KeepaliveOptions> defaults = Keepalive({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->time, transport::KeepaliveOptions().time);
  EXPECT_EQ(defaults->timeout, transport::KeepaliveOptions().timeout);
  absl::StatusOr<transport::KeepaliveOptions> long_one =
      Keepalive({"--keepalive-timeout", "20"});
  ASSERT_TRUE(long_one.ok()) << long_one.status();
  EXPECT_EQ(long_one->timeout, absl::Seconds(20));
  EXPECT_EQ(long_one->time, absl::Seconds(10));
}

TEST(KeepaliveFlagTest, AValueOutOfRangeIsRefusedNamingTheFlag) {
  for (const char* value : {"0.5", "7200", "soon"}) {
    absl::StatusOr<transport::KeepaliveOptions> refused =
        Keepalive({"--keepalive-timeout", value});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << value;
    EXPECT_THAT(refused.status().message(), HasSubstr("--keepalive-timeout"));
  }
}

}  // namespace flags_test
}  // namespace causeway::cli
