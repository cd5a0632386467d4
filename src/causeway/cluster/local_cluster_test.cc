#include "causeway/cluster/local_cluster.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/sharding_util.h"
#include "causeway/transport/data_plane.h"
#include "causeway/transport/gloo_collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::cluster {

using trace::EventSink;
using trace::OpEvent;
using trace::TransferEvent;
using transport::ExtractPiece;
namespace local_cluster_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using hlo::testutil::F32;
using hlo::testutil::Values;

hlo::Sharding ParseSharding(const std::string& text) {
  auto sharding = hlo::ParseSharding(text);
  CW_CHECK(sharding.ok()) << sharding.status();
  return *sharding;
}

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

// y = mean over 3 devices of x, plus 1: with x replicated, y = x + 1.
constexpr char kMeanPlusOne[] = R"(
HloModule mean_plus_one, num_partitions=3
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[] parameter(0), sharding={replicated}
  r = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1,2}}, use_global_device_ids=true, to_apply=add
  three = f32[] constant(3)
  m = f32[] divide(r, three)
  one = f32[] constant(1)
  ROOT y = f32[] add(m, one), sharding={replicated}
}
)";

// Counts transfers by the hosts they run between.
class TransferCounter : public EventSink {
 public:
  void TransferFinished(const TransferEvent& event,
                        const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (status.ok()) ++count_[{event.source_host, event.destination_host}];
  }
  int64_t Count(HostId from, HostId to) {
    absl::MutexLock lock(&mu_);
    return count_[{from, to}];
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<HostId, HostId>, int64_t> count_;
};

// A minimal client over a session channel: mints handles, remembers what
// Compile said.
class TestClient {
 public:
  TestClient(LocalCluster& cluster, std::string name)
      : channel_(cluster.Connect()) {
    CW_CHECK(channel_->OpenSession({.name = std::move(name)}).Await().ok());
  }

  transport::SessionChannel& channel() { return *channel_; }

  Future<transport::SliceInfo> RequestSlice(int64_t devices,
                                            std::optional<IslandId> island =
                                                std::nullopt,
                                            bool shared = false) {
    transport::SliceRequest request;
    request.handle = SliceHandle(next_++);
    request.num_devices = devices;
    request.island = island;
    request.shared = shared;
    return channel_->RequestSlice(request);
  }
  transport::SliceInfo Slice(int64_t devices,
                             std::optional<IslandId> island = std::nullopt,
                             bool shared = false) {
    auto slice =
        RequestSlice(devices, island, shared).AwaitFor(absl::Seconds(30));
    CW_CHECK(slice.ok()) << slice.status();
    return *slice;
  }

  absl::StatusOr<ExecutableHandle> Compile(const std::string& text,
                                           SliceHandle slice,
                                           int64_t devices) {
    transport::CompileRequest request{ExecutableHandle(next_++), text, slice};
    auto info = channel_->Compile(request).Await();
    if (!info.ok()) return info.status();
    programs_[request.handle] = {*info, slice, devices};
    return request.handle;
  }

  ArrayHandle Put(SliceHandle slice, Literal value, const std::string& sharding,
                  Future<>* done = nullptr) {
    transport::ArraySpec spec{ArrayHandle(next_++), value.shape(),
                              ParseSharding(sharding), slice};
    Future<> put = channel_->PutArray(spec, std::move(value));
    if (done != nullptr) *done = put;
    return spec.handle;
  }

  // Mints one output per program output and sends Execute.
  std::vector<ArrayHandle> Execute(ExecutableHandle executable,
                                   std::vector<ArrayHandle> arguments) {
    transport::ExecuteOp op = MakeExecute(executable, std::move(arguments));
    std::vector<ArrayHandle> outputs;
    for (const auto& spec : op.outputs) outputs.push_back(spec.handle);
    channel_->Execute(std::move(op));
    return outputs;
  }
  transport::ExecuteOp MakeExecute(ExecutableHandle executable,
                                   std::vector<ArrayHandle> arguments) {
    const Program& program = programs_.at(executable);
    transport::ExecuteOp op;
    op.executable = executable;
    op.arguments = std::move(arguments);
    for (size_t i = 0; i < program.info.output_shapes.size(); ++i) {
      auto global = hlo::GlobalShapeFromShard(program.info.output_shardings[i],
                                              program.info.output_shapes[i],
                                              program.devices);
      CW_CHECK(global.ok()) << global.status();
      op.outputs.push_back(transport::ArraySpec{
          ArrayHandle(next_++), *global, program.info.output_shardings[i],
          program.slice});
    }
    return op;
  }

  ArrayHandle Copy(ArrayHandle source, Shape global,
                   const std::string& sharding, SliceHandle slice) {
    transport::CopyOp op{source, transport::ArraySpec{
                                     ArrayHandle(next_++), std::move(global),
                                     ParseSharding(sharding), slice},
                         {}};
    channel_->Copy(op);
    return op.destination.handle;
  }

  const transport::CompileInfo& info(ExecutableHandle executable) const {
    return programs_.at(executable).info;
  }

  absl::StatusOr<Literal> Fetch(ArrayHandle array) {
    return channel_->Fetch(array).AwaitFor(absl::Seconds(30));
  }
  absl::Status Ready(ArrayHandle array) {
    return channel_->ArrayReady(array).AwaitFor(absl::Seconds(30));
  }

 private:
  struct Program {
    transport::CompileInfo info;
    SliceHandle slice;
    int64_t devices = 1;
  };
  std::unique_ptr<transport::SessionChannel> channel_;
  std::map<ExecutableHandle, Program> programs_;
  uint64_t next_ = 1;
};

// CMake runs this binary three times: as it is, with CAUSEWAY_TEST_DATA_PLANE
// set to "tcp", which puts every cluster's workers on the TCP data plane
// (127.0.0.1) instead of the in-process one.
DataPlaneKind TestDataPlane() {
  const char* kind = std::getenv("CAUSEWAY_TEST_DATA_PLANE");
  return kind != nullptr && std::string(kind) == "tcp"
             ? DataPlaneKind::kTcp
             : DataPlaneKind::kInProcess;
}

// And with CAUSEWAY_TEST_COLLECTIVES set to "gloo", which gives every host
// its own Gloo collectives, as worker processes have them: every launch
// over several hosts meets through Gloo on loopback.
bool TestGlooCollectives() {
  const char* kind = std::getenv("CAUSEWAY_TEST_COLLECTIVES");
  return kind != nullptr && std::string(kind) == "gloo";
}

std::unique_ptr<LocalCluster> MakeCluster(LocalClusterOptions options) {
  options.data_plane = TestDataPlane();
  if (TestGlooCollectives()) options.gloo_between_hosts = true;
  auto cluster = LocalCluster::Create(std::move(options));
  CW_CHECK(cluster.ok()) << cluster.status();
  return *std::move(cluster);
}

TEST(LocalClusterTest, ExecutesAProgramOnATwoDeviceSliceAndFetchesIt) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "one");
  transport::SliceInfo slice = client.Slice(2);
  EXPECT_EQ(slice.devices.size(), 2u);
  auto twice = client.Compile(kTimesTwo, slice.handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle x =
      client.Put(slice.handle, F32({2}, {1.5, -3}), "{devices=[2]<=[2]}");
  ArrayHandle y = client.Execute(*twice, {x})[0];
  auto value = client.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(3, -6));
}

// tests/corpus (docs/corpus.md): a JAX-compiled program, its inputs and
// JAX's outputs, each stacked by partition.
std::string CorpusDir(const std::string& name) {
  std::string here = __FILE__;  // .../src/causeway/cluster/this file
  return here.substr(0, here.rfind("/src/causeway/")) + "/tests/corpus/" +
         name + "/";
}

// The global value of a stacked array (leading axis: partition) whose
// partitions hold `sharding`'s shards.
Literal Unstack(const Literal& stacked, const hlo::Sharding& sharding) {
  const int64_t partitions = stacked.shape().dim(0);
  std::vector<int64_t> shard_dims(stacked.shape().dims().begin() + 1,
                                  stacked.shape().dims().end());
  std::vector<Literal> shards;
  for (int64_t p = 0; p < partitions; ++p) {
    std::vector<int64_t> offsets(stacked.shape().rank(), 0);
    offsets[0] = p;
    std::vector<int64_t> dims = stacked.shape().dims();
    dims[0] = 1;
    auto piece = ExtractPiece(stacked, offsets, dims);
    CW_CHECK(piece.ok()) << piece.status();
    shards.push_back(
        piece->WithShape(Shape(stacked.shape().type(), shard_dims)));
  }
  auto global = hlo::GlobalShapeFromShard(
      sharding, Shape(stacked.shape().type(), shard_dims), partitions);
  CW_CHECK(global.ok()) << global.status();
  auto value = hlo::AssembleGlobal(shards, sharding, *global);
  CW_CHECK(value.ok()) << value.status();
  return *value;
}

// Runs the corpus program `name` on a slice of `devices` and compares every
// output with JAX's.
void ExpectCorpusProgramGivesJaxsResults(LocalCluster& cluster,
                                         const std::string& name,
                                         int64_t devices) {
  const std::string dir = CorpusDir(name);
  std::ifstream file(dir + "program.hlo");
  ASSERT_TRUE(file.good()) << dir;
  std::stringstream text;
  text << file.rdbuf();
  TestClient client(cluster, "jax");
  transport::SliceInfo slice = client.Slice(devices);
  auto step = client.Compile(text.str(), slice.handle, devices);
  ASSERT_TRUE(step.ok()) << step.status();
  const transport::CompileInfo* info = &client.info(*step);
  std::vector<ArrayHandle> arguments;
  for (size_t i = 0; i < info->parameter_shapes.size(); ++i) {
    auto stacked = hlo::ReadNpy(dir + "in" + std::to_string(i) + ".npy");
    ASSERT_TRUE(stacked.ok()) << stacked.status();
    const hlo::Sharding& sharding = info->parameter_shardings[i];
    transport::ArraySpec spec{ArrayHandle(5000 + i), {}, sharding,
                              slice.handle};
    Literal global = Unstack(*stacked, sharding);
    spec.global_shape = global.shape();
    client.channel().PutArray(spec, std::move(global));
    arguments.push_back(spec.handle);
  }
  std::vector<ArrayHandle> outputs = client.Execute(*step, arguments);
  ASSERT_EQ(outputs.size(), info->output_shapes.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto expected_stacked =
        hlo::ReadNpy(dir + "out" + std::to_string(i) + ".npy");
    ASSERT_TRUE(expected_stacked.ok()) << expected_stacked.status();
    Literal expected =
        Unstack(*expected_stacked, info->output_shardings[i]);
    auto actual = client.Fetch(outputs[i]);
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_TRUE(actual->shape().Compatible(expected.shape()))
        << actual->shape().ToString() << " vs " << expected.shape().ToString();
    for (int64_t e = 0; e < expected.shape().ElementCount(); ++e) {
      const double want = expected.GetAsDouble(e);
      EXPECT_NEAR(actual->GetAsDouble(e), want, 1e-4 + 1e-4 * std::abs(want))
          << "output " << i << " element " << e;
    }
  }
}

TEST(LocalClusterTest, AJaxCompiledTrainingStepGivesJaxsResults) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  ExpectCorpusProgramGivesJaxsResults(*cluster, "mlp_dp2", 2);
}

// Every host with its own Gloo collectives, as worker processes have them:
// the slices span hosts, so the collectives run through Gloo.
TEST(LocalClusterTest, AJaxTrainingStepOverTwoHostsThroughGlooGivesJaxsResults) {
  auto cluster = MakeCluster({.hosts_per_island = 2,
                              .devices_per_host = 1,
                              .gloo_between_hosts = true});
  ExpectCorpusProgramGivesJaxsResults(*cluster, "mlp_dp2", 2);
}

// Sums over both partitions, forever.
constexpr char kSpinningAllReduce[] = R"(HloModule spin, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (f32[2]) parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  p = (f32[2]) parameter(0)
  x = f32[2] get-tuple-element(p), index=0
  r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
  ROOT t = (f32[2]) tuple(r)
}
ENTRY main {
  x = f32[2] parameter(0), sharding={devices=[2]0,1}
  t = (f32[2]) tuple(x)
  w = (f32[2]) while(t), condition=cond, body=body
  ROOT y = f32[2] get-tuple-element(w), index=0
}
)";

// Counts the devices that started running program `name`.
class StartedCounter : public EventSink {
 public:
  explicit StartedCounter(std::string name) : name_(std::move(name)) {}
  void OpStarted(const OpEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (event.program == name_) ++started_;
  }
  bool AwaitStarted(int64_t devices, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return started_ >= devices;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

 private:
  const std::string name_;
  absl::Mutex mu_;
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
};

// A session closes while its launch over two hosts loops in an all-reduce:
// the devices cancel it and close the communicators it used. The head moves
// the island to a new epoch, so the next session's launches on the same
// devices open new ones instead of meeting closed ones; and once no launch
// of the old epoch is in flight, its rendezvous keys are deleted.
TEST(LocalClusterTest, ASessionClosedMidLaunchLeavesTheNextSessionsCollectivesWorking) {
  auto started = std::make_shared<StartedCounter>("spin");
  auto cluster = MakeCluster({.hosts_per_island = 2,
                              .devices_per_host = 1,
                              .event_sink = started,
                              .collective_timeout = absl::Seconds(20),
                              .gloo_between_hosts = true});
  int64_t spins = 0;
  // Starts the spinning all-reduce on both hosts and closes its session.
  auto spin_and_close = [&] {
    TestClient client(*cluster, "spinner");
    transport::SliceInfo slice = client.Slice(2);
    auto spin = client.Compile(kSpinningAllReduce, slice.handle, 2);
    ASSERT_TRUE(spin.ok()) << spin.status();
    client.Execute(*spin, {client.Put(slice.handle, F32({4}, {1, 2, 3, 4}),
                                      "{devices=[2]<=[2]}")});
    spins += 2;
    ASSERT_TRUE(started->AwaitStarted(spins, absl::Seconds(30)));
  };  // The session closes when `client` goes.
  const transport::InProcessKeyValueStore& store = *cluster->key_value_store();
  // Waits (30 s at most) until `done(keys under prefix)`.
  auto await_keys = [&](const std::string& prefix, auto done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!done(store.Keys(prefix)) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return store.Keys(prefix);
  };

  spin_and_close();
  const uint64_t cancelled_epoch = cluster->topology()->epoch(IslandId(0)) - 1;
  ExpectCorpusProgramGivesJaxsResults(*cluster, "mlp_dp2", 2);
  // The group the cancelled launch was building goes once its epoch is
  // retired. Its cancel key, which a device publishes on its own thread
  // (perhaps after the epoch was retired), may stay until the next one.
  const std::string prefix =
      transport::GlooEpochPrefix(IslandId(0), cancelled_epoch);
  const std::string cancel_key =
      transport::GlooCancelKey(IslandId(0), cancelled_epoch, 0);
  std::vector<std::string> left =
      await_keys(prefix, [&](const std::vector<std::string>& keys) {
        return keys.empty() || keys == std::vector<std::string>{cancel_key};
      });
  EXPECT_TRUE(left.empty() || left == std::vector<std::string>{cancel_key})
      << absl::StrJoin(left, ", ");

  spin_and_close();
  ExpectCorpusProgramGivesJaxsResults(*cluster, "mlp_dp2", 2);
  left = await_keys(prefix, [](const std::vector<std::string>& keys) {
    return keys.empty();
  });
  EXPECT_THAT(left, IsEmpty());
}

TEST(LocalClusterTest, ShardMapCollectivesOverTwoHostsThroughGlooGiveJaxsResults) {
  auto cluster = MakeCluster({.hosts_per_island = 2,
                              .devices_per_host = 2,
                              .gloo_between_hosts = true});
  ExpectCorpusProgramGivesJaxsResults(*cluster, "shard_map_collectives_4", 4);
}

TEST(LocalClusterTest, SubgroupCollectivesOverFourHostsThroughGlooGiveJaxsResults) {
  auto cluster = MakeCluster({.hosts_per_island = 4,
                              .devices_per_host = 2,
                              .collective_timeout = absl::Seconds(20),
                              .gloo_between_hosts = true});
  ExpectCorpusProgramGivesJaxsResults(*cluster, "mlp_dp2_tp4", 8);
  ExpectCorpusProgramGivesJaxsResults(*cluster, "shard_map_all_to_all_array_8",
                                      8);
}

TEST(LocalClusterTest, ChainedExecutesOnTwoIslandsMoveDataWorkerToWorker) {
  auto counter = std::make_shared<TransferCounter>();
  auto cluster = MakeCluster(
      {.islands = 2, .devices_per_host = 2, .event_sink = counter});
  {
    TestClient client(*cluster, "chain");
    transport::SliceInfo a = client.Slice(2, IslandId(0));
    transport::SliceInfo b = client.Slice(2, IslandId(1));
    auto twice = client.Compile(kTimesTwo, a.handle, 2);
    auto plus_one = client.Compile(kPlusOne, b.handle, 2);
    ASSERT_TRUE(twice.ok() && plus_one.ok());
    ArrayHandle x =
        client.Put(a.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
    // Both are sent before either runs; plus_one's input crosses islands.
    ArrayHandle y = client.Execute(*twice, {x})[0];
    ArrayHandle z = client.Execute(*plus_one, {y})[0];
    auto value = client.Fetch(z);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_THAT(Values(*value), ElementsAre(3, 5));
  }
  cluster.reset();  // Every transfer event is in once the workers stop.
  EXPECT_EQ(counter->Count(HostId(0), HostId(1)), 2);  // One per shard.
}

TEST(LocalClusterTest, CopyReshardsBetweenShardingsAndSlices) {
  auto cluster = MakeCluster({.islands = 2, .devices_per_host = 2});
  TestClient client(*cluster, "reshard");
  transport::SliceInfo a = client.Slice(2, IslandId(0));
  transport::SliceInfo b = client.Slice(2, IslandId(1));
  Literal matrix = F32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  ArrayHandle rows = client.Put(a.handle, matrix, "{devices=[2,1]<=[2]}");
  ArrayHandle columns = client.Copy(rows, matrix.shape(),
                                    "{devices=[1,2]<=[2]}", b.handle);
  ArrayHandle replicated =
      client.Copy(columns, matrix.shape(), "{replicated}", a.handle);
  auto value = client.Fetch(replicated);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, matrix);
  auto through_columns = client.Fetch(columns);
  ASSERT_TRUE(through_columns.ok()) << through_columns.status();
  EXPECT_EQ(*through_columns, matrix);
}

TEST(LocalClusterTest, UnevenShardsArePaddedAndCroppedAcrossAReshard) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "uneven");
  transport::SliceInfo a = client.Slice(2);
  Literal odd = F32({3}, {7, 8, 9});
  ArrayHandle tiled = client.Put(a.handle, odd, "{devices=[2]<=[2]}");
  ArrayHandle replicated =
      client.Copy(tiled, odd.shape(), "{replicated}", a.handle);
  ArrayHandle back = client.Copy(replicated, odd.shape(),
                                 "{devices=[2]<=[2]}", a.handle);
  auto value = client.Fetch(back);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(7, 8, 9));
}

TEST(LocalClusterTest, AnArgumentInAnotherShardingIsTransferredIn) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "stage");
  transport::SliceInfo a = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, a.handle, 2);
  ASSERT_TRUE(twice.ok());
  ArrayHandle x = client.Put(a.handle, F32({2}, {4, 5}), "{replicated}");
  ArrayHandle y = client.Execute(*twice, {x})[0];
  auto value = client.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(8, 10));
}

TEST(LocalClusterTest, ATracedGraphRunsAllItsNodesFromOneSubmit) {
  // The paper's Figure 2: f(v) = (b(a(v)), a(c(a(v)))) on three slices.
  auto cluster = MakeCluster({.islands = 3, .devices_per_host = 2});
  TestClient client(*cluster, "figure2");
  transport::SliceInfo sa = client.Slice(2, IslandId(0));
  transport::SliceInfo sb = client.Slice(2, IslandId(1));
  transport::SliceInfo sc = client.Slice(2, IslandId(2));
  auto a = client.Compile(kTimesTwo, sa.handle, 2);
  auto b = client.Compile(kPlusOne, sb.handle, 2);
  auto c = client.Compile(R"(
HloModule halve, num_partitions=2
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  h = f32[] constant(0.5)
  b = f32[1] broadcast(h), dimensions={}
  ROOT y = f32[1] multiply(x, b), sharding={devices=[2]<=[2]}
}
)",
                          sc.handle, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ArrayHandle v = client.Put(sa.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  transport::ProgramGraph graph;
  transport::ExecuteOp a1 = client.MakeExecute(*a, {v});
  transport::ExecuteOp b1 = client.MakeExecute(*b, {a1.outputs[0].handle});
  transport::ExecuteOp c1 = client.MakeExecute(*c, {a1.outputs[0].handle});
  transport::ExecuteOp a2 = client.MakeExecute(*a, {c1.outputs[0].handle});
  for (const auto& op : {a1, b1, c1, a2}) graph.ops.push_back(op);
  client.channel().Submit(std::move(graph));
  auto first = client.Fetch(b1.outputs[0].handle);
  auto second = client.Fetch(a2.outputs[0].handle);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Values(*first), ElementsAre(3, 5));
  EXPECT_THAT(Values(*second), ElementsAre(2, 4));
}

TEST(LocalClusterTest, APieceTheDataPlaneCannotDeliverFailsItsDestination) {
  LocalClusterOptions options{.islands = 2, .devices_per_host = 2};
  options.data_plane = DataPlaneKind::kTcp;  // Whatever the test run says.
  auto cluster = LocalCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // Host 0 has no way to host 1 (both stay up; host 1 still reaches 0,
  // which still knows it: a host not in the peer table is refused).
  (*cluster)->tcp_data_plane(HostId(0))->SetPeer(
      HostId(1), "127.0.0.1:1",
      (*cluster)->tcp_data_plane(HostId(1))->incarnation());
  TestClient client(**cluster, "undelivered");
  transport::SliceInfo a = client.Slice(2, IslandId(0));
  transport::SliceInfo b = client.Slice(2, IslandId(1));
  Literal value = F32({2}, {1, 2});
  ArrayHandle y = client.Put(b.handle, value, "{devices=[2]<=[2]}");
  auto back = client.Fetch(client.Copy(y, value.shape(), "{devices=[2]<=[2]}",
                                       a.handle));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, value);
  EXPECT_EQ((*cluster)->tcp_data_plane(HostId(0))->Stats().pieces_received, 2);
  // The other way the pieces cannot go: the sender reports them and the
  // head fails their destination.
  ArrayHandle x = client.Put(a.handle, value, "{devices=[2]<=[2]}");
  ArrayHandle lost = client.Copy(x, value.shape(), "{devices=[2]<=[2]}",
                                 b.handle);
  absl::Status status = client.Ready(lost);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("was not delivered: data plane: "
                                          "cannot reach host 1"));
  EXPECT_TRUE((*cluster)->head().IsHostAlive(HostId(1)));
}

TEST(LocalClusterTest, AnUnknownArgumentHandleFailsTheOutputsNamingIt) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "unknown");
  transport::SliceInfo a = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, a.handle, 2);
  ASSERT_TRUE(twice.ok());
  ArrayHandle y = client.Execute(*twice, {ArrayHandle(4242)})[0];
  absl::Status status = client.Ready(y);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("unknown array handle 4242"));
  // The dependant of the failed output fails the same way.
  auto plus_one = client.Compile(kPlusOne, a.handle, 2);
  ASSERT_TRUE(plus_one.ok());
  EXPECT_EQ(client.Ready(client.Execute(*plus_one, {y})[0]), status);
}

TEST(LocalClusterTest, AnArgumentOfTheWrongShapeIsInvalidArgument) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "shapes");
  transport::SliceInfo a = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, a.handle, 2);
  ASSERT_TRUE(twice.ok());
  ArrayHandle x = client.Put(a.handle, F32({4}, {1, 2, 3, 4}),
                             "{devices=[2]<=[2]}");
  absl::Status status = client.Ready(client.Execute(*twice, {x})[0]);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("argument 0 of program 'times_two'"));
}

TEST(LocalClusterTest, AMalformedProgramIsRefusedAndOtherSessionsGoOn) {
  auto cluster = MakeCluster({.devices_per_host = 4});
  TestClient bad(*cluster, "bad");
  TestClient good(*cluster, "good");
  transport::SliceInfo bad_slice = bad.Slice(2);
  transport::SliceInfo good_slice = good.Slice(2);
  auto refused =
      bad.Compile("HloModule m\nENTRY e {\n  x = f32[2] parameter(0\n}\n",
                  bad_slice.handle, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("line 4:1"));
  auto twice = good.Compile(kTimesTwo, good_slice.handle, 2);
  ASSERT_TRUE(twice.ok());
  ArrayHandle x =
      good.Put(good_slice.handle, F32({2}, {1, 1}), "{devices=[2]<=[2]}");
  auto value = good.Fetch(good.Execute(*twice, {x})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 2));
}

TEST(LocalClusterTest, AFailingLaunchFailsItsDependantsAndNothingElse) {
  // 12 bytes per device: x (4) + y (4) fit, a third buffer waits.
  auto cluster = MakeCluster({.devices_per_host = 2, .memory_per_device = 12});
  TestClient client(*cluster, "errors");
  transport::SliceInfo a = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, a.handle, 2);
  auto big = client.Compile(R"(
HloModule widen, num_partitions=2
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  s = f32[] reshape(x)
  ROOT y = f32[4] broadcast(s), dimensions={}, sharding={devices=[2]<=[2]}
}
)",
                            a.handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ASSERT_TRUE(big.ok()) << big.status();
  ArrayHandle x = client.Put(a.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  ArrayHandle wide = client.Execute(*big, {x})[0];  // 16 bytes: never fits.
  absl::Status status = client.Ready(wide);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("program 'widen' needs 20 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("budget of 12 bytes"));
  // What is computed from it fails the same way; the rest runs.
  auto halve = client.Compile(R"(
HloModule first_half, num_partitions=2
ENTRY main {
  x = f32[4] parameter(0), sharding={devices=[2]<=[2]}
  ROOT y = f32[1] slice(x), slice={[0:1]}, sharding={devices=[2]<=[2]}
}
)",
                              a.handle, 2);
  ASSERT_TRUE(halve.ok()) << halve.status();
  EXPECT_EQ(client.Ready(client.Execute(*halve, {wide})[0]), status);
  auto value = client.Fetch(client.Execute(*twice, {x})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4));
}

TEST(LocalClusterTest, AnOpThatDoesNotFitYetWaitsUntilMemoryIsFreed) {
  auto cluster = MakeCluster({.devices_per_host = 2, .memory_per_device = 8});
  TestClient client(*cluster, "pressure");
  transport::SliceInfo a = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, a.handle, 2);
  ASSERT_TRUE(twice.ok());
  ArrayHandle x = client.Put(a.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  ArrayHandle blocker =
      client.Put(a.handle, F32({2}, {0, 0}), "{devices=[2]<=[2]}");
  ASSERT_TRUE(client.Ready(blocker).ok());
  ArrayHandle y = client.Execute(*twice, {x})[0];
  auto report = cluster->Status();
  ASSERT_TRUE(report.ok());
  EXPECT_THAT(report->text, HasSubstr("1 waiting reservation(s)"));
  client.channel().Delete({blocker});
  auto value = client.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4));
}

// Two islands of 2 devices with 8 bytes each. times_two on island 0 waits
// for memory (a blocker holds it) and plus_one on island 1 waits for its
// output: z = plus_one(times_two(x)), x = [1, 2].
struct BlockedChain {
  explicit BlockedChain(const std::string& session)
      : cluster(MakeCluster(
            {.islands = 2, .devices_per_host = 2, .memory_per_device = 8})),
        client(*cluster, session) {
    a = client.Slice(2, IslandId(0));
    b = client.Slice(2, IslandId(1));
    auto compiled_twice = client.Compile(kTimesTwo, a.handle, 2);
    auto compiled_plus_one = client.Compile(kPlusOne, b.handle, 2);
    CW_CHECK(compiled_twice.ok() && compiled_plus_one.ok());
    twice = *compiled_twice;
    plus_one = *compiled_plus_one;
    ArrayHandle x =
        client.Put(a.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
    blocker = client.Put(a.handle, F32({2}, {0, 0}), "{devices=[2]<=[2]}");
    CW_CHECK(client.Ready(blocker).ok());
    z = client.Execute(plus_one, {client.Execute(twice, {x})[0]})[0];
  }

  std::unique_ptr<LocalCluster> cluster;
  TestClient client;
  transport::SliceInfo a, b;
  ExecutableHandle twice, plus_one;
  ArrayHandle blocker, z;
};

TEST(LocalClusterTest, StatusShowsAQueuedOpWaitingForAnInputAndWhere) {
  BlockedChain chain("status");
  TestClient& client = chain.client;
  ArrayHandle blocker = chain.blocker, z = chain.z;
  auto report = chain.cluster->Status();
  ASSERT_TRUE(report.ok());
  EXPECT_THAT(report->text,
              HasSubstr("queued 'plus_one' seq 0 partition 0 [status] waits "
                        "for array"));
  EXPECT_THAT(report->text, HasSubstr("output 0 of 'times_two') from device "
                                      "0 (host 0)"));
  EXPECT_THAT(report->json, HasSubstr("\"waiting_for\":[\""));
  client.channel().Delete({blocker});
  auto value = client.Fetch(z);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(3, 5));
}

TEST(LocalClusterTest, AStoppedHostLosesItsArraysAndItsSliceMovesOn) {
  auto cluster = MakeCluster({.hosts_per_island = 3, .devices_per_host = 2});
  TestClient victim(*cluster, "victim");
  TestClient bystander(*cluster, "bystander");
  transport::SliceInfo slice = victim.Slice(2);
  transport::SliceInfo other = bystander.Slice(2);
  const HostId lost = cluster->topology()->HostOf(slice.devices[0]);
  ASSERT_NE(cluster->topology()->HostOf(other.devices[0]), lost);
  auto twice = victim.Compile(kTimesTwo, slice.handle, 2);
  auto other_twice = bystander.Compile(kTimesTwo, other.handle, 2);
  ASSERT_TRUE(twice.ok() && other_twice.ok());
  ArrayHandle x =
      victim.Put(slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  ArrayHandle kept =
      bystander.Put(other.handle, F32({2}, {5, 6}), "{devices=[2]<=[2]}");
  ASSERT_TRUE(victim.Ready(victim.Execute(*twice, {x})[0]).ok());

  ASSERT_TRUE(cluster->StopHost(lost).ok());
  absl::Status gone = victim.Ready(x);
  EXPECT_EQ(gone.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(gone.message(),
              HasSubstr("host " + std::to_string(lost.value())));
  EXPECT_EQ(victim.Ready(victim.Execute(*twice, {x})[0]).code(),
            absl::StatusCode::kDataLoss);
  auto moved = victim.channel().GetSlice(slice.handle).Await();
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_GT(moved->generation, slice.generation);
  for (DeviceId device : moved->devices) {
    EXPECT_NE(cluster->topology()->HostOf(device), lost);
  }
  // The client re-uploads from its snapshot and goes on, same handles.
  ArrayHandle restored =
      victim.Put(slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  auto value = victim.Fetch(victim.Execute(*twice, {restored})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4));
  // Nobody else noticed.
  auto untouched = bystander.Fetch(bystander.Execute(*other_twice, {kept})[0]);
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_THAT(Values(*untouched), ElementsAre(10, 12));
}

TEST(LocalClusterTest, AnOpWaitingForDataFromAStoppedHostFailsWithDataLoss) {
  BlockedChain chain("waiting");
  TestClient& client = chain.client;
  ArrayHandle w =
      client.Put(chain.b.handle, F32({2}, {7, 8}), "{devices=[2]<=[2]}");
  ASSERT_TRUE(chain.cluster->StopHost(HostId(0)).ok());
  absl::Status lost = client.Ready(chain.z);
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  EXPECT_THAT(lost.message(), HasSubstr("host 0"));
  // Work on the healthy island goes on.
  auto value = client.Fetch(client.Execute(chain.plus_one, {w})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(8, 9));
}

TEST(LocalClusterTest, TheThirdSessionWaitsForDevicesUntilAnotherCloses) {
  auto cluster = MakeCluster({.devices_per_host = 4});
  auto first = std::make_unique<TestClient>(*cluster, "first");
  TestClient second(*cluster, "second");
  TestClient third(*cluster, "third");
  transport::SliceInfo one = first->Slice(2);
  second.Slice(2);
  Future<transport::SliceInfo> waiting = third.RequestSlice(2);
  EXPECT_FALSE(waiting.IsReady());
  // Compile before provisioning: ready now, loaded when granted; an
  // Execute sent now runs once the devices come.
  auto twice = third.Compile(kTimesTwo, SliceHandle(1), 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle x = third.Put(SliceHandle(1), F32({2}, {3, 4}),
                            "{devices=[2]<=[2]}");
  ArrayHandle y = third.Execute(*twice, {x})[0];
  first.reset();  // Closes its session.
  auto granted = waiting.AwaitFor(absl::Seconds(30));
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->devices, one.devices);
  auto value = third.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(6, 8));
}

TEST(LocalClusterTest, AQueuedSliceIsGrantedWhenAHostJoins) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient first(*cluster, "first");
  TestClient second(*cluster, "second");
  first.Slice(2);
  Future<transport::SliceInfo> waiting = second.RequestSlice(2);
  auto twice = second.Compile(kTimesTwo, SliceHandle(1), 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle y = second.Execute(
      *twice, {second.Put(SliceHandle(1), F32({2}, {3, 4}),
                          "{devices=[2]<=[2]}")})[0];
  EXPECT_FALSE(waiting.IsReady());
  absl::StatusOr<HostId> joined = cluster->AddHost(IslandId(0), 2);
  ASSERT_TRUE(joined.ok()) << joined.status();
  auto granted = waiting.AwaitFor(absl::Seconds(30));
  ASSERT_TRUE(granted.ok()) << granted.status();
  for (DeviceId device : granted->devices) {
    EXPECT_EQ(cluster->topology()->HostOf(device), *joined);
  }
  auto value = second.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(6, 8));
}

TEST(LocalClusterTest, AStoppedHostsSliceMovesOntoAHostThatJoinsLater) {
  auto cluster = MakeCluster({.devices_per_host = 2});
  TestClient client(*cluster, "client");
  transport::SliceInfo slice = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, slice.handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ASSERT_TRUE(cluster->StopHost(HostId(0)).ok());
  // No spares: the slice is broken and refuses work until a host joins.
  ArrayHandle early =
      client.Put(slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  EXPECT_EQ(client.Ready(early).code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<HostId> joined = cluster->AddHost(IslandId(0), 2);
  ASSERT_TRUE(joined.ok()) << joined.status();
  auto moved = client.channel().GetSlice(slice.handle).Await();
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_GT(moved->generation, slice.generation);
  for (DeviceId device : moved->devices) {
    EXPECT_EQ(cluster->topology()->HostOf(device), *joined);
  }
  // Its executable was reloaded there: the same handles run.
  ArrayHandle x =
      client.Put(slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  auto value = client.Fetch(client.Execute(*twice, {x})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4));
}

TEST(LocalClusterTest, ARestartedHostIsANewHostAndItsOldBuffersStayLost) {
  auto cluster = MakeCluster({.hosts_per_island = 2, .devices_per_host = 1});
  TestClient client(*cluster, "client");
  transport::SliceInfo slice = client.Slice(2);
  auto twice = client.Compile(kTimesTwo, slice.handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle x =
      client.Put(slice.handle, F32({2}, {1, 2}), "{devices=[2]<=[2]}");
  ASSERT_TRUE(client.Ready(x).ok());
  absl::StatusOr<HostId> restarted = cluster->RestartHost(HostId(1));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(*restarted, HostId(2));
  EXPECT_FALSE(cluster->head().IsHostAlive(HostId(1)));
  EXPECT_EQ(cluster->topology()->DevicesOfHost(*restarted)[0], DeviceId(2));
  EXPECT_EQ(client.Ready(x).code(), absl::StatusCode::kDataLoss);
  // The slice moved onto the new incarnation; work on it runs.
  auto moved = client.channel().GetSlice(slice.handle).Await();
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->devices, (std::vector<DeviceId>{DeviceId(0), DeviceId(2)}));
  ArrayHandle again =
      client.Put(slice.handle, F32({2}, {3, 4}), "{devices=[2]<=[2]}");
  auto value = client.Fetch(client.Execute(*twice, {again})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(6, 8));
}

TEST(LocalClusterTest, ASeveredHostIsFoundDeadByItsHeartbeats) {
  auto cluster = MakeCluster({.hosts_per_island = 2,
                              .devices_per_host = 1,
                              .heartbeat_interval = absl::Milliseconds(20),
                              .heartbeat_timeout = absl::Milliseconds(200)});
  TestClient client(*cluster, "client");
  transport::SliceInfo slice = client.Slice(1, IslandId(0));
  const HostId severed = cluster->topology()->HostOf(slice.devices[0]);
  ArrayHandle x = client.Put(slice.handle, F32({1}, {1}), "{replicated}");
  ASSERT_TRUE(client.Ready(x).ok());
  ASSERT_TRUE(cluster->SeverHost(severed).ok());
  EXPECT_FALSE(cluster->head().IsHostAlive(severed));
  absl::Status lost = client.Ready(x);
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(lost.message(), HasSubstr("no heartbeat answered"));
}

TEST(LocalClusterTest, AnIslandNamedByAJoiningHostComesIntoBeing) {
  auto cluster = MakeCluster({.devices_per_host = 1});
  TestClient client(*cluster, "client");
  absl::StatusOr<HostId> joined = cluster->AddHost(IslandId(2), 2);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(cluster->topology()->num_islands(), 3);
  transport::SliceInfo slice = client.Slice(2, IslandId(2));
  auto twice = client.Compile(kTimesTwo, slice.handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle x =
      client.Put(slice.handle, F32({2}, {5, 6}), "{devices=[2]<=[2]}");
  auto value = client.Fetch(client.Execute(*twice, {x})[0]);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(10, 12));
}

// Loops forever: a program only its owner can stop.
constexpr char kSpinForever[] = R"(
HloModule spin, num_partitions=2
cond {
  p = f32[1] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  p = f32[1] parameter(0)
  one = f32[] constant(1)
  b = f32[1] broadcast(one), dimensions={}
  ROOT s = f32[1] add(p, b)
}
ENTRY main {
  x = f32[1] parameter(0), sharding={devices=[2]<=[2]}
  ROOT w = f32[1] while(x), condition=cond, body=body, sharding={devices=[2]<=[2]}
}
)";

// Notifies once every partition of a program has started.
class StartWatcher : public EventSink {
 public:
  StartWatcher(std::string program, int partitions)
      : program_(std::move(program)), waiting_(partitions) {}
  void OpStarted(const OpEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (event.program == program_ && --waiting_ == 0) started.Notify();
  }
  absl::Notification started;

 private:
  const std::string program_;
  absl::Mutex mu_;
  int waiting_;
};

TEST(LocalClusterTest, AProgramThatLoopsForeverStopsWhenItsSessionCloses) {
  auto watcher = std::make_shared<StartWatcher>("spin", 2);
  auto cluster =
      MakeCluster({.devices_per_host = 2, .event_sink = watcher});
  auto first = std::make_unique<TestClient>(*cluster, "first");
  TestClient second(*cluster, "second");
  transport::SliceInfo mine = first->Slice(2);
  auto spin = first->Compile(kSpinForever, mine.handle, 2);
  ASSERT_TRUE(spin.ok()) << spin.status();
  ArrayHandle x =
      first->Put(mine.handle, F32({2}, {0, 0}), "{devices=[2]<=[2]}");
  ArrayHandle queued = first->Execute(*spin, {x})[0];
  first->Execute(*spin, {queued});  // Queued behind the running one.
  ASSERT_TRUE(
      watcher->started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  Future<transport::SliceInfo> waiting = second.RequestSlice(2);
  EXPECT_FALSE(waiting.IsReady());
  first.reset();  // Closes the session: both launches stop.
  auto granted = waiting.AwaitFor(absl::Seconds(30));
  ASSERT_TRUE(granted.ok()) << granted.status();
  auto twice = second.Compile(kTimesTwo, granted->handle, 2);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ArrayHandle y = second.Execute(
      *twice, {second.Put(granted->handle, F32({2}, {3, 4}),
                          "{devices=[2]<=[2]}")})[0];
  auto value = second.Fetch(y);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(6, 8));
}

TEST(LocalClusterTest, GangOrderNeverDeadlocksOverlappingCollectives) {
  auto cluster = MakeCluster({.devices_per_host = 4});
  constexpr int kSteps = 1000;
  std::vector<std::unique_ptr<TestClient>> clients;
  std::vector<transport::SliceInfo> slices;
  std::vector<ExecutableHandle> programs;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(
        std::make_unique<TestClient>(*cluster, "gang" + std::to_string(i)));
    slices.push_back(clients[i]->Slice(3, std::nullopt, /*shared=*/true));
    auto program = clients[i]->Compile(kMeanPlusOne, slices[i].handle, 3);
    ASSERT_TRUE(program.ok()) << program.status();
    programs.push_back(*program);
  }
  // Overlapping device sets, e.g. {0,1,2} and {1,2,3} or the like.
  int shared_devices = 0;
  for (DeviceId d : slices[0].devices) {
    shared_devices += std::count(slices[1].devices.begin(),
                                 slices[1].devices.end(), d);
  }
  EXPECT_GE(shared_devices, 2);
  std::vector<ArrayHandle> last(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      TestClient& client = *clients[i];
      ArrayHandle x = client.Put(slices[i].handle,
                                 Literal::Scalar(PrimitiveType::kF32, 0),
                                 "{replicated}");
      for (int step = 0; step < kSteps; ++step) {
        ArrayHandle next = client.Execute(programs[i], {x})[0];
        client.channel().Delete({x});
        x = next;
      }
      last[i] = x;
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(clients[i]->Ready(last[i]).ok());  // Every shard.
    auto value = clients[i]->Fetch(last[i]);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(value->GetAsDouble(0), kSteps);
  }
  EXPECT_EQ(cluster->collectives(IslandId(0)).NumLive(), 0);
}

}  // namespace local_cluster_test
}  // namespace causeway::cluster
