// The distributed mode with real processes: `causeway head` and
// `causeway worker` processes on loopback (port 0), a client in this
// process (client::Connect) or in a process of its own (session_holder),
// readiness by the lines they print, and every process stopped by the
// fixture even when a test fails.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/cli/cluster_process.h"
#include "causeway/cli/testing/process_cluster.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal_test_util.h"
#include "causeway/transport/grpc_session_channel.h"
#include "gmock/gmock.h"
#include "nlohmann/json.hpp"
#include "gtest/gtest.h"

namespace causeway::cli {
namespace multi_process_test {

using hlo::testutil::F32;
using hlo::testutil::Values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::kStart;
using testing::kWait;
using testing::OpenSessionWithSlice;
using testing::ProcessClusterTest;
using testing::SessionSlice;
using testing::SliceOverTwoProcesses;
using testing::SumOfTwo;
using testing::SwappedThenDoubled;
using testing::TimesTwo;
using testing::TimesTwoProgram;
using testing::Worker;

// Sums over both partitions, forever: a launch that stays inside its
// collectives until a peer goes.
constexpr char kSpinningAllReduce[] = R"(
HloModule spin, num_partitions=2
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
  x = f32[2] parameter(0), sharding={devices=[2]<=[2]}
  t = (f32[2]) tuple(x)
  w = (f32[2]) while(t), condition=cond, body=body
  ROOT y = f32[2] get-tuple-element(w), index=0, sharding={devices=[2]<=[2]}
}
)";

TEST_F(ProcessClusterTest, AProgramRunsAcrossTwoWorkerProcesses) {
  StartHead();
  Worker& first = AddWorker(1);
  Worker& second = AddWorker(1);
  EXPECT_NE(first.host, second.host);
  std::unique_ptr<client::Client> client = Connect();
  EXPECT_EQ(client->devices().size(), 2u);
  // One device in each process.
  absl::StatusOr<SessionSlice> two = SliceOverTwoProcesses(*client);
  ASSERT_TRUE(two.ok()) << two.status();
  absl::StatusOr<std::vector<float>> y =
      TimesTwo(two->session, two->slice, 1.5, -4);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(3, -8));
}

// A worker's ready line is what scripts and tests wait on: when it is out,
// the head has the worker alive and its devices in the pool.
TEST_F(ProcessClusterTest, AWorkersReadyLineComesOnceTheHeadHasItAlive) {
  StartHead();
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<client::Session> session =
      client->OpenSession({.name = "watcher"});
  ASSERT_TRUE(session.ok()) << session.status();
  for (int round = 0; round < 3; ++round) {
    const HostId host = AddWorker(2).host;
    absl::StatusOr<transport::StatusReport> report =
        session->Status().AwaitFor(kWait);
    ASSERT_TRUE(report.ok()) << report.status();
    const nlohmann::json status = nlohmann::json::parse(report->json);
    bool alive = false;
    size_t devices = 0;
    for (const auto& entry : status["hosts"]) {
      if (entry["host"].get<int64_t>() != host.value()) continue;
      alive = entry["alive"].get<bool>();
      if (entry.contains("devices")) devices = entry["devices"].size();
    }
    EXPECT_TRUE(alive) << "host " << host << " in " << report->text;
    EXPECT_EQ(devices, 2u) << report->text;
  }
}

TEST_F(ProcessClusterTest, ArraysMoveBetweenWorkerProcessesOnTheDataPlane) {
  StartHead();
  AddWorker(1);
  AddWorker(1);
  std::unique_ptr<client::Client> client = Connect();
  // One device in each process.
  absl::StatusOr<SessionSlice> two = SliceOverTwoProcesses(*client);
  ASSERT_TRUE(two.ok()) << two.status();
  // Each device takes the other's half, then they go back into the
  // program's own sharding: both times both halves cross the processes.
  absl::StatusOr<std::pair<std::vector<float>, std::vector<float>>> moved =
      SwappedThenDoubled(two->session, two->slice, 1.5, -4);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(moved->first, ElementsAre(1.5, -4));
  EXPECT_THAT(moved->second, ElementsAre(3, -8));
}

TEST_F(ProcessClusterTest, AnAllReduceAcrossTwoWorkerProcessesMatchesEmbedded) {
  StartHead();
  AddWorker(1);
  AddWorker(1);
  std::unique_ptr<client::Client> client = Connect();
  // One device in each process.
  absl::StatusOr<SessionSlice> two = SliceOverTwoProcesses(*client);
  ASSERT_TRUE(two.ok()) << two.status();
  absl::StatusOr<std::vector<float>> across =
      SumOfTwo(two->session, two->slice);
  ASSERT_TRUE(across.ok()) << across.status();

  // The same program embedded, its devices in one process.
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> local =
      cluster::LocalCluster::Create({.devices_per_host = 2});
  ASSERT_TRUE(local.ok()) << local.status();
  std::unique_ptr<client::Client> embedded = client::ConnectLocal(**local);
  absl::StatusOr<client::Session> local_session =
      embedded->OpenSession({.name = "embedded"});
  ASSERT_TRUE(local_session.ok()) << local_session.status();
  absl::StatusOr<client::Slice> local_slice = local_session->CreateSlice(2);
  ASSERT_TRUE(local_slice.ok()) << local_slice.status();
  absl::StatusOr<std::vector<float>> within =
      SumOfTwo(*local_session, *local_slice);
  ASSERT_TRUE(within.ok()) << within.status();
  EXPECT_THAT(*within, ElementsAre(11, 22, 11, 22));
  EXPECT_EQ(*across, *within);
  // Twice: the second launch reuses the contexts of the first.
  across = SumOfTwo(two->session, two->slice);
  ASSERT_TRUE(across.ok()) << across.status();
  EXPECT_EQ(*across, *within);
}

// Polls `session`'s status until every device in `devices` runs program
// `name`; false if they do not by `deadline`.
bool AwaitRunning(client::Session& session, const std::vector<DeviceId>& devices,
                  const std::string& name, absl::Time deadline) {
  while (absl::Now() < deadline) {
    absl::StatusOr<transport::StatusReport> report =
        session.Status().AwaitFor(kWait);
    if (!report.ok()) return false;
    const nlohmann::json status = nlohmann::json::parse(report->json);
    size_t running = 0;
    for (const auto& host : status["hosts"]) {
      if (!host.contains("devices")) continue;
      for (const auto& device : host["devices"]) {
        const DeviceId id(device["device"].get<int64_t>());
        if (std::find(devices.begin(), devices.end(), id) != devices.end() &&
            device["running"].is_object() &&
            device["running"]["program"] == name) {
          ++running;
        }
      }
    }
    if (running == devices.size()) return true;
  }
  return false;
}

// Loops forever without collectives: a program only its session can stop.
constexpr char kSpinForever[] = R"(
HloModule spin_alone, num_partitions=2
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

TEST_F(ProcessClusterTest, AProgramThatLoopsForeverStopsWhenItsSessionCloses) {
  StartHead();
  AddWorker(1);
  AddWorker(1);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> first =
      OpenSessionWithSlice(*client, 2, "first");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<transport::SliceInfo> granted =
      first->slice.Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  absl::StatusOr<client::Executable> spin =
      first->session.Compile(kSpinForever, first->slice);
  ASSERT_TRUE(spin.ok()) << spin.status();
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
  absl::StatusOr<client::Array> x =
      first->session.FromHost(F32({2}, {0, 0}), first->slice, *tiled);
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<std::vector<client::Array>> running = spin->Execute({*x});
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(spin->Execute({(*running)[0]}).ok());  // Queued behind it.
  ASSERT_TRUE(AwaitRunning(first->session, granted->devices, "spin_alone",
                           absl::Now() + kWait));

  absl::StatusOr<SessionSlice> second =
      OpenSessionWithSlice(*client, 2, "second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->slice.Ready().IsReady());
  // Both launches stop on both workers.
  ASSERT_TRUE(first->session.Close().ok());
  absl::StatusOr<std::vector<float>> y =
      TimesTwo(second->session, second->slice, 3, 4);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(6, 8));
}

TEST_F(ProcessClusterTest, AnOpThatDoesNotFitYetWaitsUntilMemoryIsFreed) {
  StartHead();
  // 8 bytes a device: room for two f32[1] shards.
  AddWorker(1, 0, {"--memory-per-device", "8"});
  AddWorker(1, 0, {"--memory-per-device", "8"});
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened =
      OpenSessionWithSlice(*client, 2, "pressure");
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<client::Executable> twice =
      session.Compile(TimesTwoProgram(), slice);
  ASSERT_TRUE(twice.ok()) << twice.status();
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
  absl::StatusOr<client::Array> x =
      session.FromHost(F32({2}, {1, 2}), slice, *tiled);
  absl::StatusOr<client::Array> blocker =
      session.FromHost(F32({2}, {0, 0}), slice, *tiled);
  ASSERT_TRUE(x.ok() && blocker.ok());
  ASSERT_TRUE(blocker->Ready().AwaitFor(kWait).ok());
  absl::StatusOr<std::vector<client::Array>> y = twice->Execute({*x});
  ASSERT_TRUE(y.ok()) << y.status();
  // Its output waits for memory on both workers.
  bool waits = false;
  for (absl::Time deadline = absl::Now() + kWait;
       !waits && absl::Now() < deadline;) {
    absl::StatusOr<transport::StatusReport> report =
        session.Status().AwaitFor(kWait);
    ASSERT_TRUE(report.ok()) << report.status();
    waits = absl::StrContains(report->text, "1 waiting reservation(s)");
  }
  ASSERT_TRUE(waits);
  EXPECT_FALSE((*y)[0].Ready().IsReady());
  blocker->Delete();
  absl::StatusOr<hlo::Literal> value = (*y)[0].ToHost().AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4));
}

// Polls the head's trace until it holds how program `name` ended on
// `device`; that status text ("OK", "DATA_LOSS: ...").
absl::StatusOr<std::string> AwaitFinished(client::Session& session,
                                          DeviceId device,
                                          const std::string& name,
                                          absl::Time deadline) {
  while (absl::Now() < deadline) {
    CW_ASSIGN_OR_RETURN(std::string trace, session.Trace().AwaitFor(kWait));
    const nlohmann::json events = nlohmann::json::parse(trace);
    for (const auto& event : events["traceEvents"]) {
      if (event.value("cat", "") == "op" &&
          event.value("name", "").starts_with(name) &&
          event.value("tid", int64_t{-1}) == device.value()) {
        return event["args"]["status"].get<std::string>();
      }
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no end of ", name, " on device ", device.value()));
}

TEST_F(ProcessClusterTest, ASurvivorOfAWorkerKilledMidAllReduceFailsWithDataLoss) {
  // Timeouts far longer than the test waits: only the peer's death can
  // end the survivor's collective in time.
  StartHead({"--worker-timeout", "120"});
  AddWorker(1, 0, {"--collective-timeout", "300"});
  AddWorker(1, 0, {"--collective-timeout", "300"});
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<transport::SliceInfo> granted = slice.Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  // One all-reduce first connects the two workers' Gloo context, which
  // spin reuses (cached per island, epoch and devices): the kill below
  // then lands inside an all-reduce, not in the connect (a peer that dies
  // while the survivor still connects fails it with UNAVAILABLE, "Connection
  // refused": 1 run in 10 hit that when spin connected for itself).
  absl::StatusOr<std::vector<float>> connected = SumOfTwo(session, slice);
  ASSERT_TRUE(connected.ok()) << connected.status();
  absl::StatusOr<client::Executable> spin =
      session.Compile(kSpinningAllReduce, slice);
  ASSERT_TRUE(spin.ok()) << spin.status();
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
  absl::StatusOr<client::Array> x =
      session.FromHost(F32({4}, {1, 2, 3, 4}), slice, *tiled);
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<std::vector<client::Array>> y = spin->Execute({*x});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_TRUE(
      AwaitRunning(session, granted->devices, "spin", absl::Now() + kWait));

  const HostId victim = client->topology()->HostOf(granted->devices[0]);
  const DeviceId survivor = granted->devices[1];
  for (Worker& worker : workers_) {
    if (worker.host == victim) worker.process->Signal(SIGKILL);
  }
  absl::StatusOr<std::string> ended =
      AwaitFinished(session, survivor, "spin", absl::Now() + kWait);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_THAT(*ended, ::testing::StartsWith("DATA_LOSS")) << *ended;
  absl::Status lost = (*y)[0].ToHost().AwaitFor(kWait).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
}

TEST_F(ProcessClusterTest, ASigkilledWorkerIsDeadAtOnceAndItsArraysAreDataLoss) {
  // A heartbeat timeout far longer than the test waits: only the broken
  // stream can tell the head in time.
  StartHead({"--worker-timeout", "120"});
  AddWorker(1);
  AddWorker(1);
  AddWorker(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<transport::SliceInfo> granted = slice.Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({2});
  absl::StatusOr<client::Array> x =
      session.FromHost(F32({2}, {1, 2}), slice, *tiled);
  ASSERT_TRUE(x.ok() && x->Ready().AwaitFor(kWait).ok());

  const HostId victim = client->topology()->HostOf(granted->devices[0]);
  for (Worker& worker : workers_) {
    if (worker.host == victim) worker.process->Signal(SIGKILL);
  }
  absl::StatusOr<std::string> why = AwaitHostDead(victim, absl::Seconds(20));
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_THAT(*why, HasSubstr("connection broke"));
  absl::Status lost = x->ToHost().AwaitFor(kWait).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  // The client and the head go on: the slice is remapped onto spare
  // devices and runs again.
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 5, 6);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(10, 12));
}

TEST_F(ProcessClusterTest, AFetchInFlightWhenItsWorkerIsKilledIsDataLoss) {
  // Only the broken stream can tell the head in time.
  StartHead({"--worker-timeout", "120"});
  Worker& victim = AddWorker(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<client::Array> x = session.FromHost(
      F32({2}, {1, 2}), slice, *client::Sharding::TiledByDims({2}));
  ASSERT_TRUE(x.ok() && x->Ready().AwaitFor(kWait).ok());

  // Stopped, the worker answers nothing: the fetch waits for it.
  victim.process->Signal(SIGSTOP);
  ASSERT_TRUE(victim.process->AwaitStopped().ok());
  Future<hlo::Literal> fetch = x->ToHost();
  // The head handles a session's requests in order: once this is
  // answered, the fetch is on its way to the worker.
  ASSERT_TRUE(slice.Info().AwaitFor(kWait).ok());
  victim.process->Signal(SIGKILL);
  // The worker's stream broke because the worker is gone, not a call that
  // failed: what it held is lost.
  absl::Status lost = fetch.AwaitFor(kWait).status();
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss) << lost;
  absl::StatusOr<std::string> why = AwaitHostDead(victim.host, kWait);
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_THAT(*why, HasSubstr("its connection broke"));
}

TEST_F(ProcessClusterTest, ASigstoppedWorkerIsDeclaredDeadByItsHeartbeats) {
  StartHead({"--worker-timeout", "1"});
  Worker& stopped = AddWorker(1);
  AddWorker(1);
  stopped.process->Signal(SIGSTOP);
  absl::StatusOr<std::string> why = AwaitHostDead(stopped.host, absl::Seconds(20));
  stopped.process->Signal(SIGKILL);
  stopped.process->Signal(SIGCONT);
  ASSERT_TRUE(why.ok()) << why.status();
  // Its heartbeats, not its stream: a stopped process keeps its
  // connection.
  EXPECT_THAT(*why, HasSubstr("no heartbeat answered for "));
  EXPECT_THAT(*why, HasSubstr("(timeout 1s)"));
}

TEST_F(ProcessClusterTest, AKilledClientsDevicesGoToAQueuedSessionAtOnce) {
  StartHead({"--session-lease", "120"});
  AddWorker(2);
  std::unique_ptr<ChildProcess> holder = StartSessionHolder(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  EXPECT_FALSE(slice.Ready().IsReady());
  holder->Signal(SIGKILL);  // Its stream breaks: no lease to wait for.
  absl::StatusOr<transport::SliceInfo> granted = slice.Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 1, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(2, 4));
}

TEST_F(ProcessClusterTest, AnIdleClientKeepsItsSessionByItsKeepalives) {
  StartHead({"--session-lease", "1"});
  AddWorker(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  ASSERT_TRUE(slice.Ready().AwaitFor(kWait).ok());
  // Idle for three leases: only the channel's keepalives (every quarter
  // of the lease) keep the session open.
  absl::SleepFor(absl::Seconds(3));
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 1, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(2, 4));
}

TEST_F(ProcessClusterTest, ASilentClientsSessionExpiresWithItsLease) {
  StartHead({"--session-lease", "1"});
  AddWorker(2);
  std::unique_ptr<ChildProcess> holder = StartSessionHolder(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  // Stopped, the holder makes no call; its connection stays up until
  // gRPC keepalive gives up on it, seconds after the lease has ended.
  holder->Signal(SIGSTOP);
  absl::StatusOr<transport::SliceInfo> granted = slice.Ready().AwaitFor(kWait);
  holder->Signal(SIGCONT);
  ASSERT_TRUE(granted.ok()) << granted.status();
  // The head ended the holder's session for its lease, not for a closed
  // stream ("it was closed"): continued, the holder hears why.
  absl::StatusOr<std::string> heard =
      holder->ReadLineStartingWith("after the stop: ", kWait);
  ASSERT_TRUE(heard.ok()) << heard.status();
  EXPECT_THAT(*heard, HasSubstr("is not open: its lease of 1s expired"));
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 3, 4);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(6, 8));
}

TEST_F(ProcessClusterTest, WorkersThatLoseTheHeadRetryThenExitSayingWhy) {
  StartHead();
  Worker& worker = AddWorker(1, 0, {"--retry-seconds", "1"});
  head_->Signal(SIGKILL);
  absl::StatusOr<std::string> retrying =
      worker.process->ReadLineStartingWith("causeway worker: ", kWait,
                                           /*echo=*/false);
  ASSERT_TRUE(retrying.ok()) << retrying.status();
  EXPECT_THAT(*retrying, HasSubstr("registering again"));
  absl::StatusOr<std::string> exiting = worker.process->ReadLineStartingWith(
      "causeway worker: ", kWait, /*echo=*/false);
  ASSERT_TRUE(exiting.ok()) << exiting.status();
  EXPECT_THAT(*exiting, HasSubstr("lost the head"));
  EXPECT_THAT(*exiting, HasSubstr("exiting"));
  absl::StatusOr<int> status = worker.process->Wait(kWait);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(ChildProcess::DescribeWaitStatus(*status), "exited with status 1");
}

TEST_F(ProcessClusterTest, ARestartedHeadStartsEmptyAndWorkersRegisterAgain) {
  StartHead();
  Worker& worker = AddWorker(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> old = OpenSessionWithSlice(*client, 2, "old");
  ASSERT_TRUE(old.ok() && old->slice.Ready().AwaitFor(kWait).ok());

  const std::string address = address_;
  head_->Signal(SIGKILL);
  ASSERT_TRUE(head_->Wait(kWait).ok());
  StartHead({}, address);  // The same address, a new (empty) head.
  ASSERT_EQ(address_, address);
  worker.host = AwaitRegistered(worker);

  // The old session is gone, with a clear error.
  absl::Status gone = old->session.CreateSlice(2).status();
  if (gone.ok()) {
    gone = old->session.CreateSlice(2)->Ready().AwaitFor(kWait).status();
  }
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable) << gone;
  EXPECT_THAT(gone.message(), HasSubstr("ended"));
  // A new client works on the new head.
  std::unique_ptr<client::Client> fresh = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*fresh, 2, "new");
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 7, 8);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(14, 16));
}

TEST_F(ProcessClusterTest, AWorkerJoiningLaterServesAQueuedSlice) {
  StartHead();
  AddWorker(2);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(*client, 4);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<client::Executable> program =
      session.Compile(TimesTwoProgram(4), slice);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(slice.Ready().IsReady());
  AddWorker(2);
  absl::StatusOr<transport::SliceInfo> granted = slice.Ready().AwaitFor(kWait);
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->devices.size(), 4u);
  absl::StatusOr<client::Sharding> tiled = client::Sharding::TiledByDims({4});
  absl::StatusOr<client::Array> x =
      session.FromHost(F32({4}, {1, 2, 3, 4}), slice, *tiled);
  ASSERT_TRUE(x.ok()) << x.status();
  absl::StatusOr<std::vector<client::Array>> y = program->Execute({*x});
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<hlo::Literal> value = (*y)[0].ToHost().AwaitFor(kWait);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Values(*value), ElementsAre(2, 4, 6, 8));
}

TEST_F(ProcessClusterTest, StatusPrintsEveryHostAndDevice) {
  StartHead();
  AddWorker(2);
  AddWorker(1, 1);
  absl::StatusOr<std::unique_ptr<ChildProcess>> status = ChildProcess::Start(
      {CAUSEWAY_BINARY, "status", "--head", address_});
  ASSERT_TRUE(status.ok()) << status.status();
  std::string text;
  while (true) {
    absl::StatusOr<std::string> line =
        (*status)->ReadLineStartingWith("", kWait, /*echo=*/false);
    if (!line.ok()) break;  // Its output ended.
    text += *line + "\n";
  }
  absl::StatusOr<int> exit = (*status)->Wait(kWait);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(ChildProcess::DescribeWaitStatus(*exit), "exited with status 0");
  for (const char* expected :
       {"host 0", "host 1", "device 0", "device 1", "device 2", "island 1"}) {
    EXPECT_THAT(text, HasSubstr(expected));
  }
}

TEST_F(ProcessClusterTest, AWorkerWithoutTheTokenIsRefusedAndExits) {
  const std::string token_file =
      absl::StrCat(::testing::TempDir(), "/token_", getpid());
  {
    std::ofstream out(token_file);
    out << "s3cret\n";
  }
  StartHead({"--token-file", token_file});
  absl::StatusOr<std::unique_ptr<ChildProcess>> worker = ChildProcess::Start(
      {CAUSEWAY_BINARY, "worker", "--head", address_, "--island", "0",
       "--devices", "1"},
      /*merge_stderr=*/true);
  ASSERT_TRUE(worker.ok()) << worker.status();
  absl::StatusOr<std::string> refused = (*worker)->ReadLineStartingWith(
      "causeway worker: ", kWait, /*echo=*/false);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_THAT(*refused, HasSubstr("token"));
  absl::StatusOr<int> exit = (*worker)->Wait(kWait);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(ChildProcess::DescribeWaitStatus(*exit), "exited with status 1");
  // With the token it joins.
  AddWorker(1, 0, {"--token-file", token_file});
  std::remove(token_file.c_str());
}

// `causeway cluster` with its members' pids, read from what it prints.
class ClusterCommandTest : public ::testing::Test {
 protected:
  void StartCluster() {
    absl::StatusOr<std::unique_ptr<ChildProcess>> cluster = ChildProcess::Start(
        {CAUSEWAY_BINARY, "cluster", "--islands", "1", "--hosts-per-island",
         "2", "--devices-per-host", "1", "--memory-per-device", "64M"},
        /*merge_stderr=*/true);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    for (int i = 0; i < 3; ++i) {  // The head and two workers.
      absl::StatusOr<std::string> line = cluster_->ReadLineStartingWith(
          "causeway cluster: ", kStart, /*echo=*/false);
      ASSERT_TRUE(line.ok()) << line.status();
      const size_t at = line->find(", pid ");
      ASSERT_NE(at, std::string::npos) << *line;
      int pid = 0;
      ASSERT_TRUE(absl::SimpleAtoi(
          line->substr(at + 6, line->find(':', at) - at - 6), &pid))
          << *line;
      members_.push_back(pid);
    }
    absl::StatusOr<std::string> ready =
        cluster_->ReadLineStartingWith("head listening on ", kStart);
    ASSERT_TRUE(ready.ok()) << ready.status();
    address_ = ready->substr(std::string("head listening on ").size());
  }
  void TearDown() override {
    // Whatever a failed test left running goes too.
    for (pid_t pid : members_) kill(pid, SIGKILL);
  }

  std::unique_ptr<ChildProcess> cluster_;
  std::vector<pid_t> members_;
  std::string address_;
};

TEST(ClusterProcessTest, KnowsEveryWorkersPidByItsHost) {
  absl::StatusOr<std::unique_ptr<ClusterProcess>> cluster =
      ClusterProcess::Start(CAUSEWAY_BINARY,
                            {"--islands", "2", "--hosts-per-island", "1",
                             "--devices-per-host", "1", "--spare-hosts", "1"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect((*cluster)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<HostId> hosts;
  for (const transport::DeviceInfo& device : (*client)->devices()) {
    hosts.push_back(device.host);
  }
  std::vector<HostId> listed;
  std::set<pid_t> pids;
  for (const auto& [host, pid] : (*cluster)->workers()) {
    listed.push_back(host);
    pids.insert(pid);
    EXPECT_EQ(kill(pid, 0), 0) << "host " << host << ": pid " << pid;
  }
  EXPECT_EQ(listed, hosts);
  EXPECT_EQ(pids.size(), 4u);
  EXPECT_EQ((*cluster)->Stop(), 0);
  for (pid_t pid : pids) EXPECT_TRUE(AwaitProcessExit(pid, kWait).ok());
}

TEST_F(ClusterCommandTest, ServesClientsAndStopsEveryMemberOnSigterm) {
  StartCluster();
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect(address_);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->devices().size(), 2u);
  absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(**client, 2);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& [session, slice] = *opened;
  absl::StatusOr<std::vector<float>> y = TimesTwo(session, slice, 2, 3);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(*y, ElementsAre(4, 6));

  cluster_->Signal(SIGTERM);
  absl::StatusOr<int> status = cluster_->Wait(kWait);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(ChildProcess::DescribeWaitStatus(*status), "exited with status 0");
  for (pid_t pid : members_) {
    EXPECT_TRUE(AwaitProcessExit(pid, kWait).ok()) << "pid " << pid;
  }
}

TEST_F(ClusterCommandTest, AKilledClusterLeavesNoOrphans) {
  StartCluster();
  cluster_->Signal(SIGKILL);
  ASSERT_TRUE(cluster_->Wait(kWait).ok());
  // Every member hears its parent die (PR_SET_PDEATHSIG) and exits.
  for (pid_t pid : members_) {
    EXPECT_TRUE(AwaitProcessExit(pid, kWait).ok()) << "pid " << pid;
  }
}

// A parent that started `causeway cluster` dies (SIGKILL): the cluster hears
// it (PR_SET_PDEATHSIG, as ChildProcess and ClusterProcess set it; setpriv
// here, under a shell that is the parent) and stops every member, each
// ending as asked. This test process is a child subreaper, so the orphaned
// cluster becomes its child and its exit status can be read. The head used
// to abort ("pure virtual method called") when its workers' streams ended
// while it shut down: a race, so three rounds, with workers and a client.
TEST(ClusterParentTest, AClusterWhoseParentIsKilledStopsEveryMemberCleanly) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  absl::Cleanup not_a_subreaper = [] { prctl(PR_SET_CHILD_SUBREAPER, 0); };
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    absl::StatusOr<std::unique_ptr<ChildProcess>> parent = ChildProcess::Start(
        {"/bin/sh", "-c",
         absl::StrCat("setpriv --pdeathsig TERM '", CAUSEWAY_BINARY,
                      "' cluster --islands 1 --hosts-per-island 4 "
                      "--devices-per-host 1 --memory-per-device 64M & "
                      "echo \"cluster pid $!\"; wait")},
        /*merge_stderr=*/true);
    ASSERT_TRUE(parent.ok()) << parent.status();
    absl::StatusOr<std::string> started =
        (*parent)->ReadLineStartingWith("cluster pid ", kStart);
    ASSERT_TRUE(started.ok()) << started.status();
    int cluster = 0;
    ASSERT_TRUE(absl::SimpleAtoi(started->substr(12), &cluster)) << *started;
    absl::Cleanup kill_cluster = [cluster] {
      kill(cluster, SIGKILL);
      waitpid(cluster, nullptr, 0);
    };
    std::vector<pid_t> members;
    std::string address;
    while (address.empty()) {
      absl::StatusOr<std::string> line =
          (*parent)->ReadLineStartingWith("", kStart, /*echo=*/false);
      ASSERT_TRUE(line.ok()) << line.status();
      if (absl::StartsWith(*line, "head listening on ")) {
        address = line->substr(std::string("head listening on ").size());
      } else if (absl::StartsWith(*line, "causeway cluster: ")) {
        const size_t at = line->find(", pid ");
        int pid = 0;
        if (at != std::string::npos &&
            absl::SimpleAtoi(
                line->substr(at + 6, line->find(':', at) - at - 6), &pid)) {
          members.push_back(pid);
        }
      }
    }
    ASSERT_EQ(members.size(), 5u);  // The head and four workers.
    absl::Cleanup kill_members = [members] {
      for (pid_t pid : members) kill(pid, SIGKILL);
    };
    absl::StatusOr<std::unique_ptr<client::Client>> client =
        client::Connect(address);
    ASSERT_TRUE(client.ok()) << client.status();
    absl::StatusOr<SessionSlice> opened = OpenSessionWithSlice(**client, 4);
    ASSERT_TRUE(opened.ok()) << opened.status();
    ASSERT_TRUE(opened->slice.Ready().AwaitFor(kWait).ok());

    (*parent)->Signal(SIGKILL);
    ASSERT_TRUE((*parent)->Wait(kWait).ok());
    ASSERT_TRUE(AwaitProcessExit(cluster, kWait).ok());
    int status = 0;
    ASSERT_EQ(waitpid(cluster, &status, 0), cluster);
    std::move(kill_cluster).Cancel();
    EXPECT_EQ(ChildProcess::DescribeWaitStatus(status), "exited with status 0");
    for (pid_t pid : members) {
      EXPECT_TRUE(AwaitProcessExit(pid, kWait).ok()) << "pid " << pid;
    }
    // What the cluster and its members said until the last of them went:
    // none of them ended otherwise than asked.
    std::vector<std::string> said;
    while (true) {
      absl::StatusOr<std::string> line =
          (*parent)->ReadLineStartingWith("", kWait, /*echo=*/false);
      if (!line.ok()) break;
      said.push_back(*line);
    }
    for (const std::string& line : said) {
      EXPECT_THAT(line, Not(HasSubstr("while stopping")));
      EXPECT_THAT(line, Not(HasSubstr("pure virtual")));
    }
    client->reset();
  }
}

}  // namespace multi_process_test
}  // namespace causeway::cli
