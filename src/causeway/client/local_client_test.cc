// The client API against the real runtime (a LocalCluster): errors flowing
// through arrays, host failure and recovery, status and traces.
#include "causeway/client/local_client.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "causeway/client/test_programs.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/trace/trace_recorder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::client {
namespace local_client_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::Values;
using hlo::testutil::Vector;

class LocalClientTest : public ::testing::Test {
 protected:
  void Start(cluster::LocalClusterOptions options) {
    recorder_ = std::make_shared<trace::TraceRecorder>();
    options.event_sink = recorder_;
    absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
        cluster::LocalCluster::Create(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    client_ = ConnectLocal(*cluster_);
    absl::StatusOr<Session> session = client_->OpenSession({.name = "test"});
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::make_unique<Session>(*std::move(session));
  }

  Executable Compile(const std::string& text, const Slice& slice) {
    absl::StatusOr<Executable> exe = session_->Compile(text, slice);
    CW_CHECK(exe.ok()) << exe.status();
    return *exe;
  }

  std::shared_ptr<trace::TraceRecorder> recorder_;
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Session> session_;
};

TEST_F(LocalClientTest, TheClientListsTheClustersDevicesAndIslands) {
  Start({.islands = 2, .hosts_per_island = 1, .devices_per_host = 3});
  EXPECT_EQ(client_->num_islands(), 2);
  std::vector<transport::DeviceInfo> devices = client_->devices();
  ASSERT_EQ(devices.size(), 6u);
  EXPECT_EQ(devices[4].island, IslandId(1));
  EXPECT_EQ(devices[4].kind, "cpu");
}

TEST_F(LocalClientTest, AnErrorNamesTheProgramAndFlowsOnlyToDependants) {
  // 12 bytes per device: an f32[4] shard (16 bytes) can never fit.
  Start({.devices_per_host = 2, .memory_per_device = 12});
  Slice slice = *session_->CreateSlice(2);
  Executable twice = Compile(
      testing::ElementwiseProgram("twice", "multiply", 2, 2), slice);
  Executable widen = Compile(R"(
HloModule widen, num_partitions=2
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  s = f32[] reshape(x)
  ROOT y = f32[4] broadcast(s), dimensions={}, sharding={devices=[2]<=[2]}
}
)",
                             slice);
  Array x = *session_->FromHost(Vector({1, 2}), slice,
                                *Sharding::TiledByDims({2}));
  Array wide = (*widen.Execute({x}))[0];
  absl::StatusOr<Literal> failed = wide.ToHost().Await();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("program 'widen'"));
  // The error flows into what is computed from the failed array ...
  Array copied = *session_->Reshard(wide, Sharding::Replicated());
  EXPECT_EQ(copied.Ready().Await().code(),
            absl::StatusCode::kResourceExhausted);
  // ... and nowhere else.
  EXPECT_THAT(Values(*(*twice.Execute({x}))[0].ToHost().Await()),
              ElementsAre(2, 4));
}

TEST_F(LocalClientTest, AfterAHostStopsTheClientRestoresAndGoesOn) {
  Start({.islands = 1, .hosts_per_island = 2, .devices_per_host = 2});
  Slice slice = *session_->CreateSlice(2);
  transport::SliceInfo before = *slice.Ready().Await();
  Executable twice = Compile(
      testing::ElementwiseProgram("twice", "multiply", 2, 2), slice);
  const Sharding split = *Sharding::TiledByDims({2});
  Array x = *session_->FromHost(Vector({1, 2}), slice, split);
  ASSERT_TRUE((*twice.Execute({x}))[0].Ready().Await().ok());

  const HostId lost = cluster_->topology()->HostOf(before.devices[0]);
  ASSERT_TRUE(cluster_->StopHost(lost).ok());
  EXPECT_EQ(x.ToHost().Await().status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<transport::SliceInfo> after = slice.Info().Await();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->generation, before.generation);
  // Same slice, same executable: upload from the client's snapshot again.
  Array restored = *session_->FromHost(Vector({1, 2}), slice, split);
  EXPECT_THAT(Values(*(*twice.Execute({restored}))[0].ToHost().Await()),
              ElementsAre(2, 4));
}

TEST_F(LocalClientTest, StatusAndTraceShowTheSessionsPrograms) {
  Start({.islands = 2, .hosts_per_island = 1, .devices_per_host = 2});
  Slice a = *session_->CreateSlice(2, {}, IslandId(0));
  Slice b = *session_->CreateSlice(2, {}, IslandId(1));
  Executable twice =
      Compile(testing::ElementwiseProgram("twice", "multiply", 2, 2), a);
  Executable plus_one =
      Compile(testing::ElementwiseProgram("plus_one", "add", 1, 2), b);
  Array x = *session_->FromHost(Vector({1, 2}), a, *Sharding::TiledByDims({2}));
  ProgramTrace trace(*session_);
  Array y = (*trace.Execute(twice, {x}))[0];
  Array z = (*trace.Execute(plus_one, {y}))[0];  // Crosses islands.
  ASSERT_TRUE(trace.Submit().ok());
  EXPECT_THAT(Values(*z.ToHost().Await()), ElementsAre(3, 5));

  absl::StatusOr<transport::StatusReport> status = session_->Status().Await();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_THAT(status->text, HasSubstr("'test'"));
  absl::StatusOr<std::string> json = session_->Trace().Await();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"name\":\"twice\""));
  EXPECT_THAT(*json, HasSubstr("\"name\":\"plus_one\""));
  EXPECT_THAT(*json, HasSubstr("\"cat\":\"transfer\""));
}

// Per-device buffers (FromShards, ShardsToHost): each partition of a
// program reads its own argument and its own result comes back, even for
// arrays whose sharding calls them replicated.
constexpr char kPlusPartitionId[] =
    R"(HloModule plus_partition, num_partitions=2
ENTRY main {
  x = f32[2] parameter(0), sharding={replicated}
  p = u32[] partition-id()
  pf = f32[] convert(p)
  b = f32[2] broadcast(pf), dimensions={}
  ROOT y = f32[2] add(x, b), sharding={replicated}
})";

TEST_F(LocalClientTest, EachDeviceKeepsTheShardItWasGivenAndGivesItsOwnBack) {
  Start({.devices_per_host = 2});
  Slice slice = *session_->CreateSlice(2);
  Executable exe = Compile(kPlusPartitionId, slice);
  absl::StatusOr<Array> x = session_->FromShards(
      {Vector({1, 2}), Vector({10, 20})}, Shape(PrimitiveType::kF32, {2}),
      slice, Sharding::Replicated());
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<std::vector<Literal>> given = x->ShardsToHost().Await();
  ASSERT_TRUE(given.ok()) << given.status();
  ASSERT_EQ(given->size(), 2u);
  EXPECT_THAT(Values((*given)[1]), ElementsAre(10, 20));
  std::vector<Array> y = *exe.Execute({*x});
  absl::StatusOr<std::vector<Literal>> shards = y[0].ShardsToHost().Await();
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 2u);
  EXPECT_THAT(Values((*shards)[0]), ElementsAre(1, 2));
  EXPECT_THAT(Values((*shards)[1]), ElementsAre(11, 21));
}

TEST_F(LocalClientTest, FromShardsRefusesShardsThatDoNotFitTheSharding) {
  Start({.devices_per_host = 2});
  Slice slice = *session_->CreateSlice(2);
  absl::StatusOr<Sharding> tiled = Sharding::TiledByDims({2});
  ASSERT_TRUE(tiled.ok());
  auto one_shard = session_->FromShards(
      {Vector({1})}, Shape(PrimitiveType::kF32, {2}), slice, *tiled);
  EXPECT_THAT(one_shard.status().message(),
              HasSubstr("got 1 shards for slice"));
  auto wide =
      session_->FromShards({Vector({1, 2}), Vector({3, 4})},
                           Shape(PrimitiveType::kF32, {2}), slice, *tiled);
  EXPECT_THAT(wide.status().message(),
              HasSubstr("shard 0 is f32[2] but f32[2] sharded "
                        "{devices=[2]<=[2]} has shards of f32[1]"));
}

// Partition 0 loops forever; partition 1 waits for it in an all-reduce.
constexpr char kLoopOrWait[] = R"(HloModule loop_or_wait, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
forever {
  s = f32[] parameter(0)
  ROOT t = pred[] constant(true)
}
step {
  s = f32[] parameter(0)
  one = f32[] constant(1)
  ROOT n = f32[] add(s, one)
}
loop {
  x = f32[] parameter(0)
  ROOT w = f32[] while(x), condition=forever, body=step
}
wait {
  x = f32[] parameter(0)
  ROOT r = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}
ENTRY main {
  x = f32[] parameter(0), sharding={replicated}
  p = u32[] partition-id()
  i = s32[] convert(p)
  ROOT y = f32[] conditional(i, x, x), branch_computations={loop, wait}, sharding={replicated}
})";

TEST_F(LocalClientTest,
       APeerThatFailsStopsAPartitionLoopingWithoutCollectives) {
  Start({.devices_per_host = 2, .collective_timeout = absl::Milliseconds(200)});
  Slice slice = *session_->CreateSlice(2);
  Executable exe = Compile(kLoopOrWait, slice);
  absl::StatusOr<Array> x = session_->FromHost(
      Literal::Scalar(PrimitiveType::kF32, 1), slice, Sharding::Replicated());
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Array> y = *exe.Execute({*x});
  // Partition 1 gives up waiting; partition 0 then stops at its next
  // iteration instead of looping on, so every shard resolves.
  absl::StatusOr<std::vector<Literal>> shards = y[0].ShardsToHost().Await();
  ASSERT_EQ(shards.status().code(), absl::StatusCode::kDeadlineExceeded)
      << shards.status();
  EXPECT_THAT(shards.status().message(), HasSubstr("did not arrive"));
}

}  // namespace local_client_test
}  // namespace causeway::client
