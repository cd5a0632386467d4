#include "causeway/observe/metrics_sink.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace causeway::observe {
namespace metrics_sink_test {

const absl::Time kStart = absl::FromUnixSeconds(1000);

trace::OpEvent Op(int64_t device, uint64_t seq, double at_seconds,
                  int64_t host = 0) {
  trace::OpEvent event;
  event.time = kStart + absl::Seconds(at_seconds);
  event.device = DeviceId(device);
  event.host = HostId(host);
  event.island = IslandId(0);
  event.seq = seq;
  // Assigned from strings, not literals: GCC 12 warns falsely (-Wrestrict)
  // of a literal assigned to a member string here.
  static const std::string* const kName = new std::string("job");
  event.program = *kName;
  event.session_name = *kName;
  return event;
}

trace::LaunchEvent Launch(uint64_t seq, double at_seconds) {
  trace::LaunchEvent event;
  event.time = kStart + absl::Seconds(at_seconds);
  event.island = IslandId(0);
  event.seq = seq;
  return event;
}

TEST(MetricsSinkTest, BusyTimeIsTheRunningTimeOfFinishedAndRunningOps) {
  MetricsSink sink;
  sink.OpStarted(Op(3, 1, 0));
  sink.OpFinished(Op(3, 1, 2), absl::OkStatus());
  sink.OpStarted(Op(3, 2, 5));
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_DOUBLE_EQ(snapshot.devices.at(DeviceId(3)).busy_seconds, 2);
  // The running op counts up to the time asked about.
  EXPECT_DOUBLE_EQ(snapshot.BusySeconds(DeviceId(3), kStart + absl::Seconds(6)),
                   3);
  EXPECT_EQ(snapshot.op_duration.count, 1);
  EXPECT_EQ(snapshot.ops.at("OK"), 1);
}

TEST(MetricsSinkTest, CollectiveTimeIsCountedForOpsThatMadeCollectives) {
  MetricsSink sink;
  sink.OpStarted(Op(0, 1, 0));
  trace::OpEvent with = Op(0, 1, 2);
  with.collective_time = absl::Milliseconds(250);
  with.collectives = 2;
  sink.OpFinished(with, absl::OkStatus());
  sink.OpStarted(Op(0, 2, 3));
  sink.OpFinished(Op(0, 2, 4), absl::OkStatus());  // No collectives.
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_DOUBLE_EQ(snapshot.devices.at(DeviceId(0)).collective_seconds, 0.25);
  EXPECT_DOUBLE_EQ(snapshot.devices.at(DeviceId(0)).busy_seconds, 3);
  // Only the op that made collectives is observed.
  EXPECT_EQ(snapshot.op_collective_time.count, 1);
  EXPECT_DOUBLE_EQ(snapshot.op_collective_time.sum, 0.25);
  EXPECT_EQ(snapshot.collectives, 2);
}

TEST(MetricsSinkTest, DispatchLatencyRunsFromTheLaunchToEachOpsQueue) {
  MetricsSink sink;
  sink.LaunchDispatched(Launch(7, 0));
  sink.OpEnqueued(Op(0, 7, 0.002));
  sink.OpEnqueued(Op(1, 7, 0.02));
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_EQ(snapshot.TotalLaunches(), 1);
  EXPECT_EQ(snapshot.dispatch_latency.count, 2);
  EXPECT_NEAR(snapshot.dispatch_latency.sum, 0.022, 1e-9);
  // 2 ms falls in (1 ms, 2.5 ms], 20 ms in (10 ms, 25 ms].
  const std::vector<double>& bounds = snapshot.dispatch_latency.bounds;
  auto bucket = [&](double bound) {
    return snapshot.dispatch_latency
        .counts[std::find(bounds.begin(), bounds.end(), bound) - bounds.begin()];
  };
  EXPECT_EQ(bucket(2.5e-3), 1);
  EXPECT_EQ(bucket(2.5e-2), 1);
}

TEST(MetricsSinkTest, ALaunchFailsOnceWhateverHowManyOfItsOpsFail) {
  MetricsSink sink;
  sink.LaunchDispatched(Launch(1, 0));
  sink.OpFinished(Op(0, 1, 1), absl::DataLossError("host 1 was lost"));
  sink.OpFinished(Op(1, 1, 1), absl::DataLossError("host 1 was lost"));
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_EQ(snapshot.launch_failures.at("DATA_LOSS"), 1);
  EXPECT_EQ(snapshot.ops.at("DATA_LOSS"), 2);
  ASSERT_EQ(snapshot.recent_failures.size(), 2u);
  EXPECT_EQ(snapshot.recent_failures.back().message, "host 1 was lost");
}

TEST(MetricsSinkTest, RecentFailuresStayBounded) {
  MetricsSink sink;
  for (uint64_t seq = 0; seq < 3 * MetricsSink::kMaxRecentFailures; ++seq) {
    sink.OpFinished(Op(0, seq, 1), absl::InternalError("no"));
  }
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_EQ(snapshot.recent_failures.size(), MetricsSink::kMaxRecentFailures);
  EXPECT_EQ(snapshot.launch_failures.at("INTERNAL"),
            static_cast<int64_t>(3 * MetricsSink::kMaxRecentFailures));
}

TEST(MetricsSinkTest, AHostsDeathIsCountedByReasonAndStopsItsDevicesBusyTime) {
  MetricsSink sink;
  sink.OpStarted(Op(4, 1, 0, /*host=*/2));
  sink.HostStateChanged(
      {kStart + absl::Seconds(1), HostId(2),
       "dead: no heartbeat answered for 3.2s (timeout 3s)"});
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_EQ(snapshot.host_deaths.at("heartbeat"), 1);
  ASSERT_EQ(snapshot.recent_deaths.size(), 1u);
  EXPECT_EQ(snapshot.recent_deaths[0].host, HostId(2));
  EXPECT_DOUBLE_EQ(
      snapshot.BusySeconds(DeviceId(4), kStart + absl::Seconds(100)), 1);
}

TEST(MetricsSinkTest, DeathReasonsFallIntoFewLabels) {
  EXPECT_EQ(DeathReasonLabel("its connection broke: EOF"), "connection");
  EXPECT_EQ(DeathReasonLabel("no heartbeat answered for 3s"), "heartbeat");
  EXPECT_EQ(DeathReasonLabel("its worker could not start"), "start");
  EXPECT_EQ(DeathReasonLabel("an operator said so"), "other");
}

TEST(MetricsSinkTest, TransfersInFlightUntilTheyFinish) {
  MetricsSink sink;
  trace::TransferEvent transfer;
  transfer.time = kStart;
  transfer.transfer_id = 9;
  transfer.source_device = DeviceId(0);
  transfer.destination_device = DeviceId(3);
  transfer.bytes = 4096;
  sink.TransferStarted(transfer);
  EXPECT_EQ(sink.Snapshot().transfers_in_flight.size(), 1u);
  transfer.time = kStart + absl::Milliseconds(5);
  sink.TransferFinished(transfer, absl::OkStatus());
  const MetricsSnapshot snapshot = sink.Snapshot();
  EXPECT_TRUE(snapshot.transfers_in_flight.empty());
  EXPECT_EQ(snapshot.transfer_bytes, 4096);
  EXPECT_EQ(snapshot.transfer_duration.count, 1);
  EXPECT_EQ(snapshot.transfers.at("OK"), 1);
}

}  // namespace metrics_sink_test
}  // namespace causeway::observe
