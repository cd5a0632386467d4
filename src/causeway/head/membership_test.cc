#include "causeway/head/membership.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace membership_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using transport::FakeControlChannel;
using transport::HostSpec;
using transport::HostState;

HostRegistration Worker(const std::string& incarnation, int64_t island = 0,
                        int64_t devices = 2) {
  return HostRegistration{IslandId(island), HostSpec{devices, "cpu", 1024},
                          incarnation, "10.0.0.1:7000"};
}

TEST(MembershipTest, ARegisteredHostGetsNewIdsAndIsJoining) {
  Membership membership;
  absl::StatusOr<HostAssignment> a = membership.Register(Worker("a"));
  absl::StatusOr<HostAssignment> b = membership.Register(Worker("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->host, HostId(0));
  EXPECT_EQ(b->host, HostId(1));
  ASSERT_EQ(b->devices.size(), 2u);
  EXPECT_EQ(b->devices[0].id, DeviceId(2));
  EXPECT_EQ(b->devices[1].memory_bytes, 1024);
  EXPECT_EQ(membership.topology()->host(b->host).state, HostState::kJoining);
  EXPECT_EQ(membership.topology()->host(b->host).address, "10.0.0.1:7000");
  EXPECT_EQ(membership.Channel(a->host), nullptr);
}

TEST(MembershipTest, AnActivatedHostIsAliveBehindItsChannel) {
  Membership membership;
  HostAssignment a = *membership.Register(Worker("a"));
  const uint64_t version = membership.topology()->version();
  auto channel = std::make_shared<FakeControlChannel>();
  ASSERT_TRUE(membership.Activate(a.host, channel).ok());
  EXPECT_TRUE(membership.topology()->IsAlive(a.host));
  EXPECT_EQ(membership.topology()->epoch(IslandId(0)), 1u);
  EXPECT_GT(membership.topology()->version(), version);
  EXPECT_EQ(membership.Channel(a.host), channel);
  ASSERT_EQ(membership.LiveChannels().size(), 1u);
  EXPECT_EQ(membership.Activate(a.host, channel).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MembershipTest, ADeadHostNeverComesBackAndItsReplacementIsANewHost) {
  Membership membership;
  HostAssignment a = *membership.Register(Worker("a"));
  ASSERT_TRUE(
      membership.Activate(a.host, std::make_shared<FakeControlChannel>()).ok());
  EXPECT_EQ(membership.MarkDead(a.host, "killed"), HostState::kAlive);
  EXPECT_EQ(membership.MarkDead(a.host, "killed"), HostState::kDead);
  EXPECT_EQ(membership.Channel(a.host), nullptr);
  EXPECT_EQ(membership.topology()->epoch(IslandId(0)), 2u);
  absl::StatusOr<HostAssignment> again = membership.Register(Worker("a"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("new incarnation"));
  absl::StatusOr<HostAssignment> restarted = membership.Register(Worker("a2"));
  ASSERT_TRUE(restarted.ok());
  EXPECT_EQ(restarted->host, HostId(1));
  EXPECT_EQ(restarted->devices[0].id, DeviceId(2));
}

TEST(MembershipTest, AHostsFirstDeathIsRecordedWithItsReasonAndTime) {
  Membership membership;
  HostAssignment a = *membership.Register(Worker("a"));
  HostAssignment b = *membership.Register(Worker("b"));
  ASSERT_TRUE(
      membership.Activate(a.host, std::make_shared<FakeControlChannel>()).ok());
  const auto before = std::chrono::steady_clock::now();
  membership.MarkDead(a.host, "its connection broke");
  const auto after = std::chrono::steady_clock::now();
  // A second death changes nothing; an unknown host is not recorded.
  membership.MarkDead(a.host, "again");
  membership.MarkDead(HostId(7), "never here");
  const std::map<HostId, HostDeath> deaths = membership.Deaths();
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths.at(a.host).reason, "its connection broke");
  EXPECT_GE(deaths.at(a.host).declared, before);
  EXPECT_LE(deaths.at(a.host).declared, after);
  // A joining host's death is recorded too.
  membership.MarkDead(b.host, "it never activated");
  EXPECT_EQ(membership.Deaths().at(b.host).reason, "it never activated");
}

TEST(MembershipTest, AnIncarnationThatIsAlreadyHereIsRefused) {
  Membership membership;
  ASSERT_TRUE(membership.Register(Worker("a")).ok());
  EXPECT_EQ(membership.Register(Worker("a")).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MembershipTest, AHostOnANewIslandBringsItIntoBeing) {
  Membership membership;
  HostAssignment host = *membership.Register(Worker("a", 3));
  EXPECT_EQ(host.island, IslandId(3));
  EXPECT_EQ(membership.topology()->num_islands(), 4);
}

TEST(MembershipTest, ARegistrationOutOfBoundsIsRefusedNamingTheField) {
  Membership membership(
      Membership::Limits{.max_islands = 8, .max_devices_per_host = 4});
  auto refused = [&](HostRegistration registration) {
    return membership.Register(registration).status();
  };
  EXPECT_THAT(refused(Worker("a", 8)).message(), HasSubstr("island 8"));
  EXPECT_THAT(refused(Worker("a", -1)).message(), HasSubstr("island -1"));
  EXPECT_THAT(refused(Worker("a", 0, 5)).message(), HasSubstr("1..4 devices"));
  EXPECT_THAT(refused(Worker("a", 0, 0)).message(), HasSubstr("1..4 devices"));
  EXPECT_THAT(refused(Worker("")).message(), HasSubstr("incarnation is empty"));
  EXPECT_THAT(refused(Worker(std::string(300, 'x'))).message(),
              HasSubstr("at most 256"));
  EXPECT_THAT(refused(Worker("a\nb")).message(),
              HasSubstr("control character"));
  HostRegistration no_memory = Worker("a");
  no_memory.devices.memory_per_device = 0;
  EXPECT_THAT(refused(no_memory).message(), HasSubstr("memory per device"));
  EXPECT_EQ(membership.topology()->num_hosts(), 0);
}

TEST(MembershipTest, OnlySoManyHostsMayBeJoiningAtOnce) {
  Membership membership(Membership::Limits{.max_joining_hosts = 2});
  ASSERT_TRUE(membership.Register(Worker("a")).ok());
  HostAssignment b = *membership.Register(Worker("b"));
  EXPECT_EQ(membership.Register(Worker("c")).status().code(),
            absl::StatusCode::kResourceExhausted);
  // A joining host that died frees its place.
  membership.MarkDead(b.host, "killed");
  EXPECT_TRUE(membership.Register(Worker("c")).ok());
}

TEST(MembershipTest, ACallToADeadHostIsDataLossAndToALiveOneItsOwnError) {
  Membership membership;
  ASSERT_TRUE(membership.Register(Worker("a")).ok());
  ASSERT_TRUE(membership.Register(Worker("b")).ok());
  ASSERT_TRUE(
      membership.Activate(HostId(0), std::make_shared<FakeControlChannel>())
          .ok());
  membership.MarkDead(HostId(1), "test");
  const absl::Status failed = absl::UnavailableError("no answer");
  EXPECT_EQ(membership.CallError(HostId(0), failed), failed);
  const absl::Status lost = membership.CallError(HostId(1), failed);
  EXPECT_EQ(lost.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(lost.message(), HasSubstr("host 1 was lost: no answer"));
  EXPECT_TRUE(membership.CallError(HostId(1), absl::OkStatus()).ok());
}

TEST(MembershipTest, AwaitingADeathReturnsOnceItIsHandled) {
  Membership membership;
  ASSERT_TRUE(membership.Register(Worker("a")).ok());
  membership.MarkDead(HostId(0), "test");
  EXPECT_EQ(membership.AwaitDeathHandled(HostId(0), absl::Now()).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread handler([&] { membership.DeathHandled(HostId(0)); });
  EXPECT_TRUE(
      membership.AwaitDeathHandled(HostId(0), absl::InfiniteFuture()).ok());
  handler.join();
}

}  // namespace membership_test
}  // namespace causeway::head
