#include "causeway/worker/worker.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "causeway/transport/gloo_launch_collectives.h"
#include "causeway/transport/in_process_control_channel.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::worker {

using transport::Box;
using transport::DeviceStatus;
using transport::GlooLaunchCollectives;
using transport::InProcessDataPlane;
using transport::InProcessKeyValueStore;
using transport::InProcessLaunchCollectives;
using transport::LaunchOp;
using transport::LoadProgramRequest;
using transport::DeviceBuffer;
using transport::OpDone;
using transport::PieceHeader;
using transport::PieceMessage;
using transport::PieceOrigin;
using transport::PieceWriter;
using transport::ProgramId;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::Topology;
using transport::UndeliveredPiece;
using transport::WorkerBatch;
using transport::WorkerListener;
namespace worker_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::testutil::F32;
using hlo::testutil::Values;

// Sums x over both partitions, and returns x + partition id.
constexpr char kAllReduce[] = R"(
HloModule sum2, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[2] broadcast(pf), dimensions={}
  y = f32[2] add(x, b)
  ROOT t = (f32[2], f32[2]) tuple(r, y)
}
)";

constexpr char kDouble[] = R"(
HloModule double
ENTRY main {
  x = f32[2] parameter(0)
  ROOT y = f32[2] add(x, x)
}
)";

class RecordingListener : public WorkerListener {
 public:
  void OnOpDone(const OpDone& done) override {
    absl::MutexLock lock(&mu_);
    done_.push_back(done);
  }
  void OnWorkerDisconnected(HostId, absl::Status) override {}
  void OnTraceEvents(HostId, std::vector<trace::EventRecord>,
                     absl::Duration) override {}
  std::vector<OpDone> done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  void OnPushFailed(const UndeliveredPiece& piece) override {
    absl::MutexLock lock(&mu_);
    undelivered_.push_back(piece);
  }
  // The first failed push, once there is one (nullopt after 30 s).
  std::optional<UndeliveredPiece> AwaitPushFailure() {
    absl::MutexLock lock(&mu_);
    auto some = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !undelivered_.empty();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&some), absl::Seconds(30))) {
      return std::nullopt;
    }
    return undelivered_.front();
  }

 private:
  absl::Mutex mu_;
  std::vector<OpDone> done_;
  std::vector<UndeliveredPiece> undelivered_;
};

// One island, two hosts with two devices each: host 0 has devices 0 and 1,
// host 1 has devices 2 and 3.
class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeWorkers(int64_t{1} << 20); }

  void MakeWorkers(int64_t memory_per_device) {
    for (auto& worker : workers_) worker->Stop();
    workers_.clear();
    gloo_.clear();
    auto topology = Topology::Uniform(1, 2, 2, memory_per_device);
    ASSERT_TRUE(topology.ok()) << topology.status();
    topology_ = std::make_unique<Topology>(*topology);
    data_plane_ = std::make_unique<InProcessDataPlane>();
    collectives_ = std::make_unique<InProcessLaunchCollectives>();
    for (int64_t h = 0; h < 2; ++h) {
      WorkerOptions options;
      options.host = HostId(h);
      options.island = IslandId(0);
      for (DeviceId d : topology_->DevicesOfHost(HostId(h))) {
        options.devices.push_back(topology_->device(d));
        if (sim_.has_value()) options.devices.back().kind = "sim";
      }
      options.sim = sim_;
      options.data_plane = data_plane_.get();
      options.collectives = collectives_.get();
      if (over_gloo_) {
        // Each host is its own "process": launches over both hosts meet
        // through Gloo.
        auto gloo = GlooLaunchCollectives::Create(
            {.store = &store_,
             .local_devices = {topology_->DevicesOfHost(HostId(h)).begin(),
                               topology_->DevicesOfHost(HostId(h)).end()},
             .timeout = absl::Seconds(20)});
        ASSERT_TRUE(gloo.ok()) << gloo.status();
        gloo_.push_back(*std::move(gloo));
        options.collectives = gloo_.back().get();
      }
      options.listener = &listener_;
      auto worker = Worker::Create(options);
      ASSERT_TRUE(worker.ok()) << worker.status();
      data_plane_->Register(HostId(h), worker->get());
      workers_.push_back(*std::move(worker));
    }
  }

  void TearDown() override {
    for (auto& worker : workers_) {
      data_plane_->Unregister(worker->host());
      worker->Stop();
    }
    workers_.clear();
    gloo_.clear();
  }

  Worker& worker(int64_t host) { return *workers_[host]; }

  // Set before MakeWorkers: sim devices with this model.
  std::optional<SimModel> sim_;

  void Load(int64_t host, ProgramId id, const char* text) {
    auto module = hlo::ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status();
    LoadProgramRequest request;
    request.program = id;
    request.module = std::shared_ptr<const hlo::Module>(std::move(*module));
    ASSERT_TRUE(worker(host).LoadProgram(std::move(request)).Await().ok());
  }

  void Put(int64_t device, uint64_t array, int64_t shard, Literal value) {
    const int64_t host = device / 2;
    ASSERT_TRUE(worker(host)
                    .PutBuffer({DeviceId(device),
                                BufferId{ArrayHandle(array), shard},
                                std::move(value)})
                    .Await()
                    .ok());
  }

  absl::StatusOr<Literal> Fetch(int64_t device, uint64_t array,
                                int64_t shard) {
    return worker(device / 2)
        .FetchBuffer({DeviceId(device), BufferId{ArrayHandle(array), shard}})
        .AwaitFor(absl::Seconds(30));
  }

  // Announces on `device` a receive of array `array` (shard 0) of `shape`
  // from `origins`.
  void Receive(int64_t device, uint64_t array, const Shape& shape,
               std::vector<PieceOrigin> origins, bool whole) {
    WorkerBatch batch;
    batch.receives.push_back(ReceiveSpec{DeviceId(device),
                                         BufferId{ArrayHandle(array), 0}, shape,
                                         std::move(origins), {}, whole});
    worker(device / 2).Dispatch(std::move(batch));
  }

  // A piece of transfer `transfer` from device `source` to array `array`
  // (shard 0) on `device`.
  static PieceMessage Piece(uint64_t transfer, int64_t source, int64_t device,
                            uint64_t array, std::vector<int64_t> offsets,
                            absl::StatusOr<Literal> data) {
    PieceMessage piece;
    piece.transfer_id = transfer;
    piece.source_device = DeviceId(source);
    piece.source_host = HostId(source / 2);
    piece.destination_device = DeviceId(device);
    piece.destination = BufferId{ArrayHandle(array), 0};
    piece.offsets = std::move(offsets);
    piece.data = std::move(data);
    return piece;
  }

  static PieceHeader HeaderOf(const PieceMessage& piece, const Shape& shape) {
    PieceHeader header;
    header.transfer_id = piece.transfer_id;
    header.source_device = piece.source_device;
    header.source_host = piece.source_host;
    header.destination_device = piece.destination_device;
    header.destination = piece.destination;
    header.offsets = piece.offsets;
    header.whole = piece.whole;
    header.shape = shape;
    return header;
  }

  std::vector<std::string> PendingReceives(int64_t host) {
    auto status = worker(host).GetStatus().Await();
    CW_CHECK(status.ok()) << status.status();
    return status->pending_receives;
  }

  static LaunchOp Launch(int64_t device, uint64_t seq, ProgramId program,
                         std::string name, int64_t partition,
                         int64_t partitions, std::vector<uint64_t> inputs,
                         std::vector<uint64_t> outputs, Shape shape,
                         int64_t shard) {
    LaunchOp op;
    op.device = DeviceId(device);
    op.island = IslandId(0);
    op.seq = seq;
    op.program = program;
    op.program_name = std::move(name);
    op.partition = partition;
    op.num_partitions = partitions;
    // The launch's devices are consecutive, this one at `partition`.
    for (int64_t p = 0; p < partitions; ++p) {
      op.devices.push_back(DeviceId(device - partition + p));
    }
    op.participant_hosts = {HostId(device / 2)};
    for (uint64_t input : inputs) {
      op.inputs.push_back(
          {BufferId{ArrayHandle(input), shard}, false, ArrayHandle(input), {}});
    }
    for (uint64_t output : outputs) {
      op.outputs.push_back({BufferId{ArrayHandle(output), shard}, shape});
    }
    return op;
  }

  std::unique_ptr<Topology> topology_;
  std::unique_ptr<InProcessDataPlane> data_plane_;
  bool over_gloo_ = false;
  InProcessKeyValueStore store_;
  std::unique_ptr<InProcessLaunchCollectives> collectives_;
  std::vector<std::unique_ptr<GlooLaunchCollectives>> gloo_;  // By host.
  RecordingListener listener_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

// Each host with its own GlooLaunchCollectives, as two worker processes
// have them.
class WorkerOverGlooTest : public WorkerTest {
 protected:
  void SetUp() override {
    over_gloo_ = true;
    MakeWorkers(int64_t{1} << 20);
  }

  // Launch `seq` of sum2 over device 1 (host 0) and device 2 (host 1),
  // reading array `input` and writing arrays `input + 1` and `input + 2`.
  void DispatchSumOverBothHosts(uint64_t seq, uint64_t input) {
    const Shape f2(PrimitiveType::kF32, {2});
    for (int64_t p = 0; p < 2; ++p) {
      LaunchOp op = Launch(1 + p, seq, ProgramId(1), "sum2", p, 2, {input},
                           {input + 1, input + 2}, f2, p);
      op.devices = {DeviceId(1), DeviceId(2)};
      op.participant_hosts = {HostId(0), HostId(1)};
      WorkerBatch batch;
      batch.launches.push_back(std::move(op));
      worker(p).Dispatch(std::move(batch));
    }
  }
};

TEST_F(WorkerOverGlooTest, ALaunchOverTwoHostsMeetsInItsAllReduce) {
  Load(0, ProgramId(1), kAllReduce);
  Load(1, ProgramId(1), kAllReduce);
  Put(1, 1, 0, F32({2}, {1, 2}));
  Put(2, 1, 1, F32({2}, {10, 20}));
  DispatchSumOverBothHosts(1, 1);
  for (int64_t p = 0; p < 2; ++p) {
    auto sum = Fetch(1 + p, 2, p);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_THAT(Values(*sum), ElementsAre(11, 22));
  }
  EXPECT_EQ(gloo_[0]->NumLive() + gloo_[1]->NumLive(), 0);
}

TEST_F(WorkerOverGlooTest, APartitionWhoseInputFailedFailsItsPeerOnTheOtherHost) {
  Load(0, ProgramId(1), kAllReduce);
  Load(1, ProgramId(1), kAllReduce);
  Put(2, 50, 1, F32({2}, {1, 2}));  // Shard 0 (device 1) is missing.
  DispatchSumOverBothHosts(1, 50);
  auto peer = Fetch(2, 51, 1);
  EXPECT_EQ(peer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(peer.status().message(), HasSubstr("array 50 shard 0"));
  EXPECT_EQ(gloo_[0]->NumLive() + gloo_[1]->NumLive(), 0);
}

TEST_F(WorkerTest, TwoDevicesOfALaunchMeetInTheirAllReduce) {
  Load(0, ProgramId(1), kAllReduce);
  Put(0, 1, 0, F32({2}, {1, 2}));
  Put(1, 1, 1, F32({2}, {10, 20}));
  WorkerBatch batch;
  const Shape f2(PrimitiveType::kF32, {2});
  for (int64_t p = 0; p < 2; ++p) {
    batch.launches.push_back(
        Launch(p, 1, ProgramId(1), "sum2", p, 2, {1}, {2, 3}, f2, p));
  }
  worker(0).Dispatch(std::move(batch));
  for (int64_t p = 0; p < 2; ++p) {
    auto sum = Fetch(p, 2, p);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_THAT(Values(*sum), ElementsAre(11, 22));
  }
  auto shifted = Fetch(1, 3, 1);
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  EXPECT_THAT(Values(*shifted), ElementsAre(11, 21));
  EXPECT_EQ(collectives_->NumLive(), 0);
}

TEST_F(WorkerTest, SimDevicesMeetInTheirAllReduceAndWriteZerosOfTheOutputShapes) {
  sim_ = SimModel{.program_time = absl::Milliseconds(1)};
  MakeWorkers(int64_t{1} << 20);
  Load(0, ProgramId(1), kAllReduce);
  Put(0, 1, 0, F32({2}, {1, 2}));
  Put(1, 1, 1, F32({2}, {10, 20}));
  WorkerBatch batch;
  const Shape f2(PrimitiveType::kF32, {2});
  for (int64_t p = 0; p < 2; ++p) {
    batch.launches.push_back(
        Launch(p, 1, ProgramId(1), "sum2", p, 2, {1}, {2, 3}, f2, p));
  }
  worker(0).Dispatch(std::move(batch));
  for (int64_t p = 0; p < 2; ++p) {
    for (uint64_t array : {2, 3}) {
      auto value = Fetch(p, array, p);
      ASSERT_TRUE(value.ok()) << value.status();
      EXPECT_THAT(Values(*value), ElementsAre(0, 0));
    }
  }
  // Its outputs took their real size from the device's budget.
  auto status = worker(0).GetStatus().Await();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->devices[0].memory.used_bytes, 3 * f2.ByteSize());
  EXPECT_EQ(collectives_->NumLive(), 0);
}

TEST_F(WorkerTest, ADeviceKindThatDisagreesWithTheSimModelIsRefused) {
  WorkerOptions options;
  options.host = HostId(0);
  options.devices = {topology_->device(DeviceId(0))};
  options.data_plane = data_plane_.get();
  options.collectives = collectives_.get();
  options.sim = SimModel();  // The device is a cpu device.
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(options);
  EXPECT_EQ(worker.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(worker.status().message(), HasSubstr("of kind 'cpu'"));
}

TEST_F(WorkerTest, ConsumerOnAnotherHostIsEnqueuedBeforeItsProducerRuns) {
  Load(0, ProgramId(2), kDouble);
  Load(1, ProgramId(2), kDouble);
  const Shape f2(PrimitiveType::kF32, {2});
  // Host 1 first: receive array 11 on device 2, then double it into 12.
  WorkerBatch consumer;
  consumer.receives.push_back(ReceiveSpec{
      DeviceId(2), BufferId{ArrayHandle(11), 0}, f2,
      {PieceOrigin{7, DeviceId(0), HostId(0), "device 0"}}, {}, true});
  LaunchOp twice =
      Launch(2, 1, ProgramId(2), "double", 0, 1, {11}, {12}, f2, 0);
  twice.inputs[0].release_after_use = true;
  consumer.launches.push_back(twice);
  worker(1).Dispatch(std::move(consumer));
  // Host 0: the producer (array 10 doubled) pushes straight into array 11.
  Put(0, 9, 0, F32({2}, {1, 2}));
  WorkerBatch producer;
  producer.launches.push_back(
      Launch(0, 2, ProgramId(2), "double", 0, 1, {9}, {10}, f2, 0));
  producer.sends.push_back(SendSpec{
      7, DeviceId(0), BufferId{ArrayHandle(10), 0}, Box{{0}, {2}}, true,
      HostId(1), DeviceId(2), BufferId{ArrayHandle(11), 0}, {0}});
  worker(0).Dispatch(std::move(producer));
  auto result = Fetch(2, 12, 0);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Values(*result), ElementsAre(4, 8));
}

TEST_F(WorkerTest, PiecesOfTwoSourceShardsAssembleOneDestinationBuffer) {
  Put(0, 20, 0, F32({2}, {1, 2}));
  Put(1, 20, 1, F32({2}, {3, 4}));
  const Shape f4(PrimitiveType::kF32, {4});
  WorkerBatch receive;
  receive.receives.push_back(
      ReceiveSpec{DeviceId(3), BufferId{ArrayHandle(21), 0}, f4,
                  {PieceOrigin{1, DeviceId(0), HostId(0), ""},
                   PieceOrigin{2, DeviceId(1), HostId(0), ""}},
                  {}, false});
  worker(1).Dispatch(std::move(receive));
  WorkerBatch sends;
  for (int64_t shard = 0; shard < 2; ++shard) {
    sends.sends.push_back(SendSpec{
        static_cast<uint64_t>(shard + 1), DeviceId(shard),
        BufferId{ArrayHandle(20), shard}, Box{{0}, {2}}, false, HostId(1),
        DeviceId(3), BufferId{ArrayHandle(21), 0}, {2 * shard}});
  }
  worker(0).Dispatch(std::move(sends));
  auto gathered = Fetch(3, 21, 0);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_THAT(Values(*gathered), ElementsAre(1, 2, 3, 4));
}

TEST_F(WorkerTest, AFailingLaunchFailsItsDependantsAndNothingElse) {
  Load(0, ProgramId(2), kDouble);
  const Shape f2(PrimitiveType::kF32, {2});
  Put(0, 30, 0, F32({3}, {1, 2, 3}));  // Wrong shape for 'double'.
  Put(0, 40, 0, F32({2}, {5, 6}));
  WorkerBatch batch;
  batch.launches.push_back(
      Launch(0, 1, ProgramId(2), "double", 0, 1, {30}, {31}, f2, 0));
  batch.launches.push_back(
      Launch(0, 2, ProgramId(2), "double", 0, 1, {31}, {32}, f2, 0));
  batch.launches.push_back(
      Launch(0, 3, ProgramId(2), "double", 0, 1, {40}, {41}, f2, 0));
  worker(0).Dispatch(std::move(batch));
  auto failed = Fetch(0, 31, 0);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(failed.status().message(), HasSubstr("program 'double'"));
  auto dependant = Fetch(0, 32, 0);
  EXPECT_EQ(dependant.status(), failed.status());
  auto independent = Fetch(0, 41, 0);
  ASSERT_TRUE(independent.ok()) << independent.status();
  EXPECT_THAT(Values(*independent), ElementsAre(10, 12));
}

TEST_F(WorkerTest, APartitionWhoseInputFailedCancelsItsPeersCollective) {
  Load(0, ProgramId(1), kAllReduce);
  Put(1, 50, 1, F32({2}, {1, 2}));
  WorkerBatch batch;
  const Shape f2(PrimitiveType::kF32, {2});
  for (int64_t p = 0; p < 2; ++p) {
    batch.launches.push_back(
        Launch(p, 1, ProgramId(1), "sum2", p, 2, {50}, {51, 52}, f2, p));
  }
  worker(0).Dispatch(std::move(batch));  // Shard 0 of array 50 is missing.
  auto peer = Fetch(1, 51, 1);
  EXPECT_EQ(peer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(peer.status().message(), HasSubstr("array 50 shard 0"));
  EXPECT_EQ(collectives_->NumLive(), 0);
}

TEST_F(WorkerTest, AnOutputThatCanNeverFitFailsWithResourceExhausted) {
  MakeWorkers(64);
  Load(0, ProgramId(2), kDouble);
  Put(0, 60, 0, F32({2}, {1, 2}));
  WorkerBatch batch;
  LaunchOp op = Launch(0, 1, ProgramId(2), "double", 0, 1, {60}, {61},
                       Shape(PrimitiveType::kF32, {2}), 0);
  op.outputs[0].shape = Shape(PrimitiveType::kF32, {100});
  batch.launches.push_back(op);
  worker(0).Dispatch(std::move(batch));
  auto result = Fetch(0, 61, 0);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("400 bytes"));
}

TEST_F(WorkerTest, AQueuedLaunchWaitsForMemoryUntilABufferIsReleased) {
  MakeWorkers(24);  // Room for three f32[2] buffers.
  Load(0, ProgramId(2), kDouble);
  Put(0, 70, 0, F32({2}, {1, 2}));
  Put(0, 71, 0, F32({2}, {3, 4}));
  WorkerBatch batch;
  const Shape f2(PrimitiveType::kF32, {2});
  batch.launches.push_back(
      Launch(0, 1, ProgramId(2), "double", 0, 1, {70}, {72}, f2, 0));
  batch.launches.push_back(
      Launch(0, 2, ProgramId(2), "double", 0, 1, {71}, {73}, f2, 0));
  worker(0).Dispatch(std::move(batch));
  // Outputs are reserved at enqueue: the second one waits for memory.
  auto status = worker(0).GetStatus().Await();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->devices[0].memory.num_waiting, 1);
  ASSERT_TRUE(Fetch(0, 72, 0).ok());
  worker(0).ReleaseBuffers({{DeviceId(0), BufferId{ArrayHandle(70), 0}}});
  auto second = Fetch(0, 73, 0);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Values(*second), ElementsAre(6, 8));
}

TEST_F(WorkerTest, StatusNamesTheInputAQueuedLaunchWaitsFor) {
  Load(1, ProgramId(2), kDouble);
  const Shape f2(PrimitiveType::kF32, {2});
  WorkerBatch batch;
  LaunchOp op = Launch(2, 5, ProgramId(2), "double", 0, 1, {80}, {81}, f2, 0);
  // Staged: a transfer from device 0 fills its input.
  op.staging.push_back(ReceiveSpec{
      DeviceId(2), BufferId{ArrayHandle(80), 0}, f2,
      {PieceOrigin{1, DeviceId(0), HostId(0), "device 0 (host 0)"}}, {}, true});
  op.inputs[0].release_after_use = true;
  op.inputs[0].array = ArrayHandle(3);
  op.inputs[0].producer =
      std::make_shared<const std::string>("output 0 of 'double'");
  batch.launches.push_back(op);
  worker(1).Dispatch(std::move(batch));
  auto status = worker(1).GetStatus().Await();
  ASSERT_TRUE(status.ok());
  const DeviceStatus& device = status->devices[0];
  EXPECT_FALSE(device.running.has_value());
  ASSERT_EQ(device.queued.size(), 1u);
  EXPECT_EQ(device.queued[0].seq, 5u);
  EXPECT_THAT(device.queued[0].waiting_for,
              ElementsAre("array 80 shard 0 <- transfer of array 3 (output 0 "
                          "of 'double') from device 0 (host 0)"));
  ASSERT_EQ(status->pending_receives.size(), 1u);
  EXPECT_THAT(status->pending_receives[0], HasSubstr("device 0 (host 0)"));
}

TEST_F(WorkerTest, LosingAPeerFailsReceivesThatWaitForItsData) {
  Load(1, ProgramId(2), kDouble);
  const Shape f2(PrimitiveType::kF32, {2});
  WorkerBatch batch;
  batch.receives.push_back(ReceiveSpec{
      DeviceId(2), BufferId{ArrayHandle(90), 0}, f2,
      {PieceOrigin{1, DeviceId(0), HostId(0), ""}}, {}, true});
  batch.launches.push_back(
      Launch(2, 1, ProgramId(2), "double", 0, 1, {90}, {91}, f2, 0));
  worker(1).Dispatch(std::move(batch));
  worker(1).PeerLost(HostId(0), absl::DataLossError("host 0 was lost"));
  auto result = Fetch(2, 91, 0);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("host 0 was lost"));
}

TEST_F(WorkerTest, AStoppedWorkerLosesItsBuffersAndRefusesCalls) {
  Put(0, 100, 0, F32({2}, {1, 2}));
  worker(0).Stop();
  EXPECT_EQ(worker(0).Heartbeat().Await().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Fetch(0, 100, 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(worker(1).Heartbeat().Await().ok());
}

TEST_F(WorkerTest, APushThatFailsIsReportedNamingTheTransferAndTheHosts) {
  Put(0, 110, 0, F32({2}, {1, 2}));
  data_plane_->Unregister(HostId(1));  // Host 1 cannot be reached.
  WorkerBatch batch;
  batch.sends.push_back(SendSpec{
      5, DeviceId(0), BufferId{ArrayHandle(110), 0}, Box{{0}, {2}}, true,
      HostId(1), DeviceId(2), BufferId{ArrayHandle(111), 0}, {0}});
  worker(0).Dispatch(std::move(batch));
  std::optional<UndeliveredPiece> report = listener_.AwaitPushFailure();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->transfer_id, 5u);
  EXPECT_EQ(report->source_host, HostId(0));
  EXPECT_EQ(report->destination_host, HostId(1));
  EXPECT_EQ(report->destination.device, DeviceId(2));
  EXPECT_EQ(report->destination.buffer, (BufferId{ArrayHandle(111), 0}));
  EXPECT_EQ(report->status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(report->status.message(),
              HasSubstr("transfer 5 from device 0 (host 0) to array 111 shard "
                        "0 on device 2 (host 1) was not delivered: data "
                        "plane: host 1 is not reachable"));
}

TEST_F(WorkerTest, AnUndeliveredPieceFailsItsReceiveAnnouncedBeforeOrAfter) {
  const Shape f2(PrimitiveType::kF32, {2});
  UndeliveredPiece lost{3, HostId(0), DeviceId(0), HostId(1),
                        DeviceBuffer{DeviceId(2), BufferId{ArrayHandle(120), 0}},
                        absl::DataLossError("transfer 3 was not delivered")};
  Receive(2, 120, f2, {PieceOrigin{3, DeviceId(0), HostId(0), ""}}, true);
  worker(1).FailBuffers({lost});
  EXPECT_THAT(Fetch(2, 120, 0).status().message(),
              HasSubstr("transfer 3 was not delivered"));
  // Reported before the receive is announced: held until it is.
  lost.destination.buffer = BufferId{ArrayHandle(121), 0};
  worker(1).FailBuffers({lost});
  Receive(2, 121, f2, {PieceOrigin{3, DeviceId(0), HostId(0), ""}}, true);
  EXPECT_THAT(Fetch(2, 121, 0).status().message(),
              HasSubstr("transfer 3 was not delivered"));
}

TEST_F(WorkerTest, APieceReportedUndeliveredAfterItArrivedChangesNothing) {
  const Shape f4(PrimitiveType::kF32, {4});
  Receive(2, 130, f4,
          {PieceOrigin{1, DeviceId(0), HostId(0), ""},
           PieceOrigin{2, DeviceId(1), HostId(0), ""}},
          false);
  worker(1).ReceivePiece(Piece(1, 0, 2, 130, {0}, F32({2}, {1, 2})));
  // The sender never heard that transfer 1 arrived, and says so.
  worker(1).FailBuffers(
      {UndeliveredPiece{1, HostId(0), DeviceId(0), HostId(1),
                        DeviceBuffer{DeviceId(2), BufferId{ArrayHandle(130), 0}},
                        absl::DataLossError("not acknowledged")}});
  worker(1).ReceivePiece(Piece(2, 1, 2, 130, {2}, F32({2}, {3, 4})));
  auto value = Fetch(2, 130, 0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(PendingReceives(1), ElementsAre());
}

TEST_F(WorkerTest, ALostConnectionFailsOnlyTheReceivesWaitingForThatPeer) {
  const Shape f2(PrimitiveType::kF32, {2});
  Receive(2, 140, f2, {PieceOrigin{1, DeviceId(0), HostId(0), ""}}, true);
  Receive(2, 141, f2, {PieceOrigin{2, DeviceId(3), HostId(1), ""}}, true);
  worker(1).ConnectionLost(HostId(0),
                           absl::DataLossError("connection from host 0 broke"));
  absl::Status lost = Fetch(2, 140, 0).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(lost.message(),
              HasSubstr("connection from host 0 broke; array 140 shard 0 was "
                        "to receive data from device 0 (host 0)"));
  // The peer may be alive: its piece (or its report) still counts it.
  worker(1).ReceivePiece(Piece(1, 0, 2, 140, {0}, F32({2}, {1, 2})));
  EXPECT_EQ(Fetch(2, 140, 0).status(), lost);
  worker(1).ReceivePiece(Piece(2, 3, 2, 141, {0}, F32({2}, {5, 6})));
  auto kept = Fetch(2, 141, 0);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(Values(*kept), ElementsAre(5, 6));
  EXPECT_THAT(PendingReceives(1), ElementsAre());
}

TEST_F(WorkerTest, ALostPeerAccountsForItsPiecesAndLeavesTheOthersToCome) {
  const Shape f4(PrimitiveType::kF32, {4});
  Receive(2, 150, f4,
          {PieceOrigin{1, DeviceId(0), HostId(0), ""},
           PieceOrigin{2, DeviceId(3), HostId(1), ""}},
          false);
  worker(1).PeerLost(HostId(0), absl::DataLossError("host 0 was lost"));
  EXPECT_THAT(Fetch(2, 150, 0).status().message(), HasSubstr("host 0 was lost"));
  ASSERT_EQ(PendingReceives(1).size(), 0u);  // Failed: not shown as waiting.
  // The other piece still comes and is dropped: the buffer stays failed.
  worker(1).ReceivePiece(Piece(2, 3, 2, 150, {2}, F32({2}, {3, 4})));
  EXPECT_THAT(Fetch(2, 150, 0).status().message(), HasSubstr("host 0 was lost"));
}

TEST_F(WorkerTest, AnAnnouncedPieceIsWrittenInPlaceAndAnEarlyOneIsNot) {
  const Shape f4(PrimitiveType::kF32, {4});
  const Shape f2(PrimitiveType::kF32, {2});
  PieceMessage early = Piece(1, 0, 2, 160, {0}, F32({2}, {1, 2}));
  auto none = worker(1).BeginPiece(HeaderOf(early, f2));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);  // Not announced: it comes as a literal.
  Receive(2, 160, f4,
          {PieceOrigin{1, DeviceId(0), HostId(0), ""},
           PieceOrigin{2, DeviceId(1), HostId(0), ""}},
          false);
  auto writer = worker(1).BeginPiece(HeaderOf(early, f2));
  ASSERT_TRUE(writer.ok() && *writer != nullptr) << writer.status();
  EXPECT_EQ((*writer)->runs().total_bytes(), 8);
  const float first[] = {1, 2};
  std::memcpy((*writer)->base() + transport::BoxRuns::Cursor((*writer)->runs())
                                      .offset(),
              first, sizeof first);
  (*writer)->Finish(absl::OkStatus());
  // The same transfer again is refused; the other piece completes it.
  EXPECT_FALSE(worker(1).BeginPiece(HeaderOf(early, f2)).ok());
  worker(1).ReceivePiece(Piece(2, 1, 2, 160, {2}, F32({2}, {3, 4})));
  auto value = Fetch(2, 160, 0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(1, 2, 3, 4));
}

TEST_F(WorkerTest, APieceLostWhileWrittenInPlaceFailsItsBuffer) {
  const Shape f2(PrimitiveType::kF32, {2});
  Receive(2, 170, f2, {PieceOrigin{1, DeviceId(0), HostId(0), ""}}, true);
  PieceMessage piece = Piece(1, 0, 2, 170, {0}, F32({2}, {1, 2}));
  piece.whole = true;
  auto writer = worker(1).BeginPiece(HeaderOf(piece, f2));
  ASSERT_TRUE(writer.ok() && *writer != nullptr) << writer.status();
  (*writer)->Finish(absl::DataLossError("connection broke after 4 bytes"));
  EXPECT_THAT(Fetch(2, 170, 0).status().message(),
              HasSubstr("connection broke after 4 bytes"));
  // Its sender's report accounts for it.
  worker(1).FailBuffers(
      {UndeliveredPiece{1, HostId(0), DeviceId(0), HostId(1),
                        DeviceBuffer{DeviceId(2), BufferId{ArrayHandle(170), 0}},
                        absl::DataLossError("not acknowledged")}});
  EXPECT_THAT(PendingReceives(1), ElementsAre());
}

TEST_F(WorkerTest, KeepsTheNewestMembershipAndPassesItOn) {
  std::vector<uint64_t> told;
  WorkerOptions options;
  options.host = HostId(2);
  options.island = IslandId(0);
  options.devices = {transport::DeviceInfo{DeviceId(9), HostId(2), IslandId(0),
                                           0, "cpu", 1024}};
  options.data_plane = data_plane_.get();
  options.collectives = collectives_.get();
  options.on_membership = [&](const transport::MembershipUpdate& update) {
    told.push_back(update.version);
  };
  auto worker = Worker::Create(options);
  ASSERT_TRUE(worker.ok()) << worker.status();
  transport::MembershipUpdate update;
  update.version = 5;
  update.hosts = {transport::PeerInfo{HostId(0), IslandId(0), "a:1",
                                      transport::HostState::kAlive, "7"}};
  (*worker)->UpdateMembership(update);
  update.version = 4;  // Late: an older snapshot.
  (*worker)->UpdateMembership(update);
  EXPECT_EQ((*worker)->membership().version, 5u);
  EXPECT_EQ((*worker)->membership().hosts[0].address, "a:1");
  EXPECT_THAT(told, ElementsAre(5));
  (*worker)->Stop();
}

}  // namespace worker_test
}  // namespace causeway::worker
