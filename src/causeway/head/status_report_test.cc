#include "causeway/head/status_report.h"

#include <chrono>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace causeway::head {
namespace status_report_test {

using ::testing::HasSubstr;
using transport::DeviceStatus;
using transport::OpStatus;
using transport::Topology;
using transport::WorkerStatus;

class StatusReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Host 0 alive, host 1 dead, host 2 alive but silent.
    inputs_.topology = std::make_shared<const Topology>(
        Topology::Uniform(1, 3, 1, 1000)->WithHostDead(HostId(1)));
    OpStatus running;
    running.seq = 4;
    running.island = IslandId(0);
    running.program = "step";
    running.session = "alice";
    OpStatus queued = running;
    queued.seq = 5;
    queued.waiting_for = {"array 3 shard 0 <- transfer from device 1"};
    DeviceStatus device;
    device.device = DeviceId(0);
    device.running = running;
    device.queued = {queued};
    device.memory.budget_bytes = 1000;
    device.memory.used_bytes = 400;
    device.ops_completed = 3;
    WorkerStatus worker;
    worker.host = HostId(0);
    worker.devices = {device};
    worker.pending_receives = {"array 3 shard 0 on device 0: 1 piece"};
    inputs_.workers.emplace(HostId(0), worker);
    inputs_.workers.emplace(HostId(2),
                            absl::DeadlineExceededError("no answer in 5s"));
    inputs_.sessions = {SessionSummary{SessionId(1), "alice", 1, 2, 3, 0,
                                       /*leased=*/true}};
    inputs_.resources = "resource manager: 3 devices";
    inputs_.deaths.emplace(HostId(1),
                           HostDeath{"its connection broke",
                                     std::chrono::steady_clock::time_point(
                                         std::chrono::microseconds(1234567))});
  }

  StatusInputs inputs_;
};

TEST_F(StatusReportTest, TextShowsEachDevicesRunningAndQueuedOps) {
  const std::string text = BuildStatusReport(inputs_).text;
  EXPECT_THAT(text, HasSubstr("host 0 (island 0)\n  device 0: running 'step' "
                              "seq 4 partition 0 [alice]; 1 queued, 3 done; "
                              "memory 400/1000 bytes\n"));
  EXPECT_THAT(text, HasSubstr("    queued 'step' seq 5 partition 0 [alice] "
                              "waits for array 3 shard 0 <- transfer from "
                              "device 1\n"));
  EXPECT_THAT(text, HasSubstr("  receive array 3 shard 0 on device 0"));
  EXPECT_THAT(text,
              HasSubstr("host 1 (island 0): dead (its connection broke)\n"));
  EXPECT_THAT(text,
              HasSubstr("host 2 (island 0): no status (no answer in 5s)"));
  EXPECT_THAT(text, HasSubstr("session 1 'alice': 1 slices, 2 executables, "
                              "3 arrays\n"));
  EXPECT_THAT(text, HasSubstr("resource manager: 3 devices"));
}

TEST_F(StatusReportTest, JsonHasTheSameViewForTools) {
  nlohmann::json json = nlohmann::json::parse(BuildStatusReport(inputs_).json);
  ASSERT_EQ(json["hosts"].size(), 3u);
  const nlohmann::json& host = json["hosts"][0];
  EXPECT_EQ(host["state"], "alive");
  EXPECT_EQ(host["devices"][0]["running"]["seq"], 4);
  EXPECT_EQ(host["devices"][0]["queued"][0]["waiting_for"][0],
            "array 3 shard 0 <- transfer from device 1");
  EXPECT_EQ(host["devices"][0]["memory"]["used_bytes"], 400);
  EXPECT_EQ(json["hosts"][1]["state"], "dead");
  EXPECT_EQ(json["hosts"][1]["alive"], false);
  EXPECT_EQ(json["hosts"][1]["death"]["reason"], "its connection broke");
  EXPECT_EQ(json["hosts"][1]["death"]["declared_steady_us"], 1234567);
  EXPECT_FALSE(json["hosts"][0].contains("death"));
  EXPECT_EQ(json["hosts"][2]["error"], "no answer in 5s");
  EXPECT_EQ(json["sessions"][0]["name"], "alice");
  EXPECT_EQ(json["sessions"][0]["leased"], true);
  EXPECT_EQ(json["island_epochs"][0], 2);
}

TEST_F(StatusReportTest, NamesWithQuotesAndBadBytesStayValidJson) {
  inputs_.sessions[0].name = "a \"quoted\"\n name \xff";
  nlohmann::json json = nlohmann::json::parse(BuildStatusReport(inputs_).json);
  EXPECT_THAT(json["sessions"][0]["name"].get<std::string>(),
              HasSubstr("a \"quoted\"\n name "));
}

}  // namespace status_report_test
}  // namespace causeway::head
