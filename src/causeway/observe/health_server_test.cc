// The worker's probe endpoint on loopback, through a real HTTP client.
#include "causeway/observe/health_server.h"

#include <memory>
#include <string>
#include <vector>

#include "causeway/observe/raw_connection_test_util.h"
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

// The kubelet's probes are answered while connections that send nothing,
// and more half requests than the port has threads, are open (it once had
// one thread: a single idle connection held the probes for 5 s).
TEST(HealthServerTest, IdleConnectionsAndSlowSendersDoNotStallTheProbes) {
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "starting");
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<testing::RawConnection>> flood;
  for (int i = 0; i < 100; ++i) {
    flood.push_back(
        std::make_unique<testing::RawConnection>((*server)->address(), ""));
  }
  for (int i = 0; i < 20; ++i) {
    flood.push_back(std::make_unique<testing::RawConnection>(
        (*server)->address(), "GET /healthz HTTP/1.1\r\nHost: x"));
    ASSERT_TRUE(flood.back()->sent()) << i;
  }
  httplib::Client http("http://" + (*server)->address());
  http.set_read_timeout(10, 0);
  httplib::Result live = http.Get("/healthz");
  ASSERT_TRUE(live) << httplib::to_string(live.error());
  EXPECT_EQ(live->status, 200);
}

TEST(HealthServerTest, AMalformedAddressIsRefused) {
  EXPECT_EQ(HealthServer::Start("no-port", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HealthServer::Start("127.0.0.1:70000", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace health_server_test
}  // namespace causeway::observe
