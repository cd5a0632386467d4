// A head that stops reading: a client's and a worker's queues of messages
// waiting to be written to it are bounded, and the stream ends naming the
// bound (docs/security.md, "Limits"), instead of the process's memory
// growing for as long as the head is stuck. A head that goes away during a
// download is said to be gone.
//
// The head here is a stand-in gRPC service: it answers the version, opens
// the session (registers the worker) and then reads nothing more until the
// call is cancelled; asked, it answers one fetch and then never sends the
// value.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_session_channel.h"
#include "causeway/transport/grpc_worker_agent.h"
#include "causeway/transport/proto/session.grpc.pb.h"
#include "causeway/transport/proto/worker.grpc.pb.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace grpc_stalled_head_test {

using ::testing::HasSubstr;

// Holds a call open, reading nothing, until the client cancels it (or the
// test ends: `released`).
void HoldUnread(grpc::ServerContext* context, absl::Notification& released) {
  while (!context->IsCancelled() &&
         !released.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
  }
}

class StalledSessions final : public wire::HeadSessions::Service {
 public:
  explicit StalledSessions(absl::Notification& released)
      : released_(released) {}

  grpc::Status GetVersion(grpc::ServerContext*, const wire::VersionRequest*,
                          wire::VersionResponse* response) override {
    response->set_version(kSessionProtocol.max);
    return grpc::Status::OK;
  }
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<wire::SessionResponse, wire::SessionRequest>*
          stream) override {
    wire::SessionRequest open;
    if (!stream->Read(&open)) return grpc::Status::OK;
    wire::SessionResponse opened;
    opened.set_op_id(open.op_id());
    opened.mutable_opened()->set_session(1);
    opened.mutable_opened()->set_lease_ms(600000);
    stream->Write(opened);
    wire::SessionRequest request;
    if (answer_a_fetch && stream->Read(&request) && request.has_fetch()) {
      // Ready to download: the value waits for GetHostBuffer.
      wire::SessionResponse fetched;
      fetched.set_op_id(request.op_id());
      fetched.mutable_fetched()->set_host_buffer(
          request.fetch().host_buffer());
      stream->Write(fetched);
    }
    HoldUnread(context, released_);
    return grpc::Status::OK;
  }
  // Sends nothing, not even the header, until the call is cancelled.
  grpc::Status GetHostBuffer(
      grpc::ServerContext* context, const wire::HostBufferGet*,
      grpc::ServerWriter<wire::HostBufferData>*) override {
    download_started.Notify();
    HoldUnread(context, released_);
    return grpc::Status::OK;
  }

  // Answer the first request after `open` if it is a fetch.
  bool answer_a_fetch = false;
  absl::Notification download_started;

 private:
  absl::Notification& released_;
};

class StalledWorkers final : public wire::HeadWorkers::Service {
 public:
  explicit StalledWorkers(absl::Notification& released)
      : released_(released) {}

  grpc::Status GetVersion(grpc::ServerContext* context,
                          const wire::VersionRequest*,
                          wire::VersionResponse* response) override {
    if (hold_version) {
      asked.Notify();
      HoldUnread(context, released_);
      return grpc::Status::CANCELLED;
    }
    response->set_version(kWorkerProtocol.max);
    return grpc::Status::OK;
  }
  grpc::Status Worker(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<wire::HeadToWorker, wire::WorkerToHead>* stream)
      override {
    wire::WorkerToHead hello;
    if (!stream->Read(&hello)) return grpc::Status::OK;
    if (hold_registration) {
      asked.Notify();
      HoldUnread(context, released_);
      return grpc::Status::OK;
    }
    wire::HeadToWorker registered;
    registered.mutable_registered()->set_host(0);
    registered.mutable_registered()->set_heartbeat_interval_ms(600000);
    for (int64_t i = 0; i < hello.registration().num_devices(); ++i) {
      wire::DeviceInfo* device = registered.mutable_registered()->add_devices();
      device->set_id(i);
      device->set_index_on_host(i);
      device->set_kind(hello.registration().device_kind());
      device->set_memory_bytes(hello.registration().memory_per_device());
    }
    stream->Write(registered);
    HoldUnread(context, released_);
    return grpc::Status::OK;
  }

  // Never answer the version, or the registration; `asked` once asked.
  bool hold_version = false;
  bool hold_registration = false;
  absl::Notification asked;

 private:
  absl::Notification& released_;
};

class StalledHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&sessions_);
    builder.RegisterService(&workers_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    released_.Notify();
    server_->Shutdown();
  }

  absl::Notification released_;
  StalledSessions sessions_{released_};
  StalledWorkers workers_{released_};
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(StalledHeadTest, ASessionWhoseHeadStopsReadingEndsNamingTheBound) {
  GrpcClientOptions options;
  options.max_queued_request_bytes = 1 << 20;
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection =
      GrpcHeadConnection::Connect(address_, options);
  ASSERT_TRUE(connection.ok()) << connection.status();
  GrpcSessionChannel channel(*connection);
  ASSERT_TRUE(channel.OpenSession({}).AwaitFor(absl::Seconds(30)).ok());
  // Programs of 64 KiB each, which the head never reads: gRPC's and the
  // socket's buffers take some megabytes, then the queue grows to its bound.
  CompileRequest program;
  program.hlo_text = std::string(64 << 10, 'x');
  Future<CompileInfo> first = channel.Compile(program);
  absl::Status refused;
  for (int i = 0; i < 4096 && refused.ok(); ++i) {
    program.handle = ExecutableHandle(i + 1);
    Future<CompileInfo> compiled = channel.Compile(program);
    if (compiled.IsReady()) refused = compiled.AwaitFor(absl::ZeroDuration()).status();
  }
  ASSERT_FALSE(refused.ok()) << "256 MiB of requests were queued unbounded";
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("max_queued_request_bytes"));
  EXPECT_THAT(refused.message(), HasSubstr(address_));
  // What was sent before fails with the same reason, and so does what
  // comes after: nothing waits for a head that is not reading.
  absl::Status earlier = first.AwaitFor(absl::Seconds(30)).status();
  EXPECT_EQ(earlier.code(), absl::StatusCode::kResourceExhausted) << earlier;
  absl::Status later = channel.GetStatus().AwaitFor(absl::Seconds(30)).status();
  EXPECT_EQ(later.code(), absl::StatusCode::kResourceExhausted) << later;
}

// A head lost during a download (here: shut down before it sent the
// value's header) is UNAVAILABLE naming the head, not DATA_LOSS (which an
// elastic training loop reads as a lost slice, waiting for a remap).
TEST_F(StalledHeadTest, AHeadLostDuringADownloadIsUnavailableNamingIt) {
  sessions_.answer_a_fetch = true;
  absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> connection =
      GrpcHeadConnection::Connect(address_, {});
  ASSERT_TRUE(connection.ok()) << connection.status();
  GrpcSessionChannel channel(*connection);
  ASSERT_TRUE(channel.OpenSession({}).AwaitFor(absl::Seconds(30)).ok());
  Future<hlo::Literal> fetched = channel.Fetch(ArrayHandle(3));
  ASSERT_TRUE(sessions_.download_started.WaitForNotificationWithTimeout(
      absl::Seconds(30)));
  server_->Shutdown(std::chrono::system_clock::now());  // Cancels its calls.
  absl::Status status = fetched.AwaitFor(absl::Seconds(30)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("the head at " + address_));
  EXPECT_THAT(status.message(), HasSubstr("downloading host buffer"));
}

TEST_F(StalledHeadTest, AWorkerWhoseHeadStopsReadingEndsNamingTheBound) {
  GrpcWorkerAgentOptions options;
  options.head = address_;
  options.spec = {1, "cpu", int64_t{64} << 20};
  options.max_queued_notice_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<GrpcWorkerAgent>> agent =
      GrpcWorkerAgent::Register(options);
  ASSERT_TRUE(agent.ok()) << agent.status();
  FakeControlChannel worker;
  absl::Status served;
  absl::Notification ended;
  std::thread serving([&] {
    served = (*agent)->Serve(&worker, nullptr, absl::Seconds(1));
    ended.Notify();
  });
  // Completions with long error texts, which the head never reads.
  OpDone done;
  done.device = DeviceId(0);
  done.status = absl::InternalError(std::string(16 << 10, 'e'));
  for (int i = 0; i < 65536 && !ended.HasBeenNotified(); ++i) {
    done.seq = static_cast<uint64_t>(i);
    (*agent)->OnOpDone(done);
  }
  const bool over = ended.WaitForNotificationWithTimeout(absl::Seconds(60));
  if (!over) (*agent)->Stop();
  serving.join();
  ASSERT_TRUE(over) << "1 GiB of notices were queued unbounded";
  EXPECT_EQ(served.code(), absl::StatusCode::kResourceExhausted) << served;
  EXPECT_THAT(served.message(), HasSubstr("max_queued_notice_bytes"));
  EXPECT_THAT(served.message(), HasSubstr(address_));
}

// A worker told to stop while its head does not answer (a cluster stops
// its head before its workers, which are registering again by then) stops
// registering at once, whichever call it waits in, instead of after the
// attempt's connect timeout (here an hour), and says why.
TEST_F(StalledHeadTest, AWorkerToldToStopWhileRegisteringGivesUpAtOnce) {
  for (bool in_version : {true, false}) {
    SCOPED_TRACE(in_version ? "waiting for the version"
                            : "waiting for the registration");
    StalledWorkers workers(released_);
    workers.hold_version = in_version;
    workers.hold_registration = !in_version;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&workers);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);

    absl::Notification stop;
    GrpcWorkerAgentOptions options;
    options.head = "127.0.0.1:" + std::to_string(port);
    options.spec = {1, "cpu", int64_t{64} << 20};
    options.connect_timeout = absl::Hours(1);
    options.stopped = [&stop] { return stop.HasBeenNotified(); };
    std::thread stopper([&] {
      workers.asked.WaitForNotification();
      stop.Notify();
    });
    absl::StatusOr<std::unique_ptr<GrpcWorkerAgent>> agent =
        GrpcWorkerAgent::Register(options);
    stopper.join();
    ASSERT_FALSE(agent.ok());
    EXPECT_EQ(agent.status().code(), absl::StatusCode::kCancelled)
        << agent.status();
    EXPECT_THAT(agent.status().message(),
                HasSubstr("stopped while waiting for the head"));
    EXPECT_THAT(agent.status().message(), HasSubstr(options.head));
    server->Shutdown(std::chrono::system_clock::now());
  }
}

}  // namespace grpc_stalled_head_test
}  // namespace causeway::transport
