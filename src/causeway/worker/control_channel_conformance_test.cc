// The ControlChannel conformance suite: one set of behaviours of the
// head->worker channel, run against the in-process channel and against
// gRPC (a GrpcWorkerServer on loopback, with a GrpcWorkerAgent serving the
// same kind of Worker), so both carry every command the same way.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "causeway/base/executor.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/transport/grpc_head_server.h"
#include "causeway/transport/grpc_worker_agent.h"
#include "causeway/transport/in_process_control_channel.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/worker/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {
namespace control_channel_conformance_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::F32;
using hlo::testutil::Values;
using transport::ControlChannel;
using transport::DeviceBuffer;
using transport::LaunchOp;
using transport::OpDone;
using transport::ProgramId;
using transport::WorkerBatch;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

constexpr char kDouble[] = R"(
HloModule double
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] add(x, x)
}
)";

class RecordingListener : public transport::WorkerListener {
 public:
  void OnOpDone(const OpDone& done) override {
    absl::MutexLock lock(&mu_);
    done_.push_back(done);
  }
  void OnPushFailed(const transport::UndeliveredPiece& piece) override {
    absl::MutexLock lock(&mu_);
    push_failed_.push_back(piece);
  }
  // Waits until a push failure was reported; the first.
  std::optional<transport::UndeliveredPiece> AwaitPushFailed() {
    absl::MutexLock lock(&mu_);
    auto any = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !push_failed_.empty();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&any), kWait)) return {};
    return push_failed_.front();
  }
  void OnWorkerDisconnected(HostId host, absl::Status why) override {
    absl::MutexLock lock(&mu_);
    disconnected_ = why;
    gone_.Notify();
  }
  void OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                     absl::Duration clock_offset) override {
    absl::MutexLock lock(&mu_);
    for (trace::EventRecord& event : events) traced_.push_back(std::move(event));
  }
  // Waits until an OpFinished event of `seq` came; all events so far.
  std::vector<trace::EventRecord> AwaitTracedFinish(uint64_t seq) {
    absl::MutexLock lock(&mu_);
    auto finished = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const trace::EventRecord& r : traced_) {
        if (r.kind == trace::EventRecord::Kind::kOpFinished &&
            std::get<trace::OpEvent>(r.event).seq == seq) {
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&finished), kWait);
    return traced_;
  }
  bool disconnected() {
    absl::MutexLock lock(&mu_);
    return !disconnected_.ok();
  }
  absl::Status AwaitDisconnected() {
    if (!gone_.WaitForNotificationWithTimeout(kWait)) {
      return absl::DeadlineExceededError("never disconnected");
    }
    absl::MutexLock lock(&mu_);
    return disconnected_;
  }
  // Waits until `n` notices came; returns them.
  std::vector<OpDone> AwaitDone(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return done_.size() >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return done_;
  }

 private:
  absl::Mutex mu_;
  std::vector<OpDone> done_ ABSL_GUARDED_BY(mu_);
  std::vector<transport::UndeliveredPiece> push_failed_ ABSL_GUARDED_BY(mu_);
  std::vector<trace::EventRecord> traced_ ABSL_GUARDED_BY(mu_);
  absl::Status disconnected_ ABSL_GUARDED_BY(mu_);
  absl::Notification gone_;
};

// The head's side of membership for the gRPC case: admits one worker as
// host 3 with devices 6 and 7 (ids chosen by the head, not the worker).
class TestMembership : public transport::WorkerMembership {
 public:
  explicit TestMembership(transport::WorkerListener* listener)
      : listener_(listener) {}
  absl::StatusOr<transport::WorkerAdmission> AdmitWorker(
      const transport::WorkerHello& hello) override {
    transport::WorkerAdmission admission;
    admission.host = HostId(3);
    for (int64_t i = 0; i < hello.spec.num_devices; ++i) {
      admission.devices.push_back(transport::DeviceInfo{
          DeviceId(6 + i), admission.host, hello.island, i, hello.spec.kind,
          hello.spec.memory_per_device});
    }
    return admission;
  }
  absl::Status ActivateWorker(
      HostId host, std::shared_ptr<ControlChannel> channel) override {
    absl::MutexLock lock(&mu_);
    channel_ = std::move(channel);
    return absl::OkStatus();
  }
  transport::WorkerListener& listener() override { return *listener_; }

  // Waits until the worker was activated; its channel, or null if it was
  // not within `kWait`. The head sends the worker `registered` before it
  // activates it, so the agent's Register can return before this is set.
  std::shared_ptr<ControlChannel> AwaitChannel() {
    absl::MutexLock lock(&mu_);
    auto activated = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return channel_ != nullptr;
    };
    mu_.AwaitWithTimeout(absl::Condition(&activated), kWait);
    return channel_;
  }

 private:
  transport::WorkerListener* const listener_;
  absl::Mutex mu_;
  std::shared_ptr<ControlChannel> channel_ ABSL_GUARDED_BY(mu_);
};

enum class Transport { kInProcess, kGrpc };

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kInProcess ? "InProcess" : "Grpc";
}

// One worker with two devices, reached through the channel under test.
// Its devices are `device(0)` and `device(1)`.
class ControlChannelTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    std::vector<transport::DeviceInfo> devices;
    HostId host(0);
    if (GetParam() == Transport::kGrpc) {
      membership_ = std::make_unique<TestMembership>(&listener_);
      transport::GrpcHeadServerOptions server_options;
      server_options.workers.key_value_store = &store_;
      absl::StatusOr<std::unique_ptr<transport::GrpcHeadServer>> server =
          transport::GrpcHeadServer::Start(nullptr, membership_.get(),
                                           server_options);
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = *std::move(server);
      transport::GrpcWorkerAgentOptions options;
      options.head = server_->address();
      options.spec = {2, "cpu", int64_t{64} << 20};
      options.name = "test worker";
      absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> agent =
          transport::GrpcWorkerAgent::Register(options);
      ASSERT_TRUE(agent.ok()) << agent.status();
      agent_ = *std::move(agent);
      host = agent_->host();
      devices = agent_->devices();
    } else {
      for (int64_t i = 0; i < 2; ++i) {
        devices.push_back({DeviceId(i), host, IslandId(0), i, "cpu",
                           int64_t{64} << 20});
      }
    }
    WorkerOptions options;
    options.host = host;
    options.island = IslandId(0);
    options.devices = devices;
    options.data_plane = &data_plane_;
    options.collectives = &collectives_;
    options.listener = agent_ != nullptr
                           ? static_cast<transport::WorkerListener*>(agent_.get())
                           : &listener_;
    if (agent_ != nullptr) options.events = &events_;
    absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(options);
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);
    data_plane_.Register(host, worker_.get());
    for (const transport::DeviceInfo& d : devices) devices_.push_back(d.id);
    host_ = host;
    if (agent_ != nullptr) {
      serving_ = std::thread([this] { served_ = agent_->Serve(worker_.get(), &events_,
                                                absl::Milliseconds(10)); });
      channel_ = membership_->AwaitChannel();
      ASSERT_NE(channel_, nullptr) << "the head never activated the worker";
    } else {
      channel_ = std::make_shared<transport::InProcessControlChannel>(
          worker_.get());
    }
  }

  void TearDown() override {
    if (agent_ != nullptr) agent_->Stop();
    if (serving_.joinable()) serving_.join();
    data_plane_.Unregister(host_);
    if (worker_ != nullptr) worker_->Stop();
    agent_.reset();
    channel_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  DeviceId device(int i) const { return devices_[i]; }
  DeviceBuffer Buffer(int i, uint64_t array) const {
    return {device(i), BufferId{ArrayHandle(array), 0}};
  }
  absl::Status Put(int i, uint64_t array, Literal value) {
    return channel_->PutBuffer({device(i), BufferId{ArrayHandle(array), 0},
                                std::move(value)})
        .AwaitFor(kWait);
  }
  absl::Status LoadDouble() {
    transport::LoadProgramRequest request;
    request.program = ProgramId(7);
    request.name = "double";
    request.hlo_text = kDouble;
    return channel_->LoadProgram(std::move(request)).AwaitFor(kWait);
  }
  LaunchOp DoubleOn(int i, uint64_t seq, uint64_t input, uint64_t output) {
    LaunchOp op;
    op.device = device(i);
    op.island = IslandId(0);
    op.seq = seq;
    op.program = ProgramId(7);
    op.program_name = "double";
    op.session = SessionId(1);
    op.session_name = "test";
    op.participant_hosts = {host_};
    op.inputs.push_back(
        {BufferId{ArrayHandle(input), 0}, false, ArrayHandle(input), {}});
    op.outputs.push_back(
        {BufferId{ArrayHandle(output), 0}, Shape(PrimitiveType::kF32, {2})});
    return op;
  }

  RecordingListener listener_;
  transport::InProcessKeyValueStore store_;  // The head's, for gRPC.
  trace::EventBuffer events_;  // The gRPC worker's, sent to the head.
  transport::InProcessDataPlane data_plane_;
  transport::InProcessLaunchCollectives collectives_;
  std::unique_ptr<TestMembership> membership_;
  std::unique_ptr<transport::GrpcHeadServer> server_;
  std::unique_ptr<transport::GrpcWorkerAgent> agent_;
  std::unique_ptr<Worker> worker_;
  std::thread serving_;
  absl::Status served_;
  std::shared_ptr<ControlChannel> channel_;
  std::vector<DeviceId> devices_;
  HostId host_;
};

TEST_P(ControlChannelTest, LoadsAProgramFromItsTextAndRefusesAMalformedOne) {
  EXPECT_TRUE(LoadDouble().ok());
  transport::LoadProgramRequest bad;
  bad.program = ProgramId(8);
  bad.name = "bad";
  bad.hlo_text = "HloModule bad\nENTRY e {\n  x = f32[2 parameter(0)\n}\n";
  absl::Status status = channel_->LoadProgram(std::move(bad)).AwaitFor(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST_P(ControlChannelTest, AValueLargerThanAChunkIsPutAndFetchedExactly) {
  Literal big(Shape(PrimitiveType::kF32, {700001}));
  std::span<float> data = big.mutable_data<float>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  ASSERT_TRUE(Put(1, 5, big).ok());
  absl::StatusOr<Literal> back = channel_->FetchBuffer(Buffer(1, 5)).AwaitFor(kWait);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, big);
}

TEST_P(ControlChannelTest, ADispatchedLaunchRunsAndItsOpDoneComesBack) {
  ASSERT_TRUE(LoadDouble().ok());
  ASSERT_TRUE(Put(0, 1, F32({2}, {1.5, 4})).ok());
  WorkerBatch batch;
  batch.launches.push_back(DoubleOn(0, 11, 1, 2));
  batch.launches.push_back(DoubleOn(0, 12, 2, 3));
  channel_->Dispatch(std::move(batch));
  ASSERT_TRUE(channel_->AwaitBuffers({Buffer(0, 2), Buffer(0, 3)})
                  .AwaitFor(kWait)
                  .ok());
  absl::StatusOr<Literal> y = channel_->FetchBuffer(Buffer(0, 3)).AwaitFor(kWait);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(Values(*y), ElementsAre(6, 16));
  std::vector<OpDone> done = listener_.AwaitDone(2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].host, host_);
  EXPECT_EQ(done[0].device, device(0));
  EXPECT_EQ(done[0].seq, 11u);
  EXPECT_EQ(done[1].seq, 12u);
  EXPECT_TRUE(done[1].status.ok()) << done[1].status;
}

TEST_P(ControlChannelTest, AnAbandonedLaunchFailsItsOutputsWithItsStatus) {
  ASSERT_TRUE(LoadDouble().ok());
  ASSERT_TRUE(Put(0, 1, F32({2}, {1, 2})).ok());
  LaunchOp op = DoubleOn(0, 1, 1, 2);
  op.abandoned = absl::DataLossError("host 9 was lost before dispatch");
  WorkerBatch batch;
  batch.launches.push_back(std::move(op));
  channel_->Dispatch(std::move(batch));
  absl::Status status = channel_->AwaitBuffers({Buffer(0, 2)}).AwaitFor(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("host 9"));
  std::vector<OpDone> done = listener_.AwaitDone(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kDataLoss);
}

TEST_P(ControlChannelTest, AReleasedBufferCannotBeFetched) {
  ASSERT_TRUE(Put(0, 4, F32({2}, {1, 2})).ok());
  channel_->ReleaseBuffers({Buffer(0, 4)});
  absl::Status status =
      channel_->FetchBuffer(Buffer(0, 4)).AwaitFor(kWait).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
}

TEST_P(ControlChannelTest, PeerLostFailsAReceiveWaitingOnThatHost) {
  WorkerBatch batch;
  batch.receives.push_back(transport::ReceiveSpec{
      device(1), BufferId{ArrayHandle(20), 0}, Shape(PrimitiveType::kF32, {2}),
      {transport::PieceOrigin{4, DeviceId(40), HostId(20), "device 40"}},
      {},
      true});
  channel_->Dispatch(std::move(batch));
  Future<> waiting = channel_->AwaitBuffers({Buffer(1, 20)});
  channel_->PeerLost(HostId(20), absl::DataLossError("host 20 died"));
  absl::Status status = waiting.AwaitFor(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
}

TEST_P(ControlChannelTest, FailBuffersFailsAReceiveWithThePiecesStatus) {
  WorkerBatch batch;
  batch.receives.push_back(transport::ReceiveSpec{
      device(1), BufferId{ArrayHandle(21), 0}, Shape(PrimitiveType::kF32, {2}),
      {transport::PieceOrigin{5, DeviceId(40), HostId(20), "device 40"}},
      {},
      true});
  channel_->Dispatch(std::move(batch));
  Future<> waiting = channel_->AwaitBuffers({Buffer(1, 21)});
  channel_->FailBuffers({transport::UndeliveredPiece{
      5, HostId(20), DeviceId(40), host_, Buffer(1, 21),
      absl::DataLossError("transfer 5 was not delivered: refused")}});
  absl::Status status = waiting.AwaitFor(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("transfer 5 was not delivered"));
}

TEST_P(ControlChannelTest, APieceThatCannotBePushedIsReportedToTheHead) {
  ASSERT_TRUE(Put(0, 30, F32({2}, {1, 2})).ok());
  WorkerBatch batch;
  // Host 20 is on no data plane: the push fails at once.
  batch.sends.push_back(transport::SendSpec{
      9, device(0), BufferId{ArrayHandle(30), 0}, transport::Box{{0}, {2}},
      true, HostId(20), DeviceId(40), BufferId{ArrayHandle(31), 0}, {0}});
  channel_->Dispatch(std::move(batch));
  std::optional<transport::UndeliveredPiece> piece =
      listener_.AwaitPushFailed();
  ASSERT_TRUE(piece.has_value());
  EXPECT_EQ(piece->transfer_id, 9u);
  EXPECT_EQ(piece->source_host, host_);
  EXPECT_EQ(piece->destination_host, HostId(20));
  EXPECT_EQ(piece->destination.device, DeviceId(40));
  EXPECT_EQ(piece->destination.buffer, (BufferId{ArrayHandle(31), 0}));
  EXPECT_FALSE(piece->status.ok());
}

TEST_P(ControlChannelTest, CancelSessionFailsItsQueuedLaunches) {
  ASSERT_TRUE(LoadDouble().ok());
  WorkerBatch batch;
  // Its input comes from a host that never sends: it waits in the queue.
  batch.receives.push_back(transport::ReceiveSpec{
      device(0), BufferId{ArrayHandle(30), 0}, Shape(PrimitiveType::kF32, {2}),
      {transport::PieceOrigin{4, DeviceId(40), HostId(20), "device 40"}},
      {},
      true});
  batch.launches.push_back(DoubleOn(0, 1, 30, 31));
  channel_->Dispatch(std::move(batch));
  channel_->CancelSession(SessionId(1), absl::CancelledError("session 1 closed"));
  absl::Status status = channel_->AwaitBuffers({Buffer(0, 31)}).AwaitFor(kWait);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
}

TEST_P(ControlChannelTest, HeartbeatsAndStatusAnswerWhileTheWorkerRuns) {
  EXPECT_TRUE(channel_->Heartbeat().AwaitFor(kWait).ok());
  ASSERT_TRUE(Put(1, 9, F32({2}, {1, 2})).ok());
  absl::StatusOr<transport::WorkerStatus> status =
      channel_->GetStatus().AwaitFor(kWait);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->host, host_);
  ASSERT_EQ(status->devices.size(), 2u);
  EXPECT_EQ(status->devices[1].device, device(1));
  EXPECT_EQ(status->devices[1].memory.num_ready, 1);
}

TEST_P(ControlChannelTest, AStoppedWorkerAnswersUnavailable) {
  worker_->Stop();
  EXPECT_EQ(channel_->Heartbeat().AwaitFor(kWait).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Put(0, 1, F32({2}, {1, 2})).code(), absl::StatusCode::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(Transports, ControlChannelTest,
                         ::testing::Values(Transport::kInProcess,
                                           Transport::kGrpc),
                         TransportName);

// gRPC only: the stream itself breaking.
class GrpcControlChannelTest : public ControlChannelTest {};

TEST_P(GrpcControlChannelTest, ABrokenStreamFailsWhatIsPendingAndTellsTheHead) {
  ASSERT_TRUE(LoadDouble().ok());
  // A launch that waits forever for its input, and a fetch of its output.
  WorkerBatch batch;
  batch.receives.push_back(transport::ReceiveSpec{
      device(0), BufferId{ArrayHandle(30), 0}, Shape(PrimitiveType::kF32, {2}),
      {transport::PieceOrigin{4, DeviceId(40), HostId(20), "device 40"}},
      {},
      true});
  batch.launches.push_back(DoubleOn(0, 1, 30, 31));
  channel_->Dispatch(std::move(batch));
  Future<Literal> fetch = channel_->FetchBuffer(Buffer(0, 31));
  // Runs where the fetch fails: by then the head must know the host is gone
  // (so that it reports the fetch as a lost host's).
  // The callback may run after AwaitFor below has returned (the completing
  // thread wakes waiters first): it owns what it writes.
  struct Told {
    absl::Notification ran;
    std::atomic<bool> head_knew{false};
  };
  auto told = std::make_shared<Told>();
  fetch.OnReady(InlineExecutor::Instance(),
                [told, listener = &listener_](const absl::StatusOr<Literal>&) {
                  told->head_knew = listener->disconnected();
                  told->ran.Notify();
                });
  agent_->Stop();  // As if the worker process died: its stream breaks.
  absl::Status status = fetch.AwaitFor(kWait).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  ASSERT_TRUE(told->ran.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(told->head_knew.load());
  absl::Status gone = listener_.AwaitDisconnected();
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable) << gone;
  EXPECT_THAT(gone.message(), HasSubstr("test worker"));
  // Later calls fail at once.
  EXPECT_EQ(channel_->Heartbeat().AwaitFor(kWait).code(),
            absl::StatusCode::kUnavailable);
}

TEST_P(GrpcControlChannelTest, TheWorkersTraceEventsReachTheHead) {
  ASSERT_TRUE(LoadDouble().ok());
  ASSERT_TRUE(Put(0, 1, F32({2}, {1, 2})).ok());
  WorkerBatch batch;
  batch.launches.push_back(DoubleOn(0, 5, 1, 2));
  channel_->Dispatch(std::move(batch));
  // A heartbeat first, so that the head has measured the clock offset.
  ASSERT_TRUE(channel_->Heartbeat().AwaitFor(kWait).ok());
  std::vector<trace::EventRecord> events = listener_.AwaitTracedFinish(5);
  bool started = false, finished = false;
  for (const trace::EventRecord& record : events) {
    const auto* op = std::get_if<trace::OpEvent>(&record.event);
    if (op == nullptr || op->seq != 5) continue;
    EXPECT_EQ(op->device, device(0));
    EXPECT_EQ(op->program, "double");
    started |= record.kind == trace::EventRecord::Kind::kOpStarted;
    finished |= record.kind == trace::EventRecord::Kind::kOpFinished;
  }
  EXPECT_TRUE(started);
  EXPECT_TRUE(finished);
}

TEST_P(GrpcControlChannelTest, TheWorkerReachesTheHeadsKeyValueStore) {
  transport::KeyValueStore& store = agent_->key_value_store();
  ASSERT_TRUE(store.Set("gloo/a", "one").AwaitFor(kWait).ok());
  EXPECT_EQ(store_.Keys("gloo/"), std::vector<std::string>{"gloo/a"});
  absl::StatusOr<std::string> value =
      store.Get("gloo/a", absl::Now() + kWait).AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "one");
  // A Get waits for a key that someone else sets later.
  Future<std::string> waiting = store.Get("gloo/b", absl::Now() + kWait);
  ASSERT_TRUE(store_.Set("gloo/b", std::string("\0two", 4)).AwaitFor(kWait).ok());
  value = waiting.AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, std::string("\0two", 4));
  ASSERT_TRUE(store.DeletePrefix("gloo/").AwaitFor(kWait).ok());
  EXPECT_TRUE(store_.Keys("gloo/").empty());
}

TEST_P(GrpcControlChannelTest, KeyValueErrorsComeBackToTheCaller) {
  transport::KeyValueStore& store = agent_->key_value_store();
  absl::Status missing =
      store.Get("nobody/sets/this", absl::Now() + absl::Milliseconds(20))
          .AwaitFor(kWait)
          .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kDeadlineExceeded) << missing;
  absl::Status too_long =
      store.Set(std::string(transport::KeyValueStore::kMaxKeyBytes + 1, 'k'), "v")
          .AwaitFor(kWait);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument) << too_long;
  // The stream goes on.
  EXPECT_TRUE(store.Set("k", "v").AwaitFor(kWait).ok());
}

TEST_P(GrpcControlChannelTest, AKeyValueCallPendingWhenTheStreamEndsFails) {
  Future<std::string> waiting =
      agent_->key_value_store().Get("never", absl::Now() + absl::Minutes(5));
  // The Get is with the head before the stream ends.
  ASSERT_TRUE(agent_->key_value_store().Set("k", "v").AwaitFor(kWait).ok());
  agent_->Stop();
  absl::Status status = waiting.AwaitFor(kWait).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(agent_->key_value_store().Set("k", "v").AwaitFor(kWait).code(),
            absl::StatusCode::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(Grpc, GrpcControlChannelTest,
                         ::testing::Values(Transport::kGrpc), TransportName);

}  // namespace control_channel_conformance_test
}  // namespace causeway::worker
