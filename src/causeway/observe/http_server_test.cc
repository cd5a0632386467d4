// The head's HTTP endpoint against a real embedded cluster (LocalCluster:
// the same head and workers as the processes, in this one) and a real
// HTTP client on loopback.
#include "causeway/observe/http_server.h"

#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "causeway/client/client.h"
#include "causeway/client/local_client.h"
#include "causeway/client/test_programs.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/observe/cluster_observer.h"
#include "causeway/observe/metrics_sink.h"
#include "causeway/observe/prometheus_parser_test_util.h"
#include "causeway/observe/raw_connection_test_util.h"
#include "causeway/observe/top_view.h"
#include "causeway/transport/call_proof.h"
#include "causeway/transport/testing/certificates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace causeway::observe {
namespace http_server_test {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::RawConnection;

constexpr char kToken[] = "s3cret-token-for-the-test";
constexpr absl::Duration kWait = absl::Seconds(30);

class HttpServerTest : public ::testing::Test {
 protected:
  // A cluster of one island, two hosts of two devices, and its endpoint
  // (HTTPS with a certificate: mutual TLS with a CA too).
  struct Tls {
    std::string cert, key, ca;
  };
  void Start(const std::string& token = "", const Tls& tls = {"", "", ""},
             bool accept_bearer_in_clear_text = false) {
    metrics_ = std::make_shared<MetricsSink>();
    absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
        cluster::LocalCluster::Create({.islands = 1,
                                       .hosts_per_island = 2,
                                       .devices_per_host = 2,
                                       .memory_per_device = 64 << 20,
                                       .event_sink = metrics_});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    observer_ = std::make_unique<ClusterObserver>(
        &cluster_->head(), metrics_.get(), ClusterObserver::Options());
    // Rounds are taken by the test (RefreshNow), not by a thread.
    observer_->RefreshNow();
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
        {.listen = "127.0.0.1:0",
         .token = token,
         .accept_bearer_in_clear_text = accept_bearer_in_clear_text,
         .tls_cert_file = tls.cert,
         .tls_key_file = tls.key,
         .tls_ca_file = tls.ca,
         .observer = observer_.get(),
         .trace = nullptr});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    if (tls.cert.empty()) {
      http_ = std::make_unique<httplib::Client>("http://" + server_->address());
    }
  }

  // With a fresh proof of `token`, if any (as the page, top and trace
  // send it).
  httplib::Result Get(const std::string& path, const std::string& token = "") {
    return GetAuthorized(
        path, token.empty() ? "" : "Causeway-Proof " + Proof(token));
  }
  httplib::Result GetAuthorized(const std::string& path,
                                const std::string& authorization) {
    httplib::Headers headers;
    if (!authorization.empty()) headers.emplace("Authorization", authorization);
    return http_->Get(path.c_str(), headers);
  }
  // /metrics with `authorization` is answered 401, naming `why`.
  void ExpectRefused(const std::string& authorization, const std::string& why) {
    httplib::Result answer = GetAuthorized("/metrics", authorization);
    ASSERT_TRUE(answer) << httplib::to_string(answer.error());
    EXPECT_EQ(answer->status, 401) << authorization;
    EXPECT_THAT(answer->body, HasSubstr(why)) << authorization;
  }
  static std::string Proof(const std::string& token,
                           absl::Time when = absl::Now()) {
    return transport::MakeCallProof(token, when);
  }

  json Status(const std::string& token = "") {
    observer_->RefreshNow();
    httplib::Result result = Get("/api/status", token);
    CW_CHECK(result) << httplib::to_string(result.error());
    CW_CHECK(result->status == 200) << result->status << " " << result->body;
    return json::parse(result->body);
  }

  testing::PrometheusText Metrics() {
    observer_->RefreshNow();
    httplib::Result result = Get("/metrics");
    CW_CHECK(result) << httplib::to_string(result.error());
    CW_CHECK(result->status == 200) << result->status << " " << result->body;
    absl::StatusOr<testing::PrometheusText> parsed =
        testing::ParsePrometheusText(result->body, "causeway_");
    CW_CHECK(parsed.ok()) << parsed.status() << "\n" << result->body;
    return *std::move(parsed);
  }

  // y = 2x on a fresh 2-device slice of a session named "job".
  void RunTimesTwo() {
    std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster_);
    absl::StatusOr<client::Session> session =
        client->OpenSession({.name = "job"});
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<client::Slice> slice = session->CreateSlice(2);
    ASSERT_TRUE(slice.ok()) << slice.status();
    absl::StatusOr<client::Executable> program = session->Compile(
        client::testing::ElementwiseProgram("times_two", "multiply", 2, 2),
        *slice);
    ASSERT_TRUE(program.ok()) << program.status();
    absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
    ASSERT_TRUE(tiled.ok());
    absl::StatusOr<client::Array> x = session->FromHost(
        hlo::testutil::F32({2}, {1.5, -4}), *slice, *tiled);
    ASSERT_TRUE(x.ok()) << x.status();
    absl::StatusOr<std::vector<client::Array>> y = program->Execute({*x});
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<hlo::Literal> value = (*y)[0].ToHost().AwaitFor(kWait);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_THAT(hlo::testutil::Values(*value), ::testing::ElementsAre(3, -8));
  }

  std::shared_ptr<MetricsSink> metrics_;
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::unique_ptr<ClusterObserver> observer_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> http_;
};

TEST_F(HttpServerTest, TheStatusListsEveryIslandHostAndDevice) {
  Start();
  const json status = Status();
  EXPECT_EQ(status["schema"], 1);
  EXPECT_EQ(status["summary"]["devices"], 4);
  EXPECT_EQ(status["summary"]["hosts_alive"], 2);
  ASSERT_EQ(status["islands"].size(), 1u);
  EXPECT_EQ(status["islands"][0]["hosts"], json::array({0, 1}));
  ASSERT_EQ(status["devices"].size(), 4u);
  for (const json& device : status["devices"]) {
    // In no slice, nothing queued: spare, with its memory budget.
    EXPECT_EQ(device["state"], "spare") << device.dump();
    EXPECT_EQ(device["memory"]["budget_bytes"], 64 << 20);
    EXPECT_EQ(device["memory"]["used_bytes"], 0);
    EXPECT_EQ(device["queue_length"], 0);
  }
}

TEST_F(HttpServerTest, AStoppedHostShowsDeadWithItsReasonAndItsDevicesDead) {
  Start();
  ASSERT_TRUE(cluster_->StopHost(HostId(1)).ok());
  const json status = Status();
  const json& host = status["hosts"][1];
  EXPECT_EQ(host["state"], "dead");
  ASSERT_TRUE(host["death"].is_object()) << host.dump();
  EXPECT_THAT(host["death"]["reason"].get<std::string>(),
              HasSubstr("connection broke"));
  EXPECT_EQ(status["devices"][2]["state"], "dead");
  EXPECT_EQ(status["devices"][3]["state"], "dead");
  EXPECT_EQ(status["devices"][0]["state"], "spare");
  ASSERT_EQ(status["deaths"].size(), 1u);
  EXPECT_EQ(status["deaths"][0]["host"], 1);
  EXPECT_EQ(status["deaths"][0]["reason_label"], "connection");
  EXPECT_EQ(Metrics().Value("causeway_host_deaths_total",
                            {{"reason", "connection"}}),
            1);
}

TEST_F(HttpServerTest, MetricsParseAsPrometheusTextAndCountTheLaunches) {
  Start();
  const testing::PrometheusText before = Metrics();
  EXPECT_EQ(before.types.at("causeway_dispatch_latency_seconds"), "histogram");
  EXPECT_EQ(before.types.at("causeway_launches_total"), "counter");
  EXPECT_EQ(before.Value("causeway_launches_total", {{"island", "0"}}), 0);
  EXPECT_EQ(before.Count("causeway_device_memory_budget_bytes"), 4u);
  EXPECT_EQ(before.Value("causeway_sessions"), 0);
  RunTimesTwo();
  // A device reports its op to the metrics after the op's value is ready,
  // so a fetch may return before the last report is in: wait for it.
  testing::PrometheusText after = Metrics();
  const absl::Time deadline = absl::Now() + kWait;
  while ((after.Value("causeway_op_duration_seconds_count") < 2 ||
          after.Value("causeway_device_ops_total", {{"code", "OK"}}) < 2) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
    after = Metrics();
  }
  EXPECT_EQ(after.Value("causeway_launches_total", {{"island", "0"}}), 1);
  // One op per device of the launch, each dispatched and run.
  EXPECT_EQ(after.Value("causeway_dispatch_latency_seconds_count"), 2);
  EXPECT_EQ(after.Value("causeway_device_ops_total", {{"code", "OK"}}), 2);
  EXPECT_EQ(after.Value("causeway_op_duration_seconds_count"), 2);
  EXPECT_EQ(after.Count("causeway_host_heartbeat_age_seconds"), 2u);
}

// Each partition's value summed over both: one all-reduce per device.
constexpr char kAllReduce[] = R"(HloModule psum, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  ROOT r = f32[1] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add, sharding={devices=[2]<=[2]}
}
)";

TEST_F(HttpServerTest, TheTimeInCollectivesIsCountedPerDeviceAndPerOp) {
  Start();
  const testing::PrometheusText before = Metrics();
  EXPECT_EQ(before.types.at("causeway_op_collective_seconds"), "histogram");
  EXPECT_EQ(before.types.at("causeway_device_collective_seconds_total"),
            "counter");
  EXPECT_EQ(before.Value("causeway_collectives_total"), 0);
  EXPECT_EQ(before.Count("causeway_device_collective_seconds_total"), 4u);
  // A program without collectives is not counted.
  RunTimesTwo();
  std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster_);
  absl::StatusOr<client::Session> session = client->OpenSession({.name = "ar"});
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<client::Slice> slice = session->CreateSlice(2);
  ASSERT_TRUE(slice.ok()) << slice.status();
  absl::StatusOr<transport::SliceInfo> granted = slice->Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  absl::StatusOr<client::Executable> program =
      session->Compile(kAllReduce, *slice);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
  ASSERT_TRUE(tiled.ok());
  absl::StatusOr<client::Array> x =
      session->FromHost(hlo::testutil::F32({2}, {1.5, -4}), *slice, *tiled);
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<std::vector<client::Array>> y = program->Execute({*x});
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<hlo::Literal> value = (*y)[0].ToHost().AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(hlo::testutil::Values(*value),
              ::testing::ElementsAre(-2.5, -2.5));
  // An op reports after its outputs are ready: wait for both reports.
  const absl::Time deadline = absl::Now() + kWait;
  testing::PrometheusText after = Metrics();
  while (after.Value("causeway_device_ops_total", {{"code", "OK"}}) < 4) {
    ASSERT_LT(absl::Now(), deadline) << "the ops did not report";
    after = Metrics();
  }
  EXPECT_EQ(after.Value("causeway_collectives_total"), 2);
  EXPECT_EQ(after.Value("causeway_op_collective_seconds_count"), 2);
  EXPECT_GT(after.Value("causeway_op_collective_seconds_sum"), 0);
  double per_device = 0;
  int devices_in_collectives = 0;
  for (const DeviceId device : granted->devices) {
    const double seconds = after.Value(
        "causeway_device_collective_seconds_total",
        {{"device", absl::StrCat(device.value())},
         {"host", absl::StrCat(device.value() / 2)},
         {"island", "0"}});
    devices_in_collectives += seconds > 0;
    per_device += seconds;
  }
  EXPECT_EQ(devices_in_collectives, 2);
  EXPECT_NEAR(per_device, after.Value("causeway_op_collective_seconds_sum"),
              1e-9);
  // The same per device in /api/status.
  double in_status = 0;
  const json status = Status();
  for (const json& device : status["devices"]) {
    in_status += device["collective_seconds"].get<double>();
  }
  EXPECT_NEAR(in_status, per_device, 1e-9);
}

TEST_F(HttpServerTest, ASessionShowsWithItsSliceOnItsDevices) {
  Start();
  std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster_);
  absl::StatusOr<client::Session> session =
      client->OpenSession({.name = "watched"});
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<client::Slice> slice = session->CreateSlice(2);
  ASSERT_TRUE(slice.ok()) << slice.status();
  absl::StatusOr<transport::SliceInfo> granted = slice->Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  // More than the cluster has free: it waits.
  absl::StatusOr<client::Slice> waiting = session->CreateSlice(3);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const json status = Status();
  ASSERT_EQ(status["sessions"].size(), 1u);
  const json& s = status["sessions"][0];
  EXPECT_EQ(s["name"], "watched");
  ASSERT_EQ(s["slices"].size(), 2u);
  EXPECT_EQ(s["slices"][0]["state"], "granted");
  EXPECT_EQ(s["slices"][0]["devices"].size(), 2u);
  for (const json& device : s["slices"][0]["devices"]) {
    const json& row = status["devices"][device.get<int>()];
    EXPECT_EQ(row["state"], "idle") << row.dump();
    EXPECT_EQ(row["sessions"], json::array({s["session"]}));
  }
  ASSERT_EQ(status["slice_requests"].size(), 1u);
  EXPECT_EQ(status["slice_requests"][0]["devices"], 3);
  EXPECT_THAT(status["slice_requests"][0]["blocked_by"].get<std::string>(),
              HasSubstr("2 free"));
  EXPECT_EQ(Metrics().Value("causeway_slice_requests_waiting"), 1);
}

TEST_F(HttpServerTest, WithATokenEveryEndpointButThePageNeedsIt) {
  Start(kToken);
  for (const char* path : {"/api/status", "/metrics", "/trace?seconds=1"}) {
    httplib::Result none = Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    EXPECT_THAT(none->body, HasSubstr("Authorization: Causeway-Proof"));
    httplib::Result wrong = Get(path, "not-the-token");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << path;
    EXPECT_THAT(wrong->body, HasSubstr("does not match"));
  }
  EXPECT_EQ(Status(kToken)["summary"]["devices"], 4);
  httplib::Result page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("sessionStorage"));
  // The page itself holds nothing of the cluster.
  EXPECT_THAT(page->body, ::testing::Not(HasSubstr("\"devices\":")));
}

// Over plain HTTP the token is proven, never sent: the token itself is
// refused (it has crossed once, and the answer says why, so that no client
// sends it twice), a proof works once, and a replayed or stale proof is
// refused naming why.
TEST_F(HttpServerTest, OverPlainHttpTheTokenIsProvenNeverSent) {
  Start(kToken);
  observer_->RefreshNow();
  httplib::Result bearer =
      GetAuthorized("/api/status", absl::StrCat("Bearer ", kToken));
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 401);
  EXPECT_THAT(bearer->body, HasSubstr("refused over plain HTTP"));
  EXPECT_EQ(bearer->get_header_value("WWW-Authenticate"),
            "Causeway-Proof realm=\"causeway\"");

  const std::string proof = "Causeway-Proof " + Proof(kToken);
  httplib::Result first = GetAuthorized("/metrics", proof);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  ExpectRefused(proof, "used before");
  ExpectRefused(
      "Causeway-Proof " + Proof(kToken, absl::Now() - absl::Minutes(1)),
      "check the clocks");
  ExpectRefused("Causeway-Proof v1:x", "malformed");
  // The endpoint goes on serving proofs.
  EXPECT_EQ(Status(kToken)["summary"]["devices"], 4);
}

// Where the operator said the network may read it (--insecure), the
// bearer token Prometheus sends works over plain HTTP too.
TEST_F(HttpServerTest, WithInsecureTheBearerTokenWorksOverPlainHttp) {
  Start(kToken, {"", "", ""}, /*accept_bearer_in_clear_text=*/true);
  observer_->RefreshNow();
  httplib::Result bearer =
      GetAuthorized("/metrics", absl::StrCat("Bearer ", kToken));
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200) << bearer->body;
  ExpectRefused("Bearer not-the-token", "wrong token");
  EXPECT_EQ(Status(kToken)["summary"]["devices"], 4);
}

// Over HTTPS the bearer token travels encrypted: accepted (Prometheus'
// `authorization: credentials` with `scheme: https`), and so is a proof.
TEST_F(HttpServerTest, OverHttpsTheBearerTokenWorks) {
  transport::testing::Certificates certs;
  ASSERT_TRUE(certs.Make("head"));
  Start(kToken, {certs.Cert("head"), certs.Key("head"), ""});
  const size_t colon = server_->address().rfind(':');
  httplib::SSLClient client(
      "127.0.0.1", std::stoi(server_->address().substr(colon + 1)));
  client.set_ca_cert_path(certs.Cert("head"));
  client.enable_server_certificate_verification(true);
  observer_->RefreshNow();
  for (const std::string& authorization :
       {absl::StrCat("Bearer ", kToken), "Causeway-Proof " + Proof(kToken)}) {
    httplib::Result answer =
        client.Get("/metrics", {{"Authorization", authorization}});
    ASSERT_TRUE(answer) << httplib::to_string(answer.error());
    EXPECT_EQ(answer->status, 200) << authorization << " " << answer->body;
  }
  httplib::Result none = client.Get("/metrics");
  ASSERT_TRUE(none) << httplib::to_string(none.error());
  EXPECT_EQ(none->status, 401);
  EXPECT_THAT(none->body, HasSubstr("'Authorization: Bearer TOKEN'"));
}

TEST_F(HttpServerTest, BadRequestsGetClearErrorsAndTheServerGoesOn) {
  Start();
  httplib::Result unknown = Get("/api/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_THAT(json::parse(unknown->body)["error"].get<std::string>(),
              HasSubstr("no such endpoint '/api/nothing'"));
  httplib::Result posted = http_->Post("/api/status", "x", "text/plain");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 405);
  EXPECT_EQ(Status()["summary"]["hosts"], 2);
}

// Hundreds of connections that send nothing, and more that send half a
// request and stall than the endpoint has threads, do not keep anyone
// else's request waiting: before, 40 idle connections held the endpoint's
// 4 threads for 50 s. Garbage gets a 400 and the endpoint goes on.
TEST_F(HttpServerTest, IdleConnectionsAndSlowSendersDoNotStallIt) {
  Start();
  // Both ends are in this process: about 600 descriptors in all, within
  // the common limit of 1024.
  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 200; ++i) {
    flood.push_back(std::make_unique<RawConnection>(server_->address(), ""));
    ASSERT_TRUE(flood.back()->sent()) << i;
  }
  // More than the endpoint has threads.
  for (int i = 0; i < 100; ++i) {
    flood.push_back(std::make_unique<RawConnection>(
        server_->address(), "GET /metrics HTTP/1.1\r\nHost: x"));
    ASSERT_TRUE(flood.back()->sent()) << i;
  }
  // Each stalled connection holds a thread for the 5 s read timeout at
  // least; with them queued behind 4 threads this waited for minutes.
  http_->set_read_timeout(10, 0);
  httplib::Result health = Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Status()["summary"]["hosts"], 2);
  RawConnection garbage(server_->address(), "\x16\x03\x01 \xff\xfe\r\n\r\n");
  EXPECT_THAT(garbage.ReadAll(), HasSubstr("400"));
  EXPECT_EQ(Status()["summary"]["hosts"], 2);
}

// The same over HTTPS with mutual TLS, where the TLS handshake comes
// first: connections that send nothing, that stall half-way through their
// ClientHello, and more than the endpoint has threads that finish the
// handshake and then send nothing, do not keep a member's request
// waiting. Before, each stalled handshake and each silent session held
// one of the 32 threads for the 5 s read timeout, and a member waited
// behind them for about 20 s. A stranger without a client certificate and
// a plain-HTTP request are refused, members who hang up before their
// answer cost nothing, and the endpoint goes on.
TEST_F(HttpServerTest, HttpsHandshakesHeldOpenDoNotStallIt) {
  transport::testing::Certificates certs;
  ASSERT_TRUE(certs.Make("ca"));
  ASSERT_TRUE(certs.MakeSigned("head", "ca"));
  ASSERT_TRUE(certs.MakeSigned("member", "ca"));
  Start("", {certs.Cert("head"), certs.Key("head"), certs.Cert("ca")});
  const size_t colon = server_->address().rfind(':');
  auto member = [&] {
    auto client = std::make_unique<httplib::SSLClient>(
        "127.0.0.1", std::stoi(server_->address().substr(colon + 1)),
        certs.Cert("member"), certs.Key("member"));
    client->set_ca_cert_path(certs.Cert("ca"));
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(10, 0);
    client->set_read_timeout(10, 0);
    return client;
  };
  httplib::Result before = member()->Get("/healthz");
  ASSERT_TRUE(before) << httplib::to_string(before.error());
  EXPECT_EQ(before->status, 200);

  std::vector<std::unique_ptr<RawConnection>> flood;
  for (int i = 0; i < 100; ++i) {
    flood.push_back(std::make_unique<RawConnection>(server_->address(), ""));
  }
  // A handshake record announcing 512 bytes, of which a ClientHello's
  // first six come.
  const std::string stalled_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  for (int i = 0; i < 100; ++i) {
    flood.push_back(
        std::make_unique<RawConnection>(server_->address(), stalled_hello));
    ASSERT_TRUE(flood.back()->sent()) << i;
  }
  // Each stalled ClientHello held one of the 32 threads for 5 s: this
  // request waited about 15 s behind them, past its 10 s.
  const absl::Time start = absl::Now();
  httplib::Result health = member()->Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  const absl::Duration first = absl::Now() - start;

  // Handshakes made whole with a member's certificate, then silence: more
  // than the endpoint has threads.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(
      SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  ASSERT_EQ(SSL_CTX_use_certificate_file(context.get(),
                                         certs.Cert("member").c_str(),
                                         SSL_FILETYPE_PEM), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(context.get(),
                                        certs.Key("member").c_str(),
                                        SSL_FILETYPE_PEM), 1);
  std::vector<std::unique_ptr<SSL, decltype(&SSL_free)>> silent;
  for (int i = 0; i < 40; ++i) {
    flood.push_back(std::make_unique<RawConnection>(server_->address(), ""));
    const timeval bound{10, 0};  // A handshake never answered fails.
    setsockopt(flood.back()->fd(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    silent.emplace_back(SSL_new(context.get()), SSL_free);
    SSL_set_fd(silent.back().get(), flood.back()->fd());
    ASSERT_EQ(SSL_connect(silent.back().get()), 1) << i;
  }
  observer_->RefreshNow();
  httplib::Result status = member()->Get("/api/status");
  ASSERT_TRUE(status) << httplib::to_string(status.error());
  EXPECT_EQ(json::parse(status->body)["summary"]["hosts"], 2);
  std::printf("a member was answered in %.1f ms beside 200 held connections, "
              "and all was done in %.1f ms with %zu held\n",
              absl::ToDoubleMilliseconds(first),
              absl::ToDoubleMilliseconds(absl::Now() - start), flood.size());

  // No client certificate: the handshake is refused, nothing is served.
  httplib::SSLClient stranger("127.0.0.1",
                              std::stoi(server_->address().substr(colon + 1)));
  stranger.set_ca_cert_path(certs.Cert("ca"));
  stranger.set_connection_timeout(10, 0);
  stranger.set_read_timeout(10, 0);
  EXPECT_FALSE(stranger.Get("/healthz"));
  // Members that ask and hang up at once (a reset): the answer's writes
  // fail with EPIPE, never a SIGPIPE that would end the process (with
  // SIGPIPE's default action, as in a process that has not ignored it;
  // gRPC's initialization here has).
  struct sigaction ignored = {};
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &default_action, &ignored), 0);
  for (int i = 0; i < 20; ++i) {
    RawConnection hasty(server_->address(), "");
    std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()),
                                                  SSL_free);
    SSL_set_fd(ssl.get(), hasty.fd());
    ASSERT_EQ(SSL_connect(ssl.get()), 1) << i;
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_GT(SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())), 0);
    const linger reset{1, 0};
    setsockopt(hasty.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
  // The answers have been written (or failed) once a later request is.
  httplib::Result after_resets = member()->Get("/healthz");
  ASSERT_TRUE(after_resets) << httplib::to_string(after_resets.error());
  sigaction(SIGPIPE, &ignored, nullptr);
  // Plain HTTP to the HTTPS port: closed without an answer.
  RawConnection plain(server_->address(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_THAT(plain.ReadAll(), ::testing::Not(HasSubstr("ok")));
  httplib::Result after = member()->Get("/healthz");
  ASSERT_TRUE(after) << httplib::to_string(after.error());
  EXPECT_EQ(after->status, 200);
}

TEST_F(HttpServerTest, TopRendersARowForEveryDevice) {
  Start();
  ASSERT_TRUE(cluster_->StopHost(HostId(0)).ok());
  const std::vector<std::string> lines =
      RenderTop(Status(), {.width = 200, .color = false, .title = "t"});
  for (int device = 0; device < 4; ++device) {
    const std::string state = device < 2 ? "dead" : "spare";
    const std::string row = absl::StrFormat("%4d %4d %3d %-8s", device,
                                            device / 2, 0, state);
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [&](const std::string& line) {
                              return absl::StartsWith(line, row);
                            }),
              1)
        << row << " in\n" << absl::StrJoin(lines, "\n");
  }
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const auto& line) {
    return absl::StrContains(line, "host 0 at") &&
           absl::StrContains(line, "connection broke");
  }));
}

}  // namespace http_server_test
}  // namespace causeway::observe
