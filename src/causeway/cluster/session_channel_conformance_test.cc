// The SessionChannel conformance suite: one set of behaviours, run against
// every implementation of the client->head channel (the in-process one
// and gRPC over loopback) on the same embedded cluster. A feature that
// works through one and not the other fails here.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/sharding_util.h"
#include "causeway/transport/grpc_head_server.h"
#include "causeway/transport/grpc_session_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::cluster {
namespace session_channel_conformance_test {

using hlo::Literal;
using hlo::testutil::F32;
using hlo::testutil::Values;
using transport::SessionChannel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

// y = 2x, each of 2 devices holding one element.
constexpr char kTimesTwo[] = R"(
HloModule times_two, num_partitions=2
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  two = f32[] constant(2)
  b = f32[1] broadcast(two), dimensions={}
  ROOT y = f32[1] multiply(x, b), sharding={devices=[2]<=[2]}
}
)";

// y = x + 1, the same layout.
constexpr char kPlusOne[] = R"(
HloModule plus_one, num_partitions=2
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  one = f32[] constant(1)
  b = f32[1] broadcast(one), dimensions={}
  ROOT y = f32[1] add(x, b), sharding={devices=[2]<=[2]}
}
)";

hlo::Sharding Sharding(const std::string& text) {
  absl::StatusOr<hlo::Sharding> sharding = hlo::ParseSharding(text);
  CW_CHECK(sharding.ok()) << sharding.status();
  return *sharding;
}

enum class Transport { kInProcess, kGrpc };

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kInProcess ? "InProcess" : "Grpc";
}

transport::SliceRequest SliceOf(uint64_t handle, int64_t devices) {
  transport::SliceRequest request;
  request.handle = SliceHandle(handle);
  request.num_devices = devices;
  return request;
}

// A 4-device embedded cluster and a way to open channels to it through
// the transport under test.
class SessionChannelTest : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Create({.hosts_per_island = 2, .devices_per_host = 2});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    if (GetParam() == Transport::kGrpc) {
      absl::StatusOr<std::unique_ptr<transport::GrpcHeadServer>> server =
          transport::GrpcHeadServer::Start(&cluster_->head(), nullptr, {});
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = *std::move(server);
      absl::StatusOr<std::shared_ptr<transport::GrpcHeadConnection>>
          connection =
              transport::GrpcHeadConnection::Connect(server_->address(), {});
      ASSERT_TRUE(connection.ok()) << connection.status();
      connection_ = *std::move(connection);
    }
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  std::unique_ptr<SessionChannel> NewChannel() {
    if (GetParam() == Transport::kInProcess) return cluster_->Connect();
    return std::make_unique<transport::GrpcSessionChannel>(connection_);
  }
  std::unique_ptr<SessionChannel> OpenChannel(const std::string& name) {
    std::unique_ptr<SessionChannel> channel = NewChannel();
    absl::StatusOr<SessionId> id =
        channel->OpenSession({.name = name}).AwaitFor(kWait);
    CW_CHECK(id.ok()) << id.status();
    return channel;
  }

  transport::SliceInfo Slice(SessionChannel& channel, int64_t devices) {
    absl::StatusOr<transport::SliceInfo> slice =
        channel.RequestSlice(SliceOf(next_++, devices))
            .AwaitFor(kWait);
    CW_CHECK(slice.ok()) << slice.status();
    return *slice;
  }
  ExecutableHandle Compile(SessionChannel& channel, const std::string& text,
                           SliceHandle slice) {
    transport::CompileRequest request{ExecutableHandle(next_++), text, slice};
    absl::StatusOr<transport::CompileInfo> info =
        channel.Compile(request).AwaitFor(kWait);
    CW_CHECK(info.ok()) << info.status();
    infos_[request.handle] = *info;
    return request.handle;
  }
  ArrayHandle Put(SessionChannel& channel, SliceHandle slice, Literal value,
                  const std::string& sharding) {
    transport::ArraySpec spec{ArrayHandle(next_++), value.shape(),
                              Sharding(sharding), slice};
    absl::Status put = channel.PutArray(spec, std::move(value)).AwaitFor(kWait);
    CW_CHECK(put.ok()) << put;
    return spec.handle;
  }
  // One output per program output, on `slice` (of `devices` devices).
  transport::ExecuteOp MakeExecute(ExecutableHandle executable,
                                   std::vector<ArrayHandle> arguments,
                                   SliceHandle slice, int64_t devices) {
    const transport::CompileInfo& info = infos_.at(executable);
    transport::ExecuteOp op{executable, std::move(arguments), {}};
    for (size_t i = 0; i < info.output_shapes.size(); ++i) {
      absl::StatusOr<hlo::Shape> global = hlo::GlobalShapeFromShard(
          info.output_shardings[i], info.output_shapes[i], devices);
      CW_CHECK(global.ok()) << global.status();
      op.outputs.push_back({ArrayHandle(next_++), *global,
                            info.output_shardings[i], slice});
    }
    return op;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<transport::GrpcHeadServer> server_;
  std::shared_ptr<transport::GrpcHeadConnection> connection_;
  std::map<ExecutableHandle, transport::CompileInfo> infos_;
  uint64_t next_ = 1;
};

TEST_P(SessionChannelTest, ACallBeforeOpenSessionIsAFailedPrecondition) {
  std::unique_ptr<SessionChannel> channel = NewChannel();
  absl::Status status =
      channel->RequestSlice(SliceOf(1, 1))
          .AwaitFor(kWait)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

TEST_P(SessionChannelTest, AChannelOpensOneSessionOnly) {
  std::unique_ptr<SessionChannel> channel = NewChannel();
  absl::StatusOr<SessionId> first =
      channel->OpenSession({.name = "first"}).AwaitFor(kWait);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Status second =
      channel->OpenSession({.name = "second"}).AwaitFor(kWait).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
}

TEST_P(SessionChannelTest, RunsAProgramAndFetchesItsResult) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("one");
  transport::SliceInfo slice = Slice(*channel, 2);
  EXPECT_EQ(slice.devices.size(), 2u);
  ExecutableHandle twice = Compile(*channel, kTimesTwo, slice.handle);
  ArrayHandle x = Put(*channel, slice.handle, F32({2}, {1.5, -3}),
                      "{devices=[2]<=[2]}");
  transport::ExecuteOp op = MakeExecute(twice, {x}, slice.handle, 2);
  const ArrayHandle y = op.outputs[0].handle;
  channel->Execute(std::move(op));
  absl::StatusOr<Literal> value = channel->Fetch(y).AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(3, -6));
}

TEST_P(SessionChannelTest, PerDeviceShardsGoInAndComeBackInDeviceOrder) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("shards");
  transport::SliceInfo slice = Slice(*channel, 2);
  ExecutableHandle twice = Compile(*channel, kTimesTwo, slice.handle);
  transport::ArraySpec spec{ArrayHandle(next_++),
                            hlo::Shape(hlo::PrimitiveType::kF32, {2}),
                            Sharding("{devices=[2]<=[2]}"), slice.handle};
  std::vector<Literal> shards;
  shards.push_back(F32({1}, {4}));
  shards.push_back(F32({1}, {-0.5}));
  ASSERT_TRUE(channel->PutShards(spec, std::move(shards)).AwaitFor(kWait).ok());
  transport::ExecuteOp op = MakeExecute(twice, {spec.handle}, slice.handle, 2);
  const ArrayHandle y = op.outputs[0].handle;
  channel->Execute(std::move(op));
  absl::StatusOr<std::vector<Literal>> back =
      channel->FetchShards(y).AwaitFor(kWait);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_THAT(Values((*back)[0]), ElementsAre(8));
  EXPECT_THAT(Values((*back)[1]), ElementsAre(-1));
  // A shard of the wrong shape is refused, naming it.
  transport::ArraySpec bad = spec;
  bad.handle = ArrayHandle(next_++);
  std::vector<Literal> wrong;
  wrong.push_back(F32({1}, {1}));
  wrong.push_back(F32({2}, {1, 2}));
  absl::Status refused =
      channel->PutShards(bad, std::move(wrong)).AwaitFor(kWait);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("shard 1"));
}

TEST_P(SessionChannelTest, AnArrayLargerThanAChunkRoundTripsExactly) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("big");
  transport::SliceInfo slice = Slice(*channel, 2);
  Literal big(hlo::Shape(hlo::PrimitiveType::kF32, {2, 300001}));
  std::span<float> data = big.mutable_data<float>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  ArrayHandle x = Put(*channel, slice.handle, big, "{devices=[2,1]<=[2]}");
  absl::StatusOr<Literal> back = channel->Fetch(x).AwaitFor(kWait);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, big);
}

TEST_P(SessionChannelTest, ASubmittedGraphRunsItsOpsInOrder) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("graph");
  transport::SliceInfo slice = Slice(*channel, 2);
  ExecutableHandle twice = Compile(*channel, kTimesTwo, slice.handle);
  ExecutableHandle plus_one = Compile(*channel, kPlusOne, slice.handle);
  ArrayHandle x =
      Put(*channel, slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  transport::ExecuteOp first = MakeExecute(twice, {x}, slice.handle, 2);
  transport::ExecuteOp second =
      MakeExecute(plus_one, {first.outputs[0].handle}, slice.handle, 2);
  const ArrayHandle y = second.outputs[0].handle;
  transport::ProgramGraph graph;
  graph.ops.emplace_back(std::move(first));
  graph.ops.emplace_back(std::move(second));
  channel->Submit(std::move(graph));
  absl::StatusOr<Literal> value = channel->Fetch(y).AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(3, 5));
}

TEST_P(SessionChannelTest, CopyMovesAnArrayToAnotherSliceAndSharding) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("copy");
  transport::SliceInfo from = Slice(*channel, 2);
  transport::SliceInfo to = Slice(*channel, 2);
  ArrayHandle x = Put(*channel, from.handle, F32({4}, {1, 2, 3, 4}),
                      "{devices=[2]<=[2]}");
  transport::CopyOp copy{x,
                         {ArrayHandle(next_++),
                          hlo::Shape(hlo::PrimitiveType::kF32, {4}),
                          Sharding("{replicated}"), to.handle},
                         {}};
  const ArrayHandle y = copy.destination.handle;
  channel->Copy(std::move(copy));
  absl::StatusOr<Literal> value = channel->Fetch(y).AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(1, 2, 3, 4));
}

TEST_P(SessionChannelTest, AMalformedProgramIsRefusedWithItsPosition) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("bad");
  transport::SliceInfo slice = Slice(*channel, 1);
  absl::Status status =
      channel
          ->Compile({ExecutableHandle(next_++),
                     "HloModule m\nENTRY e {\n  x = f32[2 parameter(0)\n}\n",
                     slice.handle})
          .AwaitFor(kWait)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("3:"));
}

TEST_P(SessionChannelTest, AnErrorFlowsIntoTheOutputsOfAnExecute) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("errors");
  transport::SliceInfo slice = Slice(*channel, 2);
  ExecutableHandle twice = Compile(*channel, kTimesTwo, slice.handle);
  transport::ExecuteOp op =
      MakeExecute(twice, {ArrayHandle(987654)}, slice.handle, 2);
  const ArrayHandle y = op.outputs[0].handle;
  channel->Execute(std::move(op));
  absl::Status status = channel->ArrayReady(y).AwaitFor(kWait);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("987654"));
}

TEST_P(SessionChannelTest, AnUnknownOrDeletedHandleIsNotFound) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("gone");
  transport::SliceInfo slice = Slice(*channel, 2);
  EXPECT_EQ(channel->ArrayReady(ArrayHandle(424242)).AwaitFor(kWait).code(),
            absl::StatusCode::kNotFound);
  ArrayHandle x =
      Put(*channel, slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  channel->Delete({x});
  EXPECT_EQ(channel->Fetch(x).AwaitFor(kWait).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(SessionChannelTest, AnotherSessionsHandleIsNotFoundNeverItsData) {
  std::unique_ptr<SessionChannel> owner = OpenChannel("owner");
  std::unique_ptr<SessionChannel> other = OpenChannel("other");
  transport::SliceInfo slice = Slice(*owner, 2);
  ArrayHandle secret =
      Put(*owner, slice.handle, F32({2}, {7, 7}), "{devices=[2]<=[2]}");
  absl::StatusOr<Literal> stolen = other->Fetch(secret).AwaitFor(kWait);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kNotFound)
      << stolen.status();
  EXPECT_EQ(other->ArrayReady(secret).AwaitFor(kWait).code(),
            absl::StatusCode::kNotFound);
  // The owner still has it.
  absl::StatusOr<Literal> mine = owner->Fetch(secret).AwaitFor(kWait);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_THAT(Values(*mine), ElementsAre(7, 7));
}

TEST_P(SessionChannelTest, AQueuedSliceIsGrantedWhenAnotherSessionCloses) {
  std::unique_ptr<SessionChannel> first = OpenChannel("first");
  std::unique_ptr<SessionChannel> second = OpenChannel("second");
  transport::SliceInfo all = Slice(*first, 4);
  Future<transport::SliceInfo> waiting =
      second->RequestSlice(SliceOf(next_++, 2));
  EXPECT_FALSE(waiting.IsReady());
  ASSERT_TRUE(first->CloseSession().AwaitFor(kWait).ok());
  absl::StatusOr<transport::SliceInfo> granted = waiting.AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->devices.size(), 2u);
  EXPECT_EQ(all.devices.size(), 4u);
}

TEST_P(SessionChannelTest, AClosedSessionRefusesLaterCalls) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("closed");
  ASSERT_TRUE(channel->CloseSession().AwaitFor(kWait).ok());
  absl::Status status =
      channel->RequestSlice(SliceOf(1, 1))
          .AwaitFor(kWait)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

TEST_P(SessionChannelTest, StatusDescribesEveryDevice) {
  std::unique_ptr<SessionChannel> channel = OpenChannel("status");
  absl::StatusOr<transport::StatusReport> report =
      channel->GetStatus().AwaitFor(kWait);
  ASSERT_TRUE(report.ok()) << report.status();
  for (int d = 0; d < 4; ++d) {
    EXPECT_THAT(report->text, HasSubstr(absl::StrCat("device ", d)));
  }
  // Also without a session.
  absl::StatusOr<transport::StatusReport> sessionless =
      NewChannel()->GetStatus().AwaitFor(kWait);
  ASSERT_TRUE(sessionless.ok()) << sessionless.status();
  EXPECT_THAT(sessionless->text, HasSubstr("device 3"));
}

INSTANTIATE_TEST_SUITE_P(Transports, SessionChannelTest,
                         ::testing::Values(Transport::kInProcess,
                                           Transport::kGrpc),
                         TransportName);

}  // namespace session_channel_conformance_test
}  // namespace causeway::cluster
