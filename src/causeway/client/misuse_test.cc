// The C++ API used wrongly: default-constructed handles, a moved-from
// Session, a Session or Client that outlives its LocalCluster, a cluster
// destroyed while a program loops, options that make no sense. Each gives a
// clear error (or is harmless), never a crash or a hang.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "causeway/client/array.h"
#include "causeway/client/executable.h"
#include "causeway/client/local_client.h"
#include "causeway/client/program_trace.h"
#include "causeway/client/session.h"
#include "causeway/client/test_programs.h"
#include "causeway/client/testing/fake_session_channel.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/trace/events.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::client {
namespace misuse_test {

using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::Vector;
using ::testing::HasSubstr;

TEST(MisuseTest, ADefaultArrayAnswersWithEmptyValuesAndErrors) {
  Array array;
  EXPECT_FALSE(array.valid());
  EXPECT_EQ(array.handle(), ArrayHandle());
  EXPECT_FALSE(array.shape().IsArray());
  EXPECT_FALSE(array.slice().valid());
  EXPECT_EQ(array.Ready().Await().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(array.ToHost().Await().status().message(),
              HasSubstr("invalid (default) Array"));
  EXPECT_EQ(array.ShardsToHost().Await().status().code(),
            absl::StatusCode::kInvalidArgument);
  array.Delete();
  EXPECT_FALSE(array.IsDeleted());
  EXPECT_EQ(array.ToString(), "array (invalid)");
}

TEST(MisuseTest, ADefaultExecutableAndSliceRefuseWork) {
  Executable executable;
  EXPECT_EQ(executable.name(), "");
  EXPECT_TRUE(executable.parameter_shapes().empty());
  EXPECT_TRUE(executable.output_shardings().empty());
  EXPECT_FALSE(executable.slice().valid());
  absl::StatusOr<std::vector<Array>> outputs = executable.Execute({});
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  Slice slice;
  EXPECT_EQ(slice.num_devices(), 0);
  EXPECT_EQ(slice.Ready().Await().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(slice.Release().Await().ok());
}

TEST(MisuseTest, AMovedFromSessionFailsEveryCall) {
  absl::StatusOr<Session> opened =
      Session::Open(std::make_unique<FakeSessionChannel>());
  ASSERT_TRUE(opened.ok()) << opened.status();
  Session session = *std::move(opened);
  Session moved = std::move(session);
  EXPECT_TRUE(session.closed());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(session.id(), SessionId());
  EXPECT_EQ(session.name(), "");
  EXPECT_THAT(session.CreateSlice(1).status().message(),
              HasSubstr("moved-from Session"));
  EXPECT_EQ(session.Compile("HloModule m", Slice()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.FromHost(Vector({1}), Slice(), Sharding::Replicated())
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.Status().Await().status().code(),
            absl::StatusCode::kFailedPrecondition);
  ProgramTrace trace(session);
  EXPECT_EQ(trace.Submit().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session.Close().code(), absl::StatusCode::kFailedPrecondition);
  // The session it moved into works.
  EXPECT_TRUE(moved.CreateSlice(1).ok());
}

// y = x + 1 forever.
constexpr char kForever[] = R"(HloModule forever
always {
  s = f32[2] parameter(0)
  ROOT t = pred[] constant(true)
}
step {
  s = f32[2] parameter(0)
  one = f32[] constant(1)
  b = f32[2] broadcast(one), dimensions={}
  ROOT n = f32[2] add(s, b)
}
ENTRY main {
  x = f32[2] parameter(0)
  ROOT w = f32[2] while(x), condition=always, body=step
})";

TEST(MisuseTest, ASessionAndClientThatOutliveTheirClusterFailCleanly) {
  auto cluster = cluster::LocalCluster::Create({.devices_per_host = 2});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<Client> client = ConnectLocal(**cluster);
  absl::StatusOr<Session> session = client->OpenSession({.name = "late"});
  ASSERT_TRUE(session.ok()) << session.status();
  Slice slice = *session->CreateSlice(2);
  Array x = *session->FromHost(Vector({1, 2}), slice, Sharding::Replicated());
  ASSERT_TRUE(x.Ready().Await().ok());
  cluster->reset();
  EXPECT_THAT(x.ToHost().Await().status().message(),
              HasSubstr("the LocalCluster was shut down"));
  EXPECT_EQ(session->CreateSlice(1)->Ready().Await().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(client->OpenSession({}).status().message(),
              HasSubstr("was shut down"));
  // Destroying them afterwards (at the end of the scope) is harmless.
}

// Notifies when a launch starts running on a device.
class StartSink : public trace::EventSink {
 public:
  void OpStarted(const trace::OpEvent& event) override {
    if (!started_.HasBeenNotified()) started_.Notify();
  }
  bool AwaitStarted() {
    return started_.WaitForNotificationWithTimeout(absl::Seconds(60));
  }

 private:
  absl::Notification started_;
};

TEST(MisuseTest, DestroyingTheClusterStopsAProgramThatLoopsForever) {
  auto sink = std::make_shared<StartSink>();
  auto cluster = cluster::LocalCluster::Create(
      {.devices_per_host = 1, .event_sink = sink});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<Client> client = ConnectLocal(**cluster);
  Session session = *client->OpenSession({.name = "looping"});
  Slice slice = *session.CreateSlice(1);
  Executable forever = *session.Compile(kForever, slice);
  Array x = *session.FromHost(Vector({0, 0}), slice, Sharding::Replicated());
  std::vector<Array> y = *forever.Execute({x});
  Future<Literal> never = y[0].ToHost();
  ASSERT_TRUE(sink->AwaitStarted());
  // The session is still open and its program runs: the cluster closes it,
  // which stops the loop, instead of waiting for the program forever.
  cluster->reset();
  EXPECT_FALSE(never.Await().ok());
}

TEST(MisuseTest, LocalClusterRefusesOptionsThatMakeNoSense) {
  auto too_many = cluster::LocalCluster::Create({.devices_per_host = 40000});
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(),
              HasSubstr("more than the 1024 devices one process runs"));
  auto negative = cluster::LocalCluster::Create(
      {.collective_timeout = absl::Seconds(-1)});
  EXPECT_THAT(negative.status().message(),
              HasSubstr("collective_timeout must be positive, got -1s"));
  auto no_memory = cluster::LocalCluster::Create({.memory_per_device = 0});
  EXPECT_THAT(no_memory.status().message(),
              HasSubstr("memory_per_device must be positive"));
  auto no_hosts = cluster::LocalCluster::Create({.hosts_per_island = 0});
  EXPECT_THAT(no_hosts.status().message(), HasSubstr("must be at least 1"));
  auto backwards_heartbeat = cluster::LocalCluster::Create(
      {.heartbeat_interval = absl::Milliseconds(-5)});
  EXPECT_THAT(backwards_heartbeat.status().message(),
              HasSubstr("heartbeat_interval must not be negative"));
  auto no_window = cluster::LocalCluster::Create(
      {.max_inflight_launches_per_island = 0});
  EXPECT_EQ(no_window.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace misuse_test
}  // namespace causeway::client
