// The gRPC control plane's defences: the token refused before any other
// work, TLS and mutual TLS with certificates made at run time (a TLS
// mismatch said at once, naming why), and hand-built hostile
// messages that fail their request or their session while the head goes
// on serving everyone else.
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "causeway/transport/grpc_head_server.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/transport/grpc_session_channel.h"
#include "causeway/transport/grpc_worker_agent.h"
#include "causeway/transport/testing/certificates.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::cluster {
namespace grpc_security_test {

using hlo::testutil::F32;
using hlo::testutil::Values;
using transport::GrpcClientOptions;
using transport::GrpcHeadConnection;
using transport::GrpcHeadServer;
using transport::GrpcHeadServerOptions;
using transport::GrpcSecurity;
using transport::GrpcSessionChannel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

// Admits every worker (as host 0, 1, ...) and remembers what happened.
class RecordingMembership : public transport::WorkerMembership,
                            public transport::WorkerListener {
 public:
  absl::StatusOr<transport::WorkerAdmission> AdmitWorker(
      const transport::WorkerHello& hello) override {
    absl::MutexLock lock(&mu_);
    transport::WorkerAdmission admission;
    admission.host = HostId(admitted_++);
    for (int64_t i = 0; i < hello.spec.num_devices; ++i) {
      admission.devices.push_back(
          {DeviceId(next_device_++), admission.host, hello.island, i,
           hello.spec.kind, hello.spec.memory_per_device});
    }
    return admission;
  }
  absl::Status ActivateWorker(
      HostId host,
      std::shared_ptr<transport::ControlChannel> channel) override {
    absl::MutexLock lock(&mu_);
    channels_.push_back(std::move(channel));
    return absl::OkStatus();
  }
  transport::WorkerListener& listener() override { return *this; }
  void OnOpDone(const transport::OpDone& done) override {}
  void OnPushFailed(const transport::UndeliveredPiece& piece) override {}
  void OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                     absl::Duration clock_offset) override {}
  void OnWorkerDisconnected(HostId host, absl::Status why) override {
    absl::MutexLock lock(&mu_);
    disconnected_.push_back(why);
  }

  int64_t admitted() {
    absl::MutexLock lock(&mu_);
    return admitted_;
  }
  // Waits for the first disconnection and returns its reason.
  absl::Status AwaitDisconnected() {
    absl::MutexLock lock(&mu_);
    auto any = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !disconnected_.empty();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&any), kWait)) {
      return absl::DeadlineExceededError("no worker disconnected");
    }
    return disconnected_.front();
  }

 private:
  absl::Mutex mu_;
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_device_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<transport::ControlChannel>> channels_
      ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> disconnected_ ABSL_GUARDED_BY(mu_);
};

// A head (an embedded cluster's, serving sessions) and a worker registry
// behind one gRPC server configured by the test.
class GrpcHeadFixture : public ::testing::Test {
 protected:
  void StartServer(GrpcHeadServerOptions options) {
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Create({.devices_per_host = 2});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<GrpcHeadServer>> server =
        GrpcHeadServer::Start(&cluster_->head(), &membership_,
                              std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> Connect(
      GrpcClientOptions options = {}) {
    options.connect_timeout = absl::Seconds(10);
    return GrpcHeadConnection::Connect(server_->address(), std::move(options));
  }

  // A session that opens and runs 2 * [3, 4] on 2 devices: the head serves.
  void ExpectHeadServes(const std::shared_ptr<GrpcHeadConnection>& connection) {
    GrpcSessionChannel channel(connection);
    ASSERT_TRUE(channel.OpenSession({.name = "good"}).AwaitFor(kWait).ok());
    transport::SliceRequest request;
    request.handle = SliceHandle(1);
    request.num_devices = 2;
    absl::StatusOr<transport::SliceInfo> slice =
        channel.RequestSlice(request).AwaitFor(kWait);
    ASSERT_TRUE(slice.ok()) << slice.status();
    transport::ArraySpec spec{ArrayHandle(2),
                              hlo::Shape(hlo::PrimitiveType::kF32, {2}),
                              *hlo::ParseSharding("{devices=[2]<=[2]}"),
                              SliceHandle(1)};
    ASSERT_TRUE(channel.PutArray(spec, F32({2}, {3, 4})).AwaitFor(kWait).ok());
    absl::StatusOr<hlo::Literal> back = channel.Fetch(ArrayHandle(2)).AwaitFor(kWait);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_THAT(Values(*back), ElementsAre(3, 4));
  }

  // A raw session stream with the wire protocol's own messages.
  struct RawSession {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<wire::SessionRequest,
                                             wire::SessionResponse>>
        stream;
    int64_t id = 0;
    std::string key;
  };
  std::unique_ptr<RawSession> OpenRaw(GrpcHeadConnection& connection) {
    auto raw = std::make_unique<RawSession>();
    raw->stream = connection.control().Session(&raw->context);
    wire::SessionRequest open;
    open.set_op_id(1);
    open.mutable_open()->set_version(transport::kSessionProtocol.max);
    open.mutable_open()->set_name("raw");
    open.mutable_open()->set_weight(1);
    CW_CHECK(raw->stream->Write(open));
    wire::SessionResponse opened;
    CW_CHECK(raw->stream->Read(&opened));
    CW_CHECK(opened.has_opened()) << opened.DebugString();
    raw->id = opened.opened().session();
    raw->key = opened.opened().key();
    return raw;
  }
  // Uploads host buffer `host_buffer` of session `session` (key `key`) by
  // hand: a header declaring `dims` u8 elements in `bytes` bytes, then
  // `data`. Returns the call's status.
  static grpc::Status UploadRaw(GrpcHeadConnection& connection,
                                int64_t session, const std::string& key,
                                uint64_t host_buffer, int64_t dims,
                                int64_t bytes, const std::string& data) {
    grpc::ClientContext context;
    wire::HostBufferPutResponse response;
    auto writer = connection.bulk().PutHostBuffer(&context, &response);
    wire::HostBufferPut message;
    wire::HostBufferPutHeader* header = message.mutable_header();
    header->set_session(session);
    header->set_key(key);
    header->set_host_buffer(host_buffer);
    header->mutable_value()->mutable_shape()->set_type(wire::U8);
    header->mutable_value()->mutable_shape()->add_dims(dims);
    header->mutable_value()->set_byte_size(bytes);
    writer->Write(message);
    message.mutable_chunk()->set_data(data);
    writer->Write(message);
    writer->WritesDone();
    return writer->Finish();
  }

  // Reads until the stream ends; returns the call's status.
  static grpc::Status Drain(RawSession& raw) {
    wire::SessionResponse ignored;
    while (raw.stream->Read(&ignored)) {
    }
    return raw.stream->Finish();
  }

  // The worker service as a hand-written worker dials it: plaintext, no
  // token.
  std::unique_ptr<wire::HeadWorkers::Stub> WorkerStub() {
    return wire::HeadWorkers::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }

  // A raw worker stream that registered one device as incarnation
  // `incarnation` and read the head's `registered`.
  struct RawWorker {
    std::unique_ptr<wire::HeadWorkers::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<
        grpc::ClientReaderWriter<wire::WorkerToHead, wire::HeadToWorker>>
        stream;
  };
  std::unique_ptr<RawWorker> RegisterRaw(uint64_t incarnation) {
    auto raw = std::make_unique<RawWorker>();
    raw->stub = WorkerStub();
    raw->stream = raw->stub->Worker(&raw->context);
    wire::WorkerToHead hello;
    wire::Register* reg = hello.mutable_registration();
    reg->set_version(transport::kWorkerProtocol.max);
    reg->set_num_devices(1);
    reg->set_device_kind("cpu");
    reg->set_memory_per_device(1 << 20);
    reg->set_incarnation(incarnation);
    reg->set_name("hostile");
    CW_CHECK(raw->stream->Write(hello));
    wire::HeadToWorker registered;
    CW_CHECK(raw->stream->Read(&registered));
    CW_CHECK(registered.has_registered()) << registered.DebugString();
    return raw;
  }
  // A registration of `version` and `num_devices` that the head must
  // refuse with `code`, naming `what`, admitting nobody.
  void ExpectRegistrationRefused(uint32_t version, int64_t num_devices,
                                 grpc::StatusCode code,
                                 const std::string& what) {
    std::unique_ptr<wire::HeadWorkers::Stub> workers = WorkerStub();
    grpc::ClientContext context;
    auto stream = workers->Worker(&context);
    wire::WorkerToHead hello;
    hello.mutable_registration()->set_version(version);
    hello.mutable_registration()->set_num_devices(num_devices);
    stream->Write(hello);
    wire::HeadToWorker command;
    EXPECT_FALSE(stream->Read(&command)) << command.DebugString();
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), code);
    EXPECT_THAT(status.error_message(), HasSubstr(what));
    EXPECT_EQ(membership_.admitted(), 0);
  }
  // Reads until the stream ends; returns the call's status.
  static grpc::Status Drain(RawWorker& raw) {
    wire::HeadToWorker ignored;
    while (raw.stream->Read(&ignored)) {
    }
    return raw.stream->Finish();
  }

  std::unique_ptr<LocalCluster> cluster_;
  RecordingMembership membership_;
  std::unique_ptr<GrpcHeadServer> server_;
};

// --- The token. ---

TEST_F(GrpcHeadFixture, ClientsWithoutTheTokenAreRefusedUnauthenticated) {
  GrpcHeadServerOptions options;
  options.security.token = "s3cret";
  StartServer(options);
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> none = Connect();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated)
      << none.status();
  GrpcClientOptions wrong;
  wrong.security.token = "guess";
  EXPECT_EQ(Connect(wrong).status().code(),
            absl::StatusCode::kUnauthenticated);
  GrpcClientOptions right;
  right.security.token = "s3cret";
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection =
      Connect(right);
  ASSERT_TRUE(connection.ok()) << connection.status();
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, EveryCallWithoutTheTokenIsRefusedBeforeAnyWork) {
  GrpcHeadServerOptions options;
  options.security.token = "s3cret";
  StartServer(options);
  auto channel = grpc::CreateChannel(server_->address(),
                                     grpc::InsecureChannelCredentials());
  auto sessions = wire::HeadSessions::NewStub(channel);
  auto workers = wire::HeadWorkers::NewStub(channel);
  const grpc::StatusCode kRefused = grpc::StatusCode::UNAUTHENTICATED;
  {
    grpc::ClientContext context;
    auto stream = sessions->Session(&context);
    wire::SessionRequest open;
    open.set_op_id(1);
    open.mutable_open()->set_version(transport::kSessionProtocol.max);
    open.mutable_open()->set_weight(1);
    stream->Write(open);
    wire::SessionResponse response;
    EXPECT_FALSE(stream->Read(&response));
    EXPECT_EQ(stream->Finish().error_code(), kRefused);
  }
  {
    grpc::ClientContext context;
    wire::HostBufferPutResponse response;
    auto writer = sessions->PutHostBuffer(&context, &response);
    wire::HostBufferPut header;
    header.mutable_header()->set_session(1);
    writer->Write(header);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), kRefused);
  }
  {
    grpc::ClientContext context;
    auto reader = sessions->GetHostBuffer(&context, wire::HostBufferGet());
    wire::HostBufferData data;
    EXPECT_FALSE(reader->Read(&data));
    EXPECT_EQ(reader->Finish().error_code(), kRefused);
  }
  {
    grpc::ClientContext context;
    wire::ClusterStatusResponse response;
    EXPECT_EQ(sessions
                  ->GetClusterStatus(&context, wire::ClusterStatusRequest(),
                                     &response)
                  .error_code(),
              kRefused);
    EXPECT_FALSE(response.has_report());
  }
  {
    grpc::ClientContext context;
    auto stream = workers->Worker(&context);
    wire::WorkerToHead hello;
    hello.mutable_registration()->set_version(transport::kWorkerProtocol.max);
    hello.mutable_registration()->set_num_devices(1);
    stream->Write(hello);
    wire::HeadToWorker command;
    EXPECT_FALSE(stream->Read(&command));
    EXPECT_EQ(stream->Finish().error_code(), kRefused);
  }
  {
    grpc::ClientContext context;
    auto reader = workers->PullShard(&context, wire::ShardRef());
    wire::ShardData data;
    EXPECT_FALSE(reader->Read(&data));
    EXPECT_EQ(reader->Finish().error_code(), kRefused);
  }
  {
    grpc::ClientContext context;
    wire::PushShardResponse response;
    auto writer = workers->PushShard(&context, &response);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), kRefused);
  }
  // Nothing was opened or admitted.
  EXPECT_EQ(server_->session_server()->num_sessions(), 0);
  EXPECT_EQ(membership_.admitted(), 0);
}

// The token never crosses the wire: a call that sends it as it is (the
// old way) is refused; a call proves it with a proof that works once, and
// the same proof replayed is refused.
TEST_F(GrpcHeadFixture, TheTokenIsProvenNeverSentAndAProofWorksOnce) {
  GrpcHeadServerOptions options;
  options.security.token = "s3cret";
  StartServer(options);
  auto sessions = wire::HeadSessions::NewStub(grpc::CreateChannel(
      server_->address(), grpc::InsecureChannelCredentials()));
  auto version = [&](const std::string& key, const std::string& value) {
    grpc::ClientContext context;
    context.AddMetadata(key, value);
    wire::VersionRequest request;
    request.set_min_version(transport::kSessionProtocol.min);
    request.set_max_version(transport::kSessionProtocol.max);
    wire::VersionResponse response;
    return sessions->GetVersion(&context, request, &response);
  };
  const grpc::Status sent = version("causeway-token", "s3cret");
  EXPECT_EQ(sent.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(sent.error_message(), HasSubstr("carries no proof"));

  const std::string proof = transport::MakeCallProof("s3cret", absl::Now());
  EXPECT_THAT(proof, ::testing::Not(HasSubstr("s3cret")));
  const grpc::Status proven = version(transport::kProofMetadataKey, proof);
  EXPECT_TRUE(proven.ok()) << proven.error_message();
  const grpc::Status replayed = version(transport::kProofMetadataKey, proof);
  EXPECT_EQ(replayed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(replayed.error_message(), HasSubstr("used before"));

  const grpc::Status wrong = version(
      transport::kProofMetadataKey, transport::MakeCallProof("guess", absl::Now()));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("does not match"));
  const grpc::Status stale = version(
      transport::kProofMetadataKey,
      transport::MakeCallProof("s3cret", absl::Now() - absl::Minutes(5)));
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(stale.error_message(), HasSubstr("check the clocks"));
}

TEST_F(GrpcHeadFixture, WorkersWithoutTheTokenAreRefusedUnauthenticated) {
  GrpcHeadServerOptions options;
  options.security.token = "s3cret";
  StartServer(options);
  transport::GrpcWorkerAgentOptions worker;
  worker.head = server_->address();
  worker.spec = {1, "cpu", 1 << 20};
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> refused =
      transport::GrpcWorkerAgent::Register(worker);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  EXPECT_EQ(membership_.admitted(), 0);
  worker.security.token = "s3cret";
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> admitted =
      transport::GrpcWorkerAgent::Register(worker);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(membership_.admitted(), 1);
}

// --- TLS. ---

using transport::testing::Certificates;

TEST_F(GrpcHeadFixture, TlsServesClientsThatTrustItsCertificateOnly) {
  Certificates certs;
  ASSERT_TRUE(certs.Make("head"));
  ASSERT_TRUE(certs.Make("stranger"));
  GrpcHeadServerOptions options;
  options.security.tls_cert_file = certs.Cert("head");
  options.security.tls_key_file = certs.Key("head");
  StartServer(options);

  GrpcClientOptions trusting;
  trusting.security.tls_ca_file = certs.Cert("head");
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection =
      Connect(trusting);
  ASSERT_TRUE(connection.ok()) << connection.status();
  ExpectHeadServes(*connection);

  // Refused at once, saying why (a long connect timeout: waiting it out
  // would end with Unavailable, "no head answered").
  GrpcClientOptions plaintext;
  plaintext.connect_timeout = kWait;
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> refused =
      GrpcHeadConnection::Connect(server_->address(), plaintext);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("the head speaks TLS and this side does not"));
  GrpcClientOptions distrusting;
  distrusting.security.tls_ca_file = certs.Cert("stranger");
  distrusting.connect_timeout = kWait;
  refused = GrpcHeadConnection::Connect(server_->address(), distrusting);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("the head's certificate is not trusted"));
}

TEST_F(GrpcHeadFixture, ATlsClientOfAPlaintextHeadIsToldAtOnce) {
  Certificates certs;
  ASSERT_TRUE(certs.Make("head"));
  StartServer({});
  GrpcClientOptions tls;
  tls.security.tls_ca_file = certs.Cert("head");
  tls.connect_timeout = kWait;
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> refused =
      GrpcHeadConnection::Connect(server_->address(), tls);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("does not speak TLS"));
}

// Mutual TLS: the head asks every client and worker for a certificate
// signed by its CA, and refuses the TLS handshake of one without: no
// session, no registration, nothing read.
TEST_F(GrpcHeadFixture, MutualTlsRefusesClientsAndWorkersWithoutACertificateOfItsCa) {
  Certificates certs;
  ASSERT_TRUE(certs.Make("ca"));
  ASSERT_TRUE(certs.MakeSigned("head", "ca"));
  ASSERT_TRUE(certs.MakeSigned("member", "ca"));
  ASSERT_TRUE(certs.Make("stranger"));  // Self-signed: not the CA's.
  GrpcHeadServerOptions options;
  options.security.tls_cert_file = certs.Cert("head");
  options.security.tls_key_file = certs.Key("head");
  options.security.tls_ca_file = certs.Cert("ca");
  StartServer(options);

  GrpcClientOptions member;
  member.security.tls_ca_file = certs.Cert("ca");
  member.security.tls_cert_file = certs.Cert("member");
  member.security.tls_key_file = certs.Key("member");
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection =
      Connect(member);
  ASSERT_TRUE(connection.ok()) << connection.status();
  ExpectHeadServes(*connection);

  GrpcClientOptions anonymous;
  anonymous.security.tls_ca_file = certs.Cert("ca");
  anonymous.connect_timeout = kWait;
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> refused =
      GrpcHeadConnection::Connect(server_->address(), anonymous);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("requires a client certificate"));
  GrpcClientOptions stranger = anonymous;
  stranger.security.tls_cert_file = certs.Cert("stranger");
  stranger.security.tls_key_file = certs.Key("stranger");
  refused = GrpcHeadConnection::Connect(server_->address(), stranger);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated)
      << refused.status();

  transport::GrpcWorkerAgentOptions worker;
  worker.head = server_->address();
  worker.spec = {1, "cpu", 1 << 20};
  worker.connect_timeout = kWait;
  worker.security = anonymous.security;
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> intruder =
      transport::GrpcWorkerAgent::Register(worker);
  EXPECT_EQ(intruder.status().code(), absl::StatusCode::kUnauthenticated)
      << intruder.status();
  EXPECT_THAT(intruder.status().message(), HasSubstr("client certificate"));
  EXPECT_EQ(membership_.admitted(), 0);
  worker.security = member.security;
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> admitted =
      transport::GrpcWorkerAgent::Register(worker);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(membership_.admitted(), 1);
}

// --- Hostile messages. ---

TEST_F(GrpcHeadFixture, AStreamThatDoesNotOpenFirstIsRefusedAndOthersGoOn) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  grpc::ClientContext context;
  auto stream = (*connection)->control().Session(&context);
  wire::SessionRequest execute;
  execute.set_op_id(1);
  execute.mutable_execute()->set_executable(1);
  stream->Write(execute);
  wire::SessionResponse response;
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("must be `open`"));
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, AMalformedExecuteEndsItsSessionNamingTheField) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  wire::SessionRequest execute;
  execute.set_op_id(2);
  wire::ArraySpec* output = execute.mutable_execute()->add_outputs();
  output->mutable_global_shape()->set_type(wire::F32);
  output->mutable_global_shape()->add_dims(-4);
  output->set_sharding("{replicated}");
  raw->stream->Write(execute);
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("SessionRequest.execute.outputs[0].global_shape."
                        "dims[0]: -4 is negative"));
  ExpectHeadServes(*connection);
}

// A stream that ends without `close` (a half-close, or a message that does
// not parse: gRPC's Read fails alike) ends with an error naming it, not OK.
TEST_F(GrpcHeadFixture, AStreamThatEndsWithoutCloseEndsWithAnError) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  raw->stream->WritesDone();
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("ended without `close`"));
  ExpectHeadServes(*connection);
}

// A head that goes away while a client uploads is UNAVAILABLE naming the
// head, not DATA_LOSS (which an elastic loop reads as a lost slice and
// waits for a remap that cannot come).
TEST_F(GrpcHeadFixture, AHeadThatGoesAwayMidUploadIsUnavailableNamingIt) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  GrpcSessionChannel channel(*connection);
  ASSERT_TRUE(channel.OpenSession({.name = "uploader"}).AwaitFor(kWait).ok());
  transport::SliceRequest request;
  request.handle = SliceHandle(1);
  request.num_devices = 2;
  ASSERT_TRUE(channel.RequestSlice(request).AwaitFor(kWait).ok());
  const int64_t elements = int64_t{64} << 20;  // 256 MiB of f32.
  transport::ArraySpec spec{ArrayHandle(2),
                            hlo::Shape(hlo::PrimitiveType::kF32, {elements}),
                            *hlo::ParseSharding("{replicated}"),
                            SliceHandle(1)};
  Future<> put = channel.PutArray(
      spec, hlo::Literal::Uninitialized(hlo::Shape(hlo::PrimitiveType::kF32,
                                                   {elements})));
  const std::string address = server_->address();
  server_->Shutdown();
  absl::Status status = put.AwaitFor(kWait);
  if (status.ok()) {
    // The upload won the race: the next call meets the head that is gone.
    status = channel.Fetch(ArrayHandle(2)).AwaitFor(kWait).status();
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(address));
}

// A put_array of 4 bytes (u8[4], replicated) of host buffer `host_buffer`
// into array `array`, on slice 1.
wire::SessionRequest PutArrayRequest(uint64_t op_id, uint64_t array,
                                     uint64_t host_buffer) {
  wire::SessionRequest put;
  put.set_op_id(op_id);
  put.mutable_put_array()->set_host_buffer(host_buffer);
  wire::ArraySpec* spec = put.mutable_put_array()->mutable_spec();
  spec->set_handle(array);
  spec->mutable_global_shape()->set_type(wire::U8);
  spec->mutable_global_shape()->add_dims(4);
  spec->set_sharding("{replicated}");
  spec->set_slice(1);
  return put;
}

wire::SessionRequest SliceOfTwo(uint64_t op_id) {
  wire::SessionRequest slice;
  slice.set_op_id(op_id);
  slice.mutable_request_slice()->set_handle(1);
  slice.mutable_request_slice()->set_num_devices(2);
  return slice;
}

TEST_F(GrpcHeadFixture, APutArrayWaitsForItsBytesAndTheRequestsAfterItWaitInLine) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  ASSERT_TRUE(raw->stream->Write(SliceOfTwo(2)));
  wire::SessionResponse answer;
  ASSERT_TRUE(raw->stream->Read(&answer));
  ASSERT_TRUE(answer.has_slice()) << answer.DebugString();
  // The put comes before its bytes, and a fetch of its array right after
  // it: the fetch must find the array (the head took the put first).
  ASSERT_TRUE(raw->stream->Write(PutArrayRequest(3, 5, 9)));
  wire::SessionRequest fetch;
  fetch.set_op_id(4);
  fetch.mutable_fetch()->set_array(5);
  fetch.mutable_fetch()->set_host_buffer(10);
  ASSERT_TRUE(raw->stream->Write(fetch));
  // Other sessions are served while this one waits (not ExpectHeadServes:
  // this session holds every device).
  std::unique_ptr<RawSession> other = OpenRaw(**connection);
  wire::SessionRequest status;
  status.set_op_id(2);
  status.mutable_get_status();
  ASSERT_TRUE(other->stream->Write(status));
  ASSERT_TRUE(other->stream->Read(&answer));
  EXPECT_TRUE(answer.has_status_report()) << answer.DebugString();
  other->context.TryCancel();
  Drain(*other);
  grpc::Status uploaded =
      UploadRaw(**connection, raw->id, raw->key, 9, 4, 4, "\x01\x02\x03\x04");
  ASSERT_TRUE(uploaded.ok()) << uploaded.error_message();
  std::map<uint64_t, wire::SessionResponse> answers;
  while (answers.size() < 2 && raw->stream->Read(&answer)) {
    answers[answer.op_id()] = answer;
  }
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[3].has_done()) << answers[3].DebugString();
  ASSERT_TRUE(answers[4].has_fetched()) << answers[4].DebugString();
  EXPECT_EQ(answers[4].fetched().byte_size(), 4);
  raw->context.TryCancel();
  Drain(*raw);
}

TEST_F(GrpcHeadFixture, APutArrayWhoseBytesNeverComeEndsItsSessionAfterTheTimeout) {
  GrpcHeadServerOptions options;
  options.sessions.upload_timeout = absl::Milliseconds(300);
  StartServer(std::move(options));
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  ASSERT_TRUE(raw->stream->Write(SliceOfTwo(2)));
  ASSERT_TRUE(raw->stream->Write(PutArrayRequest(3, 5, 9)));
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("the upload of array 5 (host buffer 9) failed: the "
                        "bytes of array 5 (host buffer 9) did not come within "
                        "300ms; a failed upload ends the session"));
  // Its session is gone (before its stream finished); others go on.
  EXPECT_EQ(server_->session_server()->num_sessions(), 0);
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, AMalformedRequestWithAnAnswerFailsOnlyThatRequest) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  wire::SessionRequest slice;
  slice.set_op_id(2);
  slice.mutable_request_slice()->set_num_devices(-3);
  raw->stream->Write(slice);
  wire::SessionResponse answer;
  ASSERT_TRUE(raw->stream->Read(&answer));
  EXPECT_EQ(answer.op_id(), 2u);
  EXPECT_EQ(answer.status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(answer.status().message(), HasSubstr("request_slice.num_devices"));
  // The session goes on.
  wire::SessionRequest status;
  status.set_op_id(3);
  status.mutable_get_status();
  raw->stream->Write(status);
  ASSERT_TRUE(raw->stream->Read(&answer));
  EXPECT_EQ(answer.op_id(), 3u);
  EXPECT_TRUE(answer.has_status_report());
  raw->context.TryCancel();
  Drain(*raw);
}

TEST_F(GrpcHeadFixture, OpIdsThatDoNotIncreaseEndTheSession) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  wire::SessionRequest again;
  again.set_op_id(1);
  again.mutable_get_status();
  raw->stream->Write(again);
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("op_id"));
}

TEST_F(GrpcHeadFixture, HostileUploadsAreRefusedWithoutAllocatingTheirSize) {
  StartServer({});
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  auto upload = [&](int64_t session, const std::string& key, int64_t dims,
                    int64_t bytes, const std::string& data) {
    return UploadRaw(**connection, session, key, 1, dims, bytes, data);
  };
  // Another session's id without its key reads as no session at all.
  EXPECT_EQ(upload(raw->id, "not the key", 4, 4, "abcd").error_code(),
            grpc::StatusCode::NOT_FOUND);
  // 2^50 bytes declared: refused before anything is allocated.
  grpc::Status huge = upload(raw->id, raw->key, int64_t{1} << 50,
                             int64_t{1} << 50, "x");
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(huge.error_message(), HasSubstr("more than"));
  // More data than declared.
  grpc::Status overflow = upload(raw->id, raw->key, 2, 2, "abc");
  EXPECT_EQ(overflow.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(overflow.error_message(), HasSubstr("runs past"));
  raw->context.TryCancel();
  Drain(*raw);
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, HostBuffersOfAllSessionsTogetherAreBoundedAndOthersGoOn) {
  // Each session may hold 600 bytes, all of them together 1000.
  GrpcHeadServerOptions options;
  options.sessions.max_host_buffer_bytes_per_session = 600;
  options.sessions.max_host_buffer_bytes = 1000;
  StartServer(std::move(options));
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> first = OpenRaw(**connection);
  std::unique_ptr<RawSession> second = OpenRaw(**connection);
  const std::string bytes(600, 'x');
  // The first holds its 600 (uploaded, not yet taken by a put_array).
  grpc::Status held = UploadRaw(**connection, first->id, first->key, 1, 600,
                                600, bytes);
  ASSERT_TRUE(held.ok()) << held.error_message();
  // The second is within its own limit, not within the head's.
  grpc::Status refused = UploadRaw(**connection, second->id, second->key, 1,
                                   600, 600, bytes);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("host buffer 1 (600 bytes) does not fit: the head "
                        "holds 600 bytes of host buffers for all its "
                        "sessions, of at most 1000 (--max-host-buffer-bytes)"));
  // Smaller work of others goes on meanwhile.
  ExpectHeadServes(*connection);
  // The first session closes: its bytes are given back to everyone (its
  // stream ends after the head let them go).
  wire::SessionRequest close;
  close.set_op_id(2);
  close.mutable_close();
  ASSERT_TRUE(first->stream->Write(close));
  first->stream->WritesDone();
  EXPECT_TRUE(Drain(*first).ok());
  grpc::Status now = UploadRaw(**connection, second->id, second->key, 2, 600,
                               600, bytes);
  EXPECT_TRUE(now.ok()) << now.error_message();
  second->context.TryCancel();
  Drain(*second);
}

TEST_F(GrpcHeadFixture, SessionsOpenedFasterThanTheLimitAreRefusedAndOthersGoOn) {
  // Two at once, then one every 1000 s: the test never earns a third.
  GrpcHeadServerOptions options;
  options.sessions.max_session_opens_per_second = 0.001;
  options.sessions.session_open_burst = 2;
  StartServer(std::move(options));
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> first = OpenRaw(**connection);
  std::unique_ptr<RawSession> second = OpenRaw(**connection);
  grpc::ClientContext context;
  auto third = (*connection)->control().Session(&context);
  wire::SessionRequest open;
  open.set_op_id(1);
  open.mutable_open()->set_version(transport::kSessionProtocol.max);
  open.mutable_open()->set_name("one too many");
  open.mutable_open()->set_weight(1);
  third->Write(open);
  wire::SessionResponse answer;
  EXPECT_FALSE(third->Read(&answer)) << answer.DebugString();
  grpc::Status refused = third->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("(--max-session-opens-per-second)"));
  // The sessions already open are served.
  wire::SessionRequest status;
  status.set_op_id(2);
  status.mutable_get_status();
  ASSERT_TRUE(first->stream->Write(status));
  ASSERT_TRUE(first->stream->Read(&answer));
  EXPECT_EQ(answer.op_id(), 2u);
  EXPECT_TRUE(answer.has_status_report()) << answer.DebugString();
  for (RawSession* raw : {first.get(), second.get()}) {
    raw->context.TryCancel();
    Drain(*raw);
  }
}

// A client never talks in clear text to a head that is not on loopback:
// refused before it dials, saying why and how to go on.
TEST(GrpcClientSecurityTest, AClientDoesNotTalkInClearToAnExposedHead) {
  GrpcClientOptions options;
  options.security.token = "the cluster's token";
  options.connect_timeout = absl::Seconds(1);
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> refused =
      GrpcHeadConnection::Connect("192.0.2.1:7070", options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("in clear text"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--tls-ca"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--insecure"));
  // With TLS, on loopback, without a token, or told to: it dials (and,
  // with nothing at these addresses, finds no head).
  EXPECT_TRUE(
      transport::RefuseClearTextToRemoteHead("127.0.0.1:7070", options.security)
          .ok());
  EXPECT_TRUE(
      transport::RefuseClearTextToRemoteHead("[::1]:7070", options.security)
          .ok());
  GrpcSecurity told = options.security;
  told.allow_clear_text = true;
  EXPECT_TRUE(transport::RefuseClearTextToRemoteHead("192.0.2.1:7070", told).ok());
  GrpcSecurity tls = options.security;
  tls.tls_ca_file = "ca.pem";
  EXPECT_TRUE(transport::RefuseClearTextToRemoteHead("192.0.2.1:7070", tls).ok());
  EXPECT_TRUE(
      transport::RefuseClearTextToRemoteHead("192.0.2.1:7070", GrpcSecurity{})
          .ok());
}

TEST(GrpcClientSecurityTest, AWorkerDoesNotTalkInClearToAnExposedHead) {
  // 192.0.2.1 (TEST-NET-1) is never dialled: the refusal comes first, and
  // is not one a worker retries (it is not Unavailable).
  transport::GrpcWorkerAgentOptions worker;
  worker.head = "192.0.2.1:7070";
  worker.spec = {1, "cpu", 1 << 20};
  worker.security.token = "the cluster's token";
  worker.connect_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> refused =
      transport::GrpcWorkerAgent::Register(worker);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("in clear text"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--insecure"));
  // Told to (--insecure), it dials, and finds no head there.
  worker.security.allow_clear_text = true;
  refused = transport::GrpcWorkerAgent::Register(worker);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
}

// A session that sends requests faster than its bound ends, naming the
// flag; another session is served all the while.
TEST_F(GrpcHeadFixture, ASessionFloodingRequestsEndsAloneNamingTheLimit) {
  // Five requests at once, then one every 1000 s.
  GrpcHeadServerOptions options;
  options.sessions.max_requests_per_second_per_session = 0.001;
  options.sessions.session_request_burst = 5;
  StartServer(std::move(options));
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> flood = OpenRaw(**connection);
  std::unique_ptr<RawSession> calm = OpenRaw(**connection);
  wire::SessionRequest status;
  status.mutable_get_status();
  wire::SessionResponse answer;
  uint64_t op = 1;
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    status.set_op_id(++op);
    if (!flood->stream->Write(status)) break;
  }
  while (flood->stream->Read(&answer)) ++answered;
  grpc::Status ended = flood->stream->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << ended.error_message();
  EXPECT_THAT(ended.error_message(),
              HasSubstr("--max-requests-per-second-per-session"));
  // At most the burst was served before the end.
  EXPECT_LE(answered, 5);
  // The other session is served.
  status.set_op_id(2);
  ASSERT_TRUE(calm->stream->Write(status));
  ASSERT_TRUE(calm->stream->Read(&answer));
  EXPECT_EQ(answer.op_id(), 2u);
  EXPECT_TRUE(answer.has_status_report()) << answer.DebugString();
  calm->context.TryCancel();
  Drain(*calm);
}

TEST_F(GrpcHeadFixture, AClientThatNeverReadsItsAnswersLosesItsSessionAlone) {
  GrpcHeadServerOptions options;
  options.sessions.max_answer_bytes_per_session = 64 << 10;
  StartServer(std::move(options));
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  std::unique_ptr<RawSession> raw = OpenRaw(**connection);
  // Without the bound its answers would pile up and Drain would wait for
  // ever: the deadline turns that into a failure.
  raw->context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(120));
  // Status reports (each some hundred bytes), asked for and never read,
  // until the head ends the session (the write fails once it has).
  uint64_t op_id = 2;
  wire::SessionRequest status;
  status.mutable_get_status();
  for (; op_id < 200000; ++op_id) {
    status.set_op_id(op_id);
    if (!raw->stream->Write(status)) break;
  }
  ASSERT_LT(op_id, 200000u) << "the head never ended the session";
  grpc::Status ended = Drain(*raw);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::CANCELLED)
      << ended.error_message();
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, AMalformedRegistrationIsRefusedNamingTheField) {
  StartServer({});
  ExpectRegistrationRefused(transport::kWorkerProtocol.max, -1,
                            grpc::StatusCode::INVALID_ARGUMENT,
                            "registration.num_devices");
}

TEST_F(GrpcHeadFixture, AWorkerOfAnOlderProtocolVersionIsRefused) {
  // Version 3 sends a launch's peers by number: a version-2 worker would
  // see launches without peers (version 2 sent names by number, which a
  // version-1 worker would misread).
  StartServer({});
  auto workers = WorkerStub();
  for (uint32_t version : {1u, 2u}) {
    grpc::ClientContext context;
    wire::VersionRequest request;
    request.set_min_version(version);
    request.set_max_version(version);
    wire::VersionResponse response;
    grpc::Status status = workers->GetVersion(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("the peer speaks ", version, "..",
                                       version, ", this build 3..3")));
  }
  ExpectRegistrationRefused(2, 2, grpc::StatusCode::FAILED_PRECONDITION,
                            "registration.version: 2");
}

TEST_F(GrpcHeadFixture, AWorkerSendingAMalformedNoticeIsCutOffAlone) {
  StartServer({});
  std::unique_ptr<RawWorker> raw = RegisterRaw(77);
  wire::WorkerToHead bad;
  bad.mutable_op_done()->add_done()->set_device(-8);
  raw->stream->Write(bad);
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("op_done.done[0].device"));
  absl::Status gone = membership_.AwaitDisconnected();
  EXPECT_THAT(gone.message(), HasSubstr("op_done"));
  // The head still serves.
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection = Connect();
  ASSERT_TRUE(connection.ok()) << connection.status();
  ExpectHeadServes(*connection);
}

TEST_F(GrpcHeadFixture, AWorkerStreamThatEndsIsAnErrorNamingIt) {
  StartServer({});
  std::unique_ptr<RawWorker> raw = RegisterRaw(79);
  raw->stream->WritesDone();
  grpc::Status status = Drain(*raw);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_THAT(status.error_message(),
              HasSubstr("sent a message that does not parse"));
  EXPECT_THAT(membership_.AwaitDisconnected().message(), HasSubstr("ended"));
}

TEST_F(GrpcHeadFixture, AMalformedKeyValueRequestIsAnsweredAndOneWithoutAnIdEndsTheStream) {
  transport::InProcessKeyValueStore store;
  GrpcHeadServerOptions options;
  options.workers.key_value_store = &store;
  StartServer(std::move(options));
  std::unique_ptr<RawWorker> raw = RegisterRaw(78);
  // A key past the bound: that request fails, the stream goes on.
  wire::WorkerToHead bad;
  bad.mutable_kv()->set_id(5);
  bad.mutable_kv()->mutable_set()->set_key(
      std::string(transport::KeyValueStore::kMaxKeyBytes + 1, 'k'));
  raw->stream->Write(bad);
  wire::HeadToWorker answer;
  do {
    ASSERT_TRUE(raw->stream->Read(&answer));
  } while (!answer.has_kv_reply());
  EXPECT_EQ(answer.kv_reply().id(), 5u);
  EXPECT_EQ(answer.kv_reply().status().code(),
            static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(answer.kv_reply().status().message(), HasSubstr("kv.set.key"));
  EXPECT_TRUE(store.Keys().empty());
  // A request without an id cannot be answered: the stream ends.
  bad.mutable_kv()->set_id(0);
  raw->stream->Write(bad);
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("kv.id"));
}

TEST_F(GrpcHeadFixture, BulkCallsOfAnUnknownIncarnationAreNotFound) {
  StartServer({});
  transport::GrpcWorkerAgentOptions worker;
  worker.head = server_->address();
  worker.spec = {1, "cpu", 1 << 20};
  absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> agent =
      transport::GrpcWorkerAgent::Register(worker);
  ASSERT_TRUE(agent.ok()) << agent.status();
  std::unique_ptr<wire::HeadWorkers::Stub> workers = WorkerStub();
  {
    wire::ShardRef ref;
    ref.set_host((*agent)->host().value());
    ref.set_incarnation((*agent)->incarnation() + 1);
    ref.set_command(1);
    grpc::ClientContext context;
    auto reader = workers->PullShard(&context, ref);
    wire::ShardData data;
    EXPECT_FALSE(reader->Read(&data));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext context;
    wire::PushShardResponse response;
    auto writer = workers->PushShard(&context, &response);
    wire::ShardData header;
    header.mutable_header()->set_host((*agent)->host().value());
    header.mutable_header()->set_incarnation((*agent)->incarnation());
    header.mutable_header()->set_command(12345);  // No such fetch.
    writer->Write(header);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

}  // namespace grpc_security_test
}  // namespace causeway::cluster
