#include "causeway/transport/topology.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace topology_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<DeviceId> Devices(std::initializer_list<int64_t> ids) {
  std::vector<DeviceId> out;
  for (int64_t id : ids) out.push_back(DeviceId(id));
  return out;
}

std::vector<DeviceId> ToVector(absl::Span<const DeviceId> span) {
  return std::vector<DeviceId>(span.begin(), span.end());
}

TEST(TopologyTest, UniformNumbersDevicesIslandByIslandHostByHost) {
  absl::StatusOr<Topology> topology = Topology::Uniform(2, 2, 3, 1 << 20);
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->num_islands(), 2);
  EXPECT_EQ(topology->num_hosts(), 4);
  EXPECT_EQ(topology->num_devices(), 12);
  const DeviceInfo& d7 = topology->device(DeviceId(7));
  EXPECT_EQ(d7.id, DeviceId(7));
  EXPECT_EQ(d7.host, HostId(2));
  EXPECT_EQ(d7.island, IslandId(1));
  EXPECT_EQ(d7.index_on_host, 1);
  EXPECT_EQ(d7.kind, "cpu");
  EXPECT_EQ(d7.memory_bytes, 1 << 20);
}

TEST(TopologyTest, LooksUpHostsAndIslandsOfDevices) {
  Topology topology = *Topology::Uniform(2, 2, 2, 1024);
  EXPECT_EQ(topology.HostOf(DeviceId(5)), HostId(2));
  EXPECT_EQ(topology.IslandOf(DeviceId(5)), IslandId(1));
  EXPECT_EQ(topology.IslandOfHost(HostId(1)), IslandId(0));
  EXPECT_THAT(ToVector(topology.DevicesOfHost(HostId(3))),
              ElementsAre(DeviceId(6), DeviceId(7)));
  EXPECT_EQ(ToVector(topology.DevicesOfIsland(IslandId(1))),
            Devices({4, 5, 6, 7}));
  EXPECT_THAT(std::vector<HostId>(topology.HostsOfIsland(IslandId(0)).begin(),
                                  topology.HostsOfIsland(IslandId(0)).end()),
              ElementsAre(HostId(0), HostId(1)));
}

TEST(TopologyTest, CreateBuildsIslandsOfDifferentShapes) {
  std::vector<IslandSpec> specs = {
      IslandSpec{{HostSpec{4, "cpu", 100}}},
      IslandSpec{{HostSpec{1, "sim", 200}, HostSpec{2, "sim", 300}}},
  };
  absl::StatusOr<Topology> topology = Topology::Create(specs);
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->num_devices(), 7);
  EXPECT_EQ(topology->MaxIslandSize(), 4);
  EXPECT_EQ(ToVector(topology->DevicesOfIsland(IslandId(1))),
            Devices({4, 5, 6}));
  EXPECT_EQ(topology->device(DeviceId(6)).memory_bytes, 300);
  EXPECT_EQ(topology->device(DeviceId(6)).kind, "sim");
  EXPECT_EQ(topology->HostOf(DeviceId(6)), HostId(2));
}

TEST(TopologyTest, RefusesEmptyOrNonPositiveSizes) {
  EXPECT_EQ(Topology::Uniform(0, 1, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Topology::Uniform(1, 0, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Topology::Uniform(1, 1, -3, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status no_memory = Topology::Uniform(1, 1, 1, 0).status();
  EXPECT_THAT(no_memory.message(), HasSubstr("memory per device"));
  EXPECT_EQ(Topology::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Topology::Create({IslandSpec{}}).status().message(),
              HasSubstr("island 0 has no hosts"));
}

TEST(TopologyTest, RefusesClustersBeyondTheLimits) {
  absl::Status status =
      Topology::Uniform(1 << 10, 1 << 10, 1 << 10, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("too large"));
}

TEST(TopologyTest, ValidatesIdsFromUsers) {
  Topology topology = *Topology::Uniform(1, 2, 2, 1024);
  EXPECT_TRUE(topology.ValidateDevice(DeviceId(3)).ok());
  EXPECT_FALSE(topology.HasDevice(DeviceId(4)));
  EXPECT_FALSE(topology.HasDevice(DeviceId()));
  EXPECT_THAT(
      topology.ValidateDevice(DeviceId(4)).message(),
      HasSubstr("device 4 does not exist: the cluster has devices 0..3"));
  EXPECT_THAT(topology.ValidateHost(HostId(2)).message(),
              HasSubstr("host 2 does not exist"));
  EXPECT_THAT(topology.ValidateIsland(IslandId(1)).message(),
              HasSubstr("island 1 does not exist"));
}

TEST(TopologyTest, DebugStringListsEveryHost) {
  Topology topology = *Topology::Uniform(2, 1, 2, int64_t{1} << 30);
  EXPECT_EQ(topology.DebugString(),
            "2 islands, 2 hosts, 4 devices\n"
            "  island 0: host 0 [0-1 cpu 1.0GiB]\n"
            "  island 1: host 1 [2-3 cpu 1.0GiB]");
}

TEST(TopologyTest, AJoiningHostGetsTheNextIdsAndANewSnapshot) {
  Topology before = *Topology::Uniform(1, 1, 2, 1024);
  absl::StatusOr<Topology> after =
      before.WithHost(IslandId(0), HostSpec{3, "cpu", 2048}, "w-1", "a:1");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->num_hosts(), 2);
  EXPECT_THAT(ToVector(after->DevicesOfHost(HostId(1))),
              ElementsAre(DeviceId(2), DeviceId(3), DeviceId(4)));
  EXPECT_EQ(after->host(HostId(1)).incarnation, "w-1");
  EXPECT_EQ(after->host(HostId(1)).address, "a:1");
  EXPECT_EQ(after->device(DeviceId(4)).memory_bytes, 2048);
  EXPECT_EQ(after->version(), before.version() + 1);
  EXPECT_EQ(after->host(HostId(1)).state, HostState::kJoining);
  EXPECT_FALSE(after->IsAlive(HostId(1)));
  EXPECT_EQ(after->epoch(IslandId(0)), before.epoch(IslandId(0)));
  EXPECT_EQ(before.num_hosts(), 1);  // The old snapshot is unchanged.
}

TEST(TopologyTest, AJoinedHostComingAliveBumpsItsIslandsEpoch) {
  Topology joining = *Topology::Uniform(1, 1, 1, 64)->WithHost(
      IslandId(0), HostSpec{1}, "w", "");
  Topology alive = joining.WithHostAlive(HostId(1));
  EXPECT_TRUE(alive.IsAlive(HostId(1)));
  EXPECT_EQ(alive.epoch(IslandId(0)), joining.epoch(IslandId(0)) + 1);
  EXPECT_EQ(alive.version(), joining.version() + 1);
}

TEST(TopologyTest, AHostOnANewIslandCreatesItAndTheIslandsBelowIt) {
  absl::StatusOr<Topology> topology =
      Topology::Empty().WithHost(IslandId(2), HostSpec{1}, "w", "");
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->num_islands(), 3);
  EXPECT_TRUE(topology->HostsOfIsland(IslandId(0)).empty());
  EXPECT_EQ(topology->IslandOfHost(HostId(0)), IslandId(2));
  EXPECT_EQ(topology->WithHostAlive(HostId(0)).epoch(IslandId(2)), 1u);
  EXPECT_EQ(topology->MaxIslandSize(), 1);
}

TEST(TopologyTest, AJoiningHostIsValidatedAndBounded) {
  const Topology empty = Topology::Empty();
  EXPECT_EQ(empty.WithHost(IslandId(0), HostSpec{0}, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.WithHost(IslandId(-1), HostSpec{1}, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.WithHost(IslandId(Topology::kMaxIslands), HostSpec{1}, "",
                           "")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status too_many =
      empty.WithHost(IslandId(0), HostSpec{Topology::kMaxDevices + 1}, "", "")
          .status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.message(), HasSubstr("at most"));
}

TEST(TopologyTest, ANewEpochChangesOnlyItsIsland) {
  Topology before = *Topology::Uniform(2, 1, 1, 64);
  Topology after = before.WithNewEpoch(IslandId(1));
  EXPECT_EQ(after.epoch(IslandId(1)), before.epoch(IslandId(1)) + 1);
  EXPECT_EQ(after.epoch(IslandId(0)), before.epoch(IslandId(0)));
  EXPECT_EQ(after.version(), before.version() + 1);
}

TEST(TopologyTest, ADeadHostKeepsItsIdsAndBumpsItsIslandsEpoch) {
  Topology before = *Topology::Uniform(2, 2, 1, 1024);
  Topology after = before.WithHostDead(HostId(2));
  EXPECT_FALSE(after.IsAlive(HostId(2)));
  EXPECT_TRUE(after.IsAlive(HostId(3)));
  EXPECT_EQ(after.num_devices(), 4);
  EXPECT_EQ(after.epoch(IslandId(1)), before.epoch(IslandId(1)) + 1);
  EXPECT_EQ(after.epoch(IslandId(0)), before.epoch(IslandId(0)));
  EXPECT_EQ(after.version(), before.version() + 1);
  EXPECT_EQ(after.WithHostDead(HostId(2)).version(), after.version());
  EXPECT_THAT(after.DebugString(), HasSubstr("host 2 [2 cpu 1024B] dead"));
}

}  // namespace topology_test
}  // namespace causeway::transport
