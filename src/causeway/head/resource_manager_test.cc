#include "causeway/head/resource_manager.h"

#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {

using transport::HostSpec;
using transport::IslandSpec;
using transport::Topology;
namespace resource_manager_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = SliceEvent::Kind;

std::vector<DeviceId> Ids(std::initializer_list<int64_t> ids) {
  std::vector<DeviceId> out;
  for (int64_t id : ids) out.push_back(DeviceId(id));
  return out;
}

SliceRequest Request(int64_t num_devices, int64_t session = 1) {
  SliceRequest request;
  request.session = SessionId(session);
  request.num_devices = num_devices;
  return request;
}

// A resource manager over a chosen topology, recording every event.
class ResourceManagerTest : public ::testing::Test {
 protected:
  void Build(absl::StatusOr<Topology> topology,
             ResourceManager::Options options = {}) {
    ASSERT_TRUE(topology.ok()) << topology.status();
    manager_ = std::make_unique<ResourceManager>(
        std::make_shared<const Topology>(*std::move(topology)), options);
    manager_->AddListener([this](const SliceEvent& event) {
      absl::MutexLock lock(&mu_);
      events_.push_back(event);
    });
  }

  // Requests a slice that must be granted at once.
  SliceGrant Grant(SliceRequest request) {
    SliceTicket ticket = manager_->RequestSlice(std::move(request));
    EXPECT_TRUE(ticket.grant.IsReady());
    absl::StatusOr<SliceGrant> grant = ticket.grant.Await();
    EXPECT_TRUE(grant.ok()) << grant.status();
    return grant.ok() ? *grant : SliceGrant{};
  }

  // A host of `devices` devices joins `island`; returns its id.
  HostId Join(int64_t island, int64_t devices) {
    std::shared_ptr<const Topology> now = manager_->topology();
    Topology next =
        *now->WithHost(IslandId(island), HostSpec{devices, "cpu", 1024},
                       absl::StrCat("w", now->num_hosts()), "");
    const HostId host(next.num_hosts() - 1);
    absl::Status added = manager_->AddHost(
        std::make_shared<const Topology>(next.WithHostAlive(host)), host);
    EXPECT_TRUE(added.ok()) << added;
    return host;
  }

  std::vector<SliceEvent> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  SliceEvent LastEvent() {
    absl::MutexLock lock(&mu_);
    return events_.empty() ? SliceEvent{} : events_.back();
  }

  std::unique_ptr<ResourceManager> manager_;
  absl::Mutex mu_;
  std::vector<SliceEvent> events_ ABSL_GUARDED_BY(mu_);
};

// --- Granting ----------------------------------------------------------------

TEST_F(ResourceManagerTest, GrantsAtOnceWhenASliceFits) {
  Build(Topology::Uniform(1, 2, 4, 1024));
  SliceRequest request = Request(4);
  request.mesh_shape = {2, 2};
  SliceTicket ticket = manager_->RequestSlice(request);
  ASSERT_TRUE(ticket.grant.IsReady());
  const SliceGrant& grant = *ticket.grant.Await();
  EXPECT_EQ(grant.id, ticket.id);
  EXPECT_EQ(grant.session, SessionId(1));
  EXPECT_EQ(grant.island, IslandId(0));
  EXPECT_EQ(grant.devices, Ids({0, 1, 2, 3}));
  EXPECT_THAT(grant.mesh_shape, ElementsAre(2, 2));
  EXPECT_EQ(grant.generation, 1u);
  SliceEvent event = LastEvent();
  EXPECT_EQ(event.kind, Kind::kGranted);
  EXPECT_EQ(event.slice, ticket.id);
  EXPECT_EQ(event.new_devices, Ids({0, 1, 2, 3}));
  EXPECT_TRUE(event.old_devices.empty());
}

TEST_F(ResourceManagerTest, FillsOneHostBeforeSpreadingToAnother) {
  Build(Topology::Uniform(1, 2, 4, 1024));
  EXPECT_EQ(Grant(Request(3)).devices, Ids({0, 1, 2}));
  // Host 0 has one device left; a pair fits whole on host 1.
  EXPECT_EQ(Grant(Request(2)).devices, Ids({4, 5}));
  EXPECT_EQ(Grant(Request(1)).devices, Ids({3}));
  EXPECT_EQ(Grant(Request(2)).devices, Ids({6, 7}));
}

TEST_F(ResourceManagerTest, SpansTheFewestHosts) {
  // Hosts of 1, 1 and 4 devices: ids 0 | 1 | 2-5.
  Build(
      Topology::Create({IslandSpec{{HostSpec{1}, HostSpec{1}, HostSpec{4}}}}));
  EXPECT_EQ(Grant(Request(4)).devices, Ids({2, 3, 4, 5}));
  EXPECT_EQ(Grant(Request(2)).devices, Ids({0, 1}));
}

TEST_F(ResourceManagerTest, TakesTheShortestContiguousRunThatFits) {
  Build(Topology::Uniform(1, 1, 8, 1024));
  std::vector<SliceId> singles;
  for (int i = 0; i < 8; ++i) singles.push_back(Grant(Request(1)).id);
  // Free devices 1-2 and 4-6.
  for (int i : {1, 2, 4, 5, 6}) ASSERT_TRUE(manager_->Release(singles[i]).ok());
  EXPECT_EQ(Grant(Request(2)).devices, Ids({1, 2}));
  EXPECT_EQ(Grant(Request(3)).devices, Ids({4, 5, 6}));
}

TEST_F(ResourceManagerTest, PicksTheIslandThatFitsMostTightly) {
  Build(Topology::Uniform(2, 1, 4, 1024));
  SliceRequest on_island_1 = Request(2);
  on_island_1.island = IslandId(1);
  EXPECT_EQ(Grant(on_island_1).devices, Ids({4, 5}));
  // Both islands can hold 2; island 1 has fewer free devices left.
  SliceGrant grant = Grant(Request(2));
  EXPECT_EQ(grant.island, IslandId(1));
  EXPECT_EQ(grant.devices, Ids({6, 7}));
}

TEST_F(ResourceManagerTest, HonoursARequestedIsland) {
  Build(Topology::Uniform(2, 1, 4, 1024));
  SliceRequest request = Request(4);
  request.island = IslandId(1);
  SliceGrant grant = Grant(request);
  EXPECT_EQ(grant.island, IslandId(1));
  EXPECT_EQ(grant.devices, Ids({4, 5, 6, 7}));
}

// --- Refusals ----------------------------------------------------------------

TEST_F(ResourceManagerTest, FailsAtOnceWhenNoIslandIsBigEnough) {
  Build(Topology::Uniform(2, 2, 4, 1024));
  SliceTicket ticket = manager_->RequestSlice(Request(9));
  ASSERT_TRUE(ticket.grant.IsReady());
  absl::Status status = ticket.grant.Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(),
              HasSubstr("a slice of 9 devices can never be granted: the "
                        "largest island has 8 devices"));
  EXPECT_EQ(manager_->GetSlice(ticket.id).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ResourceManagerTest, FailsAtOnceWhenTheRequestedIslandIsTooSmall) {
  Build(
      Topology::Create({IslandSpec{{HostSpec{8}}}, IslandSpec{{HostSpec{2}}}}));
  SliceRequest request = Request(4);
  request.island = IslandId(1);
  absl::Status status = manager_->RequestSlice(request).grant.Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("on island 1: it has 2 devices"));
}

TEST_F(ResourceManagerTest, RejectsMalformedRequests) {
  Build(Topology::Uniform(1, 1, 8, 1024));
  SliceRequest bad_mesh = Request(4);
  bad_mesh.mesh_shape = {2, 3};
  EXPECT_THAT(manager_->RequestSlice(bad_mesh).grant.Await().status().message(),
              HasSubstr("mesh shape [2,3] does not have 4 devices"));
  SliceRequest zero_axis = Request(4);
  zero_axis.mesh_shape = {4, 0};
  EXPECT_EQ(manager_->RequestSlice(zero_axis).grant.Await().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->RequestSlice(Request(0)).grant.Await().status().code(),
            absl::StatusCode::kInvalidArgument);
  SliceRequest no_session = Request(1);
  no_session.session = SessionId();
  EXPECT_THAT(
      manager_->RequestSlice(no_session).grant.Await().status().message(),
      HasSubstr("no session"));
  SliceRequest bad_island = Request(1);
  bad_island.island = IslandId(3);
  EXPECT_THAT(
      manager_->RequestSlice(bad_island).grant.Await().status().message(),
      HasSubstr("island 3 does not exist"));
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)).size(), 8u);
}

TEST_F(ResourceManagerTest, RefusesRequestsWhenTheQueueIsFull) {
  Build(Topology::Uniform(1, 1, 2, 1024), {.max_queued_requests = 1});
  Grant(Request(2));
  EXPECT_FALSE(manager_->RequestSlice(Request(1)).grant.IsReady());
  absl::Status status =
      manager_->RequestSlice(Request(1)).grant.Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("queue is full"));
  EXPECT_THAT(status.message(), HasSubstr("--max-queued-slice-requests"));
}

// --- Queueing ----------------------------------------------------------------

TEST_F(ResourceManagerTest, QueuedRequestIsGrantedWhenDevicesAreReleased) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceGrant first = Grant(Request(2, 1));
  Grant(Request(2, 2));
  SliceTicket third = manager_->RequestSlice(Request(2, 3));
  EXPECT_FALSE(third.grant.IsReady());
  EXPECT_EQ(manager_->GetSlice(third.id)->state, SliceState::kQueued);
  ASSERT_TRUE(manager_->Release(first.id).ok());
  ASSERT_TRUE(third.grant.IsReady());
  EXPECT_EQ(third.grant.Await()->devices, first.devices);
  std::vector<SliceEvent> events = Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].kind, Kind::kReleased);
  EXPECT_EQ(events.back().kind, Kind::kGranted);
  EXPECT_EQ(events.back().slice, third.id);
}

TEST_F(ResourceManagerTest, GrantsInArrivalOrderWithinAPriority) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant holder = Grant(Request(2));
  SliceTicket a = manager_->RequestSlice(Request(1));
  SliceTicket b = manager_->RequestSlice(Request(2));
  SliceTicket c = manager_->RequestSlice(Request(1));
  ASSERT_TRUE(manager_->Release(holder.id).ok());
  // a fits, b (2 devices) waits for a and holds c back behind it.
  EXPECT_TRUE(a.grant.IsReady());
  EXPECT_FALSE(b.grant.IsReady());
  EXPECT_FALSE(c.grant.IsReady());
  ASSERT_TRUE(manager_->Release(a.id).ok());
  EXPECT_TRUE(b.grant.IsReady());
  EXPECT_FALSE(c.grant.IsReady());
}

TEST_F(ResourceManagerTest, GrantsHigherPrioritiesFirst) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant holder = Grant(Request(2));
  SliceTicket low = manager_->RequestSlice(Request(2));
  SliceRequest urgent = Request(2);
  urgent.priority = 5;
  SliceTicket high = manager_->RequestSlice(urgent);
  ASSERT_TRUE(manager_->Release(holder.id).ok());
  EXPECT_TRUE(high.grant.IsReady());
  EXPECT_FALSE(low.grant.IsReady());
}

TEST_F(ResourceManagerTest, WaitingRequestHoldsBackLaterOnesForItsIsland) {
  Build(Topology::Uniform(2, 1, 4, 1024));
  SliceRequest on_0 = Request(2);
  on_0.island = IslandId(0);
  Grant(on_0);
  SliceRequest big = Request(4);
  big.island = IslandId(0);
  SliceTicket waiting = manager_->RequestSlice(big);
  EXPECT_FALSE(waiting.grant.IsReady());
  // Two devices are free on island 0, but the big request is first in line
  // there; a small request goes to island 1 instead.
  SliceGrant small = Grant(Request(1));
  EXPECT_EQ(small.island, IslandId(1));
  SliceRequest small_on_0 = Request(1);
  small_on_0.island = IslandId(0);
  EXPECT_FALSE(manager_->RequestSlice(small_on_0).grant.IsReady());
}

TEST_F(ResourceManagerTest, CancelRequestFailsAQueuedRequest) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant holder = Grant(Request(2));
  SliceTicket queued = manager_->RequestSlice(Request(1));
  ASSERT_TRUE(manager_->CancelRequest(queued.id).ok());
  ASSERT_TRUE(queued.grant.IsReady());
  EXPECT_EQ(queued.grant.Await().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(manager_->CancelRequest(holder.id).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->CancelRequest(SliceId(99)).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ResourceManagerTest, CancellingTheHeadOfTheQueueLetsOthersThrough) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  Grant(Request(2));
  SliceTicket big = manager_->RequestSlice(Request(4));
  SliceTicket small = manager_->RequestSlice(Request(2));
  EXPECT_FALSE(small.grant.IsReady());
  ASSERT_TRUE(manager_->CancelRequest(big.id).ok());
  EXPECT_TRUE(small.grant.IsReady());
}

TEST_F(ResourceManagerTest, ReleaseSessionFreesItsSlicesAndCancelsItsQueue) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  Grant(Request(2, /*session=*/7));
  Grant(Request(1, /*session=*/7));
  SliceTicket other_session = manager_->RequestSlice(Request(3, 8));
  SliceTicket queued = manager_->RequestSlice(Request(4, 7));
  EXPECT_EQ(manager_->ReleaseSession(SessionId(7)), 3);
  EXPECT_EQ(queued.grant.Await().status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(queued.grant.Await().status().message(),
              HasSubstr("session 7 ended"));
  ASSERT_TRUE(other_session.grant.IsReady());
  EXPECT_TRUE(other_session.grant.Await().ok());
  EXPECT_EQ(manager_->ListSlices().size(), 1u);
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)).size(), 1u);
}

TEST_F(ResourceManagerTest, ReleaseOfAnUnknownSliceIsNotFound) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant grant = Grant(Request(1));
  ASSERT_TRUE(manager_->Release(grant.id).ok());
  EXPECT_EQ(manager_->Release(grant.id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LastEvent().kind, Kind::kReleased);
  EXPECT_EQ(LastEvent().old_devices, Ids({0}));
}

// --- Failure and remap -------------------------------------------------------

TEST_F(ResourceManagerTest, DeadDeviceIsReplacedByASpareInItsPosition) {
  Build(Topology::Uniform(1, 2, 2, 1024));
  SliceGrant grant = Grant(Request(2));
  ASSERT_EQ(grant.devices, Ids({0, 1}));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(0)).ok());
  absl::StatusOr<SliceInfo> info = manager_->GetSlice(grant.id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, SliceState::kGranted);
  EXPECT_EQ(info->devices, Ids({2, 1}));  // Device 1 keeps virtual index 1.
  EXPECT_EQ(info->generation, 2u);
  SliceEvent event = LastEvent();
  EXPECT_EQ(event.kind, Kind::kRemapped);
  EXPECT_EQ(event.old_devices, Ids({0, 1}));
  EXPECT_EQ(event.new_devices, Ids({2, 1}));
  EXPECT_EQ(event.generation, 2u);
}

TEST_F(ResourceManagerTest, DeadHostRemapsEverySliceThatUsedIt) {
  Build(Topology::Uniform(1, 3, 2, 1024));
  SliceGrant a = Grant(Request(1, 1));
  SliceGrant b = Grant(Request(1, 2));
  ASSERT_EQ(a.devices, Ids({0}));
  ASSERT_EQ(b.devices, Ids({1}));
  ASSERT_TRUE(manager_->MarkHostDead(HostId(0)).ok());
  EXPECT_EQ(manager_->GetSlice(a.id)->devices, Ids({2}));
  EXPECT_EQ(manager_->GetSlice(b.id)->devices, Ids({3}));
  int remapped = 0;
  for (const SliceEvent& event : Events()) {
    if (event.kind == Kind::kRemapped) ++remapped;
  }
  EXPECT_EQ(remapped, 2);
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)), Ids({4, 5}));
}

TEST_F(ResourceManagerTest, SliceBreaksWithoutSparesAndIsRepairedFirst) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceGrant a = Grant(Request(2, 1));
  SliceGrant b = Grant(Request(2, 2));
  ASSERT_TRUE(manager_->MarkDeviceDead(a.devices[1]).ok());
  absl::StatusOr<SliceInfo> broken = manager_->GetSlice(a.id);
  EXPECT_EQ(broken->state, SliceState::kBroken);
  EXPECT_EQ(broken->generation, 2u);
  EXPECT_EQ(LastEvent().kind, Kind::kBroken);
  EXPECT_TRUE(LastEvent().new_devices.empty());
  // Its surviving device stays reserved for it.
  EXPECT_TRUE(manager_->FreeDevices(IslandId(0)).empty());
  SliceTicket newcomer = manager_->RequestSlice(Request(1, 3));
  ASSERT_TRUE(manager_->Release(b.id).ok());
  absl::StatusOr<SliceInfo> repaired = manager_->GetSlice(a.id);
  EXPECT_EQ(repaired->state, SliceState::kGranted);
  EXPECT_EQ(repaired->devices, Ids({0, 2}));
  EXPECT_EQ(repaired->generation, 3u);
  // The newcomer got the last free device after the repair.
  ASSERT_TRUE(newcomer.grant.IsReady());
  EXPECT_EQ(newcomer.grant.Await()->devices, Ids({3}));
}

TEST_F(ResourceManagerTest, HigherPrioritySlicesGetTheSparesFirst) {
  Build(Topology::Uniform(1, 2, 2, 1024));
  SliceGrant low = Grant(Request(1, 1));
  SliceRequest urgent = Request(1, 2);
  urgent.priority = 5;
  SliceGrant high = Grant(urgent);
  Grant(Request(1, 3));
  ASSERT_EQ(low.devices, Ids({0}));
  ASSERT_EQ(high.devices, Ids({1}));
  ASSERT_TRUE(manager_->MarkHostDead(HostId(0)).ok());  // One spare: 3.
  EXPECT_EQ(manager_->GetSlice(high.id)->devices, Ids({3}));
  EXPECT_EQ(manager_->GetSlice(low.id)->state, SliceState::kBroken);
}

TEST_F(ResourceManagerTest, AJoiningHostRepairsABrokenSlice) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant grant = Grant(Request(2));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(1)).ok());
  ASSERT_EQ(manager_->GetSlice(grant.id)->state, SliceState::kBroken);
  EXPECT_TRUE(manager_->MarkDeviceDead(DeviceId(1)).ok());  // No change.
  Join(0, 1);
  absl::StatusOr<SliceInfo> info = manager_->GetSlice(grant.id);
  EXPECT_EQ(info->state, SliceState::kGranted);
  EXPECT_EQ(info->devices, Ids({0, 2}));
  EXPECT_EQ(LastEvent().kind, Kind::kRemapped);
}

TEST_F(ResourceManagerTest, AJoiningHostGrantsAQueuedRequest) {
  Build(Topology::Uniform(2, 1, 2, 1024));
  Grant(Request(2));
  SliceRequest wanted = Request(2, 2);
  wanted.island = IslandId(0);
  SliceTicket queued = manager_->RequestSlice(wanted);
  ASSERT_FALSE(queued.grant.IsReady());
  Join(1, 2);  // Another island: no help.
  EXPECT_FALSE(queued.grant.IsReady());
  const HostId host = Join(0, 2);
  ASSERT_TRUE(queued.grant.IsReady());
  EXPECT_EQ(queued.grant.Await()->devices, Ids({6, 7}));
  EXPECT_EQ(manager_->topology()->HostOf(DeviceId(6)), host);
}

TEST_F(ResourceManagerTest, AJoiningHostRegrowsASliceThatShrankByWholeRows) {
  Build(Topology::Uniform(1, 2, 2, 1024));
  SliceRequest request = Request(4);
  request.mesh_shape = {2, 2};
  request.allow_smaller = true;
  SliceGrant grant = Grant(request);
  ASSERT_TRUE(manager_->MarkHostDead(HostId(1)).ok());
  ASSERT_THAT(manager_->GetSlice(grant.id)->mesh_shape, ElementsAre(1, 2));
  Join(0, 1);  // Not a whole row yet.
  EXPECT_THAT(manager_->GetSlice(grant.id)->mesh_shape, ElementsAre(1, 2));
  Join(0, 1);
  absl::StatusOr<SliceInfo> info = manager_->GetSlice(grant.id);
  EXPECT_THAT(info->mesh_shape, ElementsAre(2, 2));
  EXPECT_EQ(info->devices, Ids({0, 1, 4, 5}));
  EXPECT_EQ(info->generation, 3u);
  EXPECT_EQ(LastEvent().kind, Kind::kRemapped);
}

TEST_F(ResourceManagerTest, WithWaitForHostsATooLargeRequestQueues) {
  Build(Topology::Uniform(1, 1, 1, 1024), {.wait_for_hosts = true});
  SliceRequest far = Request(2);
  far.island = IslandId(3);
  SliceTicket queued = manager_->RequestSlice(far);
  ASSERT_FALSE(queued.grant.IsReady());
  Join(3, 1);
  EXPECT_FALSE(queued.grant.IsReady());
  Join(3, 1);
  ASSERT_TRUE(queued.grant.IsReady());
  EXPECT_EQ(queued.grant.Await()->island, IslandId(3));
}

TEST_F(ResourceManagerTest, WithWaitForHostsARequestBeyondTheConfigurationFailsAtOnce) {
  // Configured for 2 islands of 4 devices; only one host has joined yet.
  Build(Topology::Uniform(1, 1, 2, 1024),
        {.wait_for_hosts = true, .islands = 2, .island_devices = 4});
  SliceTicket big = manager_->RequestSlice(Request(5));
  ASSERT_TRUE(big.grant.IsReady());
  absl::Status status = big.grant.Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(),
              HasSubstr("a slice of 5 devices can never be granted: an island "
                        "of this cluster has at most 4 devices "
                        "(head flag --max-island-devices"));
  SliceRequest far = Request(1);
  far.island = IslandId(2);
  status = manager_->RequestSlice(far).grant.Await().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("island 2 does not exist and never will: the cluster "
                        "is configured with 2 islands"));
  // Within the configuration it still waits for the hosts to come.
  SliceTicket fits = manager_->RequestSlice(Request(4));
  ASSERT_FALSE(fits.grant.IsReady());
  Join(0, 2);
  ASSERT_TRUE(fits.grant.IsReady());
  EXPECT_TRUE(fits.grant.Await().ok());
}

TEST_F(ResourceManagerTest, AnIslandLargerThanConfiguredCountsAtItsRealSize) {
  Build(Topology::Uniform(1, 2, 4, 1024),
        {.wait_for_hosts = true, .islands = 1, .island_devices = 4});
  EXPECT_EQ(Grant(Request(8)).devices.size(), 8u);
}

TEST_F(ResourceManagerTest, StatusSaysWhatAQueuedRequestNeedsAndWhatThereIs) {
  Build(Topology::Uniform(2, 1, 4, 1024), {.wait_for_hosts = true});
  SliceGrant held = Grant(Request(3));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(7)).ok());
  SliceTicket queued = manager_->RequestSlice(Request(6, 2));
  SliceRequest on_one = Request(2, 3);
  on_one.island = IslandId(0);
  SliceTicket queued_on_one = manager_->RequestSlice(on_one);
  ASSERT_FALSE(queued.grant.IsReady());
  ASSERT_FALSE(queued_on_one.grant.IsReady());
  const std::string text = manager_->DebugString();
  EXPECT_THAT(text, HasSubstr("queued 6 devices on any island (needs 6 "
                              "devices; the largest island, 0, has 4 "
                              "healthy, 1 free)"));
  EXPECT_THAT(text, HasSubstr("queued 2 devices on island 0 (needs 2 "
                              "devices; island 0 has 4 healthy, 1 free)"));
  (void)held;
}

// A request that only the session's own slices could satisfy waits (the
// session may release one), and status says whose devices it waits for.
TEST_F(ResourceManagerTest, StatusSaysWhenARequestWaitsForItsOwnSessionsSlices) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceGrant first = Grant(Request(2, /*session=*/5));
  SliceGrant second = Grant(Request(1, /*session=*/5));
  SliceTicket queued = manager_->RequestSlice(Request(3, /*session=*/5));
  ASSERT_FALSE(queued.grant.IsReady());
  EXPECT_THAT(manager_->DebugString(),
              HasSubstr(absl::StrCat(
                  "(needs 3 devices; the largest island, 0, has 4 healthy, 1 "
                  "free, 3 held by this session's own slices ",
                  first.id.value(), ", ", second.id.value(), ")")));
  // Another session's view of the same island names nobody's slices.
  SliceTicket other = manager_->RequestSlice(Request(2, /*session=*/6));
  ASSERT_FALSE(other.grant.IsReady());
  EXPECT_THAT(manager_->DebugString(),
              HasSubstr("(needs 2 devices; the largest island, 0, has 4 "
                        "healthy, 1 free)"));
  // Releasing one of its own slices lets the request through.
  ASSERT_TRUE(manager_->Release(first.id).ok());
  EXPECT_TRUE(queued.grant.IsReady());
}

TEST_F(ResourceManagerTest, SliceThatAllowsItShrinksAlongItsFirstMeshAxis) {
  Build(Topology::Uniform(1, 2, 4, 1024));
  SliceRequest request = Request(8);
  request.mesh_shape = {4, 2};
  request.allow_smaller = true;
  SliceGrant grant = Grant(request);
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(2)).ok());
  absl::StatusOr<SliceInfo> info = manager_->GetSlice(grant.id);
  EXPECT_EQ(info->state, SliceState::kGranted);
  EXPECT_THAT(info->mesh_shape, ElementsAre(3, 2));
  EXPECT_EQ(info->devices, Ids({0, 1, 3, 4, 5, 6}));
  // The survivor beyond the last whole row went back to the pool.
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)), Ids({7}));
  SliceEvent event = LastEvent();
  EXPECT_EQ(event.kind, Kind::kRemapped);
  EXPECT_THAT(event.mesh_shape, ElementsAre(3, 2));
}

TEST_F(ResourceManagerTest, SliceThatCannotShrinkToAWholeRowBreaks) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceRequest request = Request(2);
  request.mesh_shape = {1, 2};
  request.allow_smaller = true;
  SliceGrant grant = Grant(request);
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(0)).ok());
  EXPECT_EQ(manager_->GetSlice(grant.id)->state, SliceState::kBroken);
}

TEST_F(ResourceManagerTest, ReleasingABrokenSliceFreesItsSurvivors) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  SliceGrant grant = Grant(Request(2));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(0)).ok());
  ASSERT_TRUE(manager_->Release(grant.id).ok());
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)), Ids({1}));
  EXPECT_EQ(LastEvent().kind, Kind::kReleased);
}

TEST_F(ResourceManagerTest, MarkDeadRejectsUnknownIds) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  EXPECT_EQ(manager_->MarkDeviceDead(DeviceId(2)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->MarkHostDead(HostId(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->AddHost(manager_->topology(), HostId(-1)).code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Explicit remap ----------------------------------------------------------

TEST_F(ResourceManagerTest, RemapMovesASliceOntoChosenDevices) {
  Build(Topology::Uniform(2, 1, 2, 1024));
  SliceGrant grant = Grant(Request(2));
  absl::StatusOr<SliceGrant> moved =
      manager_->Remap(grant.id, Ids({3, 2}));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->island, IslandId(1));
  EXPECT_EQ(moved->devices, Ids({3, 2}));
  EXPECT_EQ(moved->generation, 2u);
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)), grant.devices);
  EXPECT_EQ(LastEvent().kind, Kind::kRemapped);
  EXPECT_EQ(LastEvent().old_devices, grant.devices);
}

TEST_F(ResourceManagerTest, RemapRefusesDevicesThatAreNotFree) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceGrant a = Grant(Request(2));
  SliceGrant b = Grant(Request(2));
  absl::StatusOr<SliceGrant> result = manager_->Remap(a.id, b.devices);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("in use by another slice"));
  EXPECT_EQ(manager_->GetSlice(a.id)->devices, a.devices);
  EXPECT_EQ(manager_->Remap(a.id, Ids({0})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Remap(a.id, Ids({0, 0})).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The slice's own devices may be reordered.
  EXPECT_EQ(manager_->Remap(a.id, Ids({1, 0}))->devices, Ids({1, 0}));
}

TEST_F(ResourceManagerTest, RemapWithoutDevicesCompactsASlice) {
  Build(Topology::Uniform(1, 2, 2, 1024));
  SliceGrant grant = Grant(Request(2));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(1)).ok());
  ASSERT_EQ(manager_->GetSlice(grant.id)->devices, Ids({0, 2}));
  Join(0, 2);
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(3)).ok());
  absl::StatusOr<SliceGrant> compacted =
      manager_->Remap(grant.id, std::nullopt);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_EQ(compacted->devices, Ids({4, 5}));
  EXPECT_EQ(compacted->generation, 3u);
  // Already compact: no change, no new generation.
  EXPECT_EQ(manager_->Remap(grant.id, std::nullopt)->generation, 3u);
}

TEST_F(ResourceManagerTest, RemapOfAQueuedSliceIsAPreconditionFailure) {
  Build(Topology::Uniform(1, 1, 1, 1024));
  Grant(Request(1));
  SliceTicket queued = manager_->RequestSlice(Request(1));
  EXPECT_EQ(manager_->Remap(queued.id, std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// --- Shared slices -----------------------------------------------------------

TEST_F(ResourceManagerTest, SharedSlicesTimeShareDevices) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceRequest shared = Request(4);
  shared.shared = true;
  SliceGrant a = Grant(shared);
  SliceGrant b = Grant(shared);
  EXPECT_EQ(a.devices, b.devices);
  EXPECT_TRUE(b.shared);
  EXPECT_TRUE(manager_->FreeDevices(IslandId(0)).empty());
  // An exclusive slice must wait until every shared user has gone.
  SliceTicket exclusive = manager_->RequestSlice(Request(1));
  EXPECT_FALSE(exclusive.grant.IsReady());
  ASSERT_TRUE(manager_->Release(a.id).ok());
  EXPECT_FALSE(exclusive.grant.IsReady());
  ASSERT_TRUE(manager_->Release(b.id).ok());
  EXPECT_TRUE(exclusive.grant.IsReady());
}

TEST_F(ResourceManagerTest, SharedSlicesSpreadOverTheLeastUsedDevices) {
  Build(Topology::Uniform(1, 1, 4, 1024));
  SliceRequest shared = Request(2);
  shared.shared = true;
  EXPECT_EQ(Grant(shared).devices, Ids({0, 1}));
  EXPECT_EQ(Grant(shared).devices, Ids({2, 3}));
  EXPECT_EQ(Grant(shared).devices, Ids({0, 1}));
}

// A shared slice repaired after a host died takes devices it does not hold
// already: its survivors are eligible for other shared slices, not twice
// for itself (they were chosen first, being on the fewest hosts).
TEST_F(ResourceManagerTest, ASharedSliceIsRepairedOntoDevicesItDoesNotHold) {
  Build(Topology::Uniform(1, 3, 2, 1024));
  SliceRequest shared = Request(4);
  shared.shared = true;
  SliceGrant four = Grant(shared);
  SliceRequest one = Request(1);
  one.shared = true;
  Grant(one);  // Load elsewhere, as a JAX process's other slices give.
  ASSERT_EQ(four.devices, Ids({0, 1, 2, 3}));
  ASSERT_TRUE(manager_->MarkHostDead(HostId(0)).ok());
  absl::StatusOr<SliceInfo> after = manager_->GetSlice(four.id);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state, SliceState::kGranted);
  const std::set<DeviceId> distinct(after->devices.begin(), after->devices.end());
  EXPECT_EQ(distinct.size(), 4u);
  for (DeviceId device : after->devices) {
    EXPECT_NE(manager_->topology()->HostOf(device), HostId(0));
  }
}

// --- Threads and callbacks ---------------------------------------------------

TEST_F(ResourceManagerTest, ListenersMayCallBackIntoTheManager) {
  Build(Topology::Uniform(1, 1, 2, 1024));
  std::vector<SliceState> seen;
  manager_->AddListener([&](const SliceEvent& event) {
    if (event.kind != Kind::kGranted) return;
    seen.push_back(manager_->GetSlice(event.slice)->state);
    ASSERT_TRUE(manager_->Release(event.slice).ok());
  });
  SliceTicket ticket = manager_->RequestSlice(Request(2));
  ASSERT_TRUE(ticket.grant.IsReady());
  EXPECT_TRUE(ticket.grant.Await().ok());
  EXPECT_THAT(seen, ElementsAre(SliceState::kGranted));
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)).size(), 2u);
  EXPECT_EQ(LastEvent().kind, Kind::kReleased);
}

TEST_F(ResourceManagerTest, TheGrantEventComesBeforeTheFutureResolves) {
  Build(Topology::Uniform(1, 1, 1, 1024));
  SliceGrant holder = Grant(Request(1));
  SliceTicket queued = manager_->RequestSlice(Request(1));
  bool ready_at_event = true;
  manager_->AddListener([&](const SliceEvent& event) {
    if (event.kind == Kind::kGranted) ready_at_event = queued.grant.IsReady();
  });
  ASSERT_TRUE(manager_->Release(holder.id).ok());
  EXPECT_TRUE(queued.grant.IsReady());
  EXPECT_FALSE(ready_at_event);
}

TEST_F(ResourceManagerTest, DestructionCancelsQueuedRequests) {
  Build(Topology::Uniform(1, 1, 1, 1024));
  Grant(Request(1));
  SliceTicket queued = manager_->RequestSlice(Request(1));
  manager_.reset();
  ASSERT_TRUE(queued.grant.IsReady());
  EXPECT_EQ(queued.grant.Await().status().code(), absl::StatusCode::kCancelled);
}

TEST_F(ResourceManagerTest, ManyThreadsNeverGetTheSameDeviceAtOnce) {
  Build(Topology::Uniform(2, 2, 4, 1024));
  absl::Mutex mu;
  std::set<DeviceId> held;
  int64_t conflicts = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        SliceRequest request = Request(1 + rng() % 5, t);
        request.priority = static_cast<int>(rng() % 3);
        SliceTicket ticket = manager_->RequestSlice(request);
        absl::StatusOr<SliceGrant> grant =
            ticket.grant.AwaitFor(absl::Seconds(30));
        ASSERT_TRUE(grant.ok()) << grant.status();
        {
          absl::MutexLock lock(&mu);
          for (DeviceId d : grant->devices) {
            if (!held.insert(d).second) ++conflicts;
          }
        }
        {
          absl::MutexLock lock(&mu);
          for (DeviceId d : grant->devices) held.erase(d);
        }
        ASSERT_TRUE(manager_->Release(ticket.id).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(conflicts, 0);
  EXPECT_TRUE(manager_->ListSlices().empty());
  EXPECT_EQ(manager_->FreeDevices(IslandId(0)).size() +
                manager_->FreeDevices(IslandId(1)).size(),
            16u);
}

TEST_F(ResourceManagerTest, DebugStringShowsDevicesSlicesAndQueue) {
  Build(Topology::Uniform(1, 1, 3, 1024));
  SliceGrant grant = Grant(Request(2));
  ASSERT_TRUE(manager_->MarkDeviceDead(DeviceId(2)).ok());
  SliceTicket queued = manager_->RequestSlice(Request(1, 4));
  std::string text = manager_->DebugString();
  EXPECT_THAT(text, HasSubstr("3 devices (2 healthy, 0 free)"));
  EXPECT_THAT(text, HasSubstr("island 0: 0=slice0 1=slice0 2=dead"));
  EXPECT_THAT(text, HasSubstr("slice 0 (session 1): granted island 0 "
                              "devices [0,1] generation 1 mesh [2]"));
  EXPECT_THAT(text, HasSubstr("slice 1 (session 4): queued 1 devices on any "
                              "island"));
  EXPECT_THAT(text, HasSubstr("queue: 1"));
  (void)grant;
  (void)queued;
}

}  // namespace resource_manager_test
}  // namespace causeway::head
