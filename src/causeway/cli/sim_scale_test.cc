// The head at scale, for correctness only (timing is bench/scale_bench.py's):
// `causeway head` with 128 simulated hosts of 4 devices in `causeway worker
// --device-kind sim --hosts K` processes (docs/sim_devices.md), a client in
// this process. Every process is stopped by the fixture, even on failure.
#include <signal.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/cli/cluster_process.h"
#include "causeway/cli/testing/process_cluster.h"
#include "causeway/client/connect.h"
#include "causeway/client/client.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace causeway::cli {
namespace sim_scale_test {

using ::testing::Each;
using testing::kWait;
using testing::ProcessClusterTest;

constexpr int64_t kDevicesPerHost = 4;

// The paper's Figure 5 program on `n` partitions: a scalar all-reduce (max)
// over all of them, plus one, modelled at 100 us on sim devices.
std::string AllReduceAdd(int64_t n) {
  return absl::StrCat(
      "HloModule ar_add, num_partitions=", n,
      "\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT m = f32[] maximum(a, b)\n}\nENTRY main {\n"
      "  x = f32[1] parameter(0), sharding={devices=[",
      n, "]<=[", n,
      "]}\n  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,", n,
      "]<=[", n,
      "], use_global_device_ids=true, to_apply=max\n"
      "  one = f32[1] constant({1})\n"
      "  ROOT y = f32[1] add(r, one), sharding={devices=[",
      n, "]<=[", n,
      "]}, frontend_attributes={causeway_sim_us=\"100\"}\n}\n");
}

// Runs the program `chain` times on `slice`, output to input, from zeros;
// the last output.
absl::StatusOr<client::Array> RunChain(client::Session& session,
                                       const client::Slice& slice, int64_t n,
                                       int64_t chain) {
  CW_ASSIGN_OR_RETURN(client::Executable step,
                      session.Compile(AllReduceAdd(n), slice));
  CW_ASSIGN_OR_RETURN(client::Sharding tiled,
                      client::Sharding::TiledByDims({n}));
  CW_ASSIGN_OR_RETURN(
      client::Array x,
      session.FromHost(hlo::Literal(hlo::Shape(hlo::PrimitiveType::kF32, {n})),
                       slice, tiled));
  for (int64_t i = 0; i < chain; ++i) {
    CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, step.Execute({x}));
    x = y[0];
  }
  return x;
}

class SimScaleTest : public ProcessClusterTest {
 protected:
  // A sim worker process of `hosts` hosts on island 0; their host ids, once
  // each has printed its ready line. With `control`, it reads commands on
  // its stdin (--control-stdin).
  std::vector<HostId> AddSimHosts(int64_t hosts,
                                  int64_t devices = kDevicesPerHost,
                                  bool control = false) {
    std::vector<std::string> argv = {
        CAUSEWAY_BINARY, "worker", "--head", address_, "--island", "0",
        "--devices", absl::StrCat(devices), "--device-kind", "sim",
        "--hosts", absl::StrCat(hosts), "--memory-per-device", "64M"};
    if (control) argv.push_back("--control-stdin");
    absl::StatusOr<std::unique_ptr<ChildProcess>> process =
        ChildProcess::Start(std::move(argv), /*merge_stderr=*/true,
                            /*stdin_pipe=*/control);
    CW_CHECK(process.ok()) << process.status();
    workers_.push_back({*std::move(process), HostId()});
    std::vector<HostId> ids;
    for (int64_t i = 0; i < hosts; ++i) {
      ids.push_back(AwaitRegistered(workers_.back()));
    }
    workers_.back().host = ids.front();
    return ids;
  }

  // The head's status view, as JSON.
  static absl::StatusOr<nlohmann::json> StatusJson(client::Session& session) {
    CW_ASSIGN_OR_RETURN(transport::StatusReport report,
                        session.Status().AwaitFor(kWait));
    return nlohmann::json::parse(report.json);
  }

  // Every device row of a status view (they are listed under their hosts).
  static std::vector<nlohmann::json> Devices(const nlohmann::json& status) {
    std::vector<nlohmann::json> devices;
    for (const auto& host : status["hosts"]) {
      if (!host.contains("devices")) continue;
      for (const auto& device : host["devices"]) devices.push_back(device);
    }
    return devices;
  }

  // Polls the status view until `done` holds for it; false at the deadline.
  template <typename Done>
  static bool AwaitStatus(client::Session& session, Done done) {
    for (absl::Time deadline = absl::Now() + kWait; absl::Now() < deadline;) {
      absl::StatusOr<nlohmann::json> status = StatusJson(session);
      if (status.ok() && done(*status)) return true;
    }
    return false;
  }
};

TEST_F(SimScaleTest, AChainOnAll512DevicesOf128SimHostsCompletesWherePlanned) {
  StartHead();
  const std::vector<HostId> hosts = AddSimHosts(128);
  EXPECT_EQ(std::set<HostId>(hosts.begin(), hosts.end()).size(), 128u);
  std::unique_ptr<client::Client> client = Connect();
  const int64_t n = 128 * kDevicesPerHost;
  ASSERT_EQ(static_cast<int64_t>(client->devices().size()), n);
  for (const transport::DeviceInfo& device : client->devices()) {
    EXPECT_EQ(device.kind, "sim");
  }
  absl::StatusOr<client::Session> session =
      client->OpenSession({.name = "scale"});
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<client::Slice> slice = session->CreateSlice(n);
  ASSERT_TRUE(slice.ok()) << slice.status();

  constexpr int64_t kChain = 20;
  absl::StatusOr<client::Array> y = RunChain(*session, *slice, n, kChain);
  ASSERT_TRUE(y.ok()) << y.status();
  // Every shard comes from its planned device with its planned shape; a
  // sim device's values are zeros.
  absl::StatusOr<std::vector<hlo::Literal>> shards =
      y->ShardsToHost().AwaitFor(kWait);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(static_cast<int64_t>(shards->size()), n);
  for (const hlo::Literal& shard : *shards) {
    EXPECT_EQ(shard.shape().ToString(false), "f32[1]");
    EXPECT_THAT(hlo::testutil::Values(shard), Each(0.0f));
  }
  // Every device ran every launch of the chain.
  EXPECT_TRUE(AwaitStatus(*session, [&](const nlohmann::json& status) {
    int64_t done = 0;
    for (const nlohmann::json& device : Devices(status)) {
      if (device["ops_completed"].get<int64_t>() >= kChain) {
        ++done;
      }
    }
    return done == n;
  }));
}

TEST_F(SimScaleTest, ASigkilledSimProcessIsDetectedAndItsSlicesRemapped) {
  // A heartbeat timeout far longer than the test waits: the broken streams
  // must tell the head.
  StartHead({"--worker-timeout", "120"});
  // The victim's 8 hosts register first: 4-device slices go to the first
  // hosts, so they hold slices; the other process's last hosts are spares.
  const std::vector<HostId> victims = AddSimHosts(8);
  AddSimHosts(120);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<client::Session> session =
      client->OpenSession({.name = "survivor"});
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr int64_t kSlices = 64;
  std::vector<client::Slice> slices;
  std::set<DeviceId> on_victims;
  for (int64_t i = 0; i < kSlices; ++i) {
    absl::StatusOr<client::Slice> slice =
        session->CreateSlice(kDevicesPerHost);
    ASSERT_TRUE(slice.ok()) << slice.status();
    absl::StatusOr<transport::SliceInfo> granted =
        slice->Ready().AwaitFor(kWait);
    ASSERT_TRUE(granted.ok()) << granted.status();
    for (DeviceId device : granted->devices) {
      const HostId host = client->topology()->HostOf(device);
      if (std::find(victims.begin(), victims.end(), host) != victims.end()) {
        on_victims.insert(device);
      }
    }
    slices.push_back(*std::move(slice));
  }
  ASSERT_EQ(on_victims.size(), victims.size() * kDevicesPerHost);
  for (client::Slice& slice : slices) {
    absl::StatusOr<client::Array> y =
        RunChain(*session, slice, kDevicesPerHost, 3);
    ASSERT_TRUE(y.ok() && y->Ready().AwaitFor(kWait).ok());
  }

  workers_.front().process->Signal(SIGKILL);
  // Every victim is declared dead.
  EXPECT_TRUE(AwaitStatus(*session, [&](const nlohmann::json& status) {
    int64_t dead = 0;
    for (const auto& host : status["hosts"]) {
      const HostId id(host["host"].get<int64_t>());
      if (host.contains("death") &&
          std::find(victims.begin(), victims.end(), id) != victims.end()) {
        ++dead;
      }
    }
    return dead == static_cast<int64_t>(victims.size());
  }));
  // Every slice runs again, none on a dead device: the victims' slices
  // were remapped onto spare hosts.
  int64_t remapped = 0;
  for (client::Slice& slice : slices) {
    absl::StatusOr<client::Array> y =
        RunChain(*session, slice, kDevicesPerHost, 3);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_TRUE(y->Ready().AwaitFor(kWait).ok());
    absl::StatusOr<transport::SliceInfo> info = slice.Info().AwaitFor(kWait);
    ASSERT_TRUE(info.ok()) << info.status();
    for (DeviceId device : info->devices) {
      EXPECT_FALSE(on_victims.contains(device)) << "device " << device;
    }
    if (info->generation > 1) ++remapped;
  }
  EXPECT_EQ(remapped, static_cast<int64_t>(victims.size()));
  // Nothing is left running or queued on any device.
  EXPECT_TRUE(AwaitStatus(*session, [](const nlohmann::json& status) {
    for (const nlohmann::json& device : Devices(status)) {
      if (!device["running"].is_null() || !device["queued"].empty()) {
        return false;
      }
    }
    return true;
  }));
}

TEST_F(SimScaleTest, AKilledHostOfASimProcessAloneIsLostAndItsSliceRemapped) {
  StartHead({"--worker-timeout", "120"});
  AddSimHosts(16, kDevicesPerHost, /*control=*/true);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<client::Session> session =
      client->OpenSession({.name = "survivor"});
  ASSERT_TRUE(session.ok()) << session.status();
  constexpr int64_t kSlices = 4;
  std::vector<client::Slice> slices;
  for (int64_t i = 0; i < kSlices; ++i) {
    absl::StatusOr<client::Slice> slice =
        session->CreateSlice(kDevicesPerHost);
    ASSERT_TRUE(slice.ok()) << slice.status();
    ASSERT_TRUE(slice->Ready().AwaitFor(kWait).ok());
    slices.push_back(*std::move(slice));
  }
  absl::StatusOr<transport::SliceInfo> first = slices[0].Info().AwaitFor(kWait);
  ASSERT_TRUE(first.ok()) << first.status();
  const HostId victim = client->topology()->HostOf(first->devices.front());
  for (client::Slice& slice : slices) {
    absl::StatusOr<client::Array> y =
        RunChain(*session, slice, kDevicesPerHost, 3);
    ASSERT_TRUE(y.ok() && y->Ready().AwaitFor(kWait).ok());
  }

  ChildProcess& process = *workers_.front().process;
  ASSERT_TRUE(
      process.WriteToStdin(absl::StrCat("kill-host ", victim.value(), "\n"))
          .ok());
  EXPECT_TRUE(process
                  .ReadLineStartingWith(
                      absl::StrCat("killed host ", victim.value()), kWait)
                  .ok());
  // The victim alone is dead; its process's other 15 hosts serve on.
  EXPECT_TRUE(AwaitStatus(*session, [&](const nlohmann::json& status) {
    std::set<HostId> dead;
    for (const auto& host : status["hosts"]) {
      if (host.contains("death")) dead.insert(HostId(host["host"].get<int64_t>()));
    }
    return dead == std::set<HostId>{victim};
  }));
  // Every slice runs again; the victim's was remapped off its devices, the
  // others kept theirs.
  for (int64_t i = 0; i < kSlices; ++i) {
    absl::StatusOr<client::Array> y =
        RunChain(*session, slices[i], kDevicesPerHost, 3);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_TRUE(y->Ready().AwaitFor(kWait).ok());
    absl::StatusOr<transport::SliceInfo> info = slices[i].Info().AwaitFor(kWait);
    ASSERT_TRUE(info.ok()) << info.status();
    for (DeviceId device : info->devices) {
      EXPECT_NE(client->topology()->HostOf(device), victim);
    }
    EXPECT_EQ(info->generation, i == 0 ? 2u : 1u) << "slice " << i;
  }
  EXPECT_TRUE(
      process.WriteToStdin(absl::StrCat("kill-host ", victim.value(), "\n"))
          .ok());
  EXPECT_TRUE(process
                  .ReadLineStartingWith(
                      absl::StrCat("no host ", victim.value(), " here"), kWait)
                  .ok());
}

TEST_F(SimScaleTest, ALaunchSpanningTwoSimProcessesFailsItsCollectivesSayingWhy) {
  StartHead();
  AddSimHosts(1, 1);
  AddSimHosts(1, 1);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<client::Session> session = client->OpenSession({.name = "t"});
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<client::Slice> slice = session->CreateSlice(2);
  ASSERT_TRUE(slice.ok()) << slice.status();
  absl::StatusOr<client::Array> y = RunChain(*session, *slice, 2, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  absl::Status ran = y->Ready().AwaitFor(kWait);
  EXPECT_EQ(ran.code(), absl::StatusCode::kUnimplemented) << ran;
  EXPECT_THAT(ran.message(), ::testing::HasSubstr("does not serve"));
}

TEST_F(SimScaleTest, ASimCausewayClusterServesEachIslandFromOneProcess) {
  absl::StatusOr<std::unique_ptr<ClusterProcess>> cluster =
      ClusterProcess::Start(CAUSEWAY_BINARY,
                            {"--device-kind", "sim", "--islands", "2",
                             "--hosts-per-island", "3", "--spare-hosts", "1",
                             "--devices-per-host", "2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::set<pid_t> processes;
  for (const auto& [host, pid] : (*cluster)->workers()) processes.insert(pid);
  EXPECT_EQ((*cluster)->workers().size(), 8u);
  EXPECT_EQ(processes.size(), 2u);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect((*cluster)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->devices().size(), 16u);
  absl::StatusOr<client::Session> session =
      (*client)->OpenSession({.name = "t"});
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<client::Slice> slice = session->CreateSlice(6);
  ASSERT_TRUE(slice.ok()) << slice.status();
  absl::StatusOr<client::Array> y = RunChain(*session, *slice, 6, 2);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(y->Ready().AwaitFor(kWait).ok());
  EXPECT_EQ((*cluster)->Stop(), 0);
}

}  // namespace sim_scale_test
}  // namespace causeway::cli
