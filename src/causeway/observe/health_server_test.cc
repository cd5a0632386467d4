// The worker's probe endpoint on loopback, through a real HTTP client.
#include "causeway/observe/health_server.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "httplib.h"

namespace causeway::observe {
namespace health_server_test {

TEST(HealthServerTest, LiveAtOnceAndReadyOnlyWhileSaidSo) {
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "registering with 10.0.0.1:8470");
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("http://" + (*server)->address());
  httplib::Result live = http.Get("/healthz");
  ASSERT_TRUE(live) << httplib::to_string(live.error());
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(live->body, "ok\n");
  httplib::Result ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_EQ(ready->body, "registering with 10.0.0.1:8470\n");
  (*server)->SetReady("ready: host 3 on island 1");
  ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(ready->body, "ready: host 3 on island 1\n");
  (*server)->SetNotReady("lost the head; registering again");
  ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  // Liveness does not follow readiness: the process still serves.
  live = http.Get("/healthz");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
}

TEST(HealthServerTest, OtherPathsAndMethodsGetClearErrors) {
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "starting");
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client http("http://" + (*server)->address());
  httplib::Result missing = http.Get("/metrics");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "no such endpoint '/metrics': see /healthz, /readyz\n");
  httplib::Result posted = http.Post("/healthz", "x", "text/plain");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 405);
}

TEST(HealthServerTest, AMalformedAddressIsRefused) {
  EXPECT_EQ(HealthServer::Start("no-port", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HealthServer::Start("127.0.0.1:70000", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace health_server_test
}  // namespace causeway::observe
