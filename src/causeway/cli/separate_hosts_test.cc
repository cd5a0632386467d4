// Separate hosts (issue #7 item 9): the head and every worker in a network
// namespace of its own, joined by veth pairs to a bridge
// (testing/veth_network.h), the client in this process reaching the head
// across its own veth pair. Collectives (Gloo) and transfers (the TCP data
// plane) cross the namespaces; a SIGKILLed worker and one whose link is
// taken down are told apart by how the head hears of them. Needs root and
// `ip netns`: skipped, saying which is missing, elsewhere.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "causeway/cli/child_process.h"
#include "causeway/cli/testing/process_cluster.h"
#include "causeway/cli/testing/separate_hosts.h"
#include "causeway/cli/testing/veth_network.h"
#include "causeway/client/client.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::cli {
namespace separate_hosts_test {

using hlo::testutil::F32;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::kWait;
using ::testing::Not;
using testing::RunIp;
using testing::SeparateHostsTest;
using testing::SessionSlice;
using testing::SliceOverTwoProcesses;
using ::testing::StartsWith;
using testing::SumOfTwo;
using testing::SwappedThenDoubled;
using ::testing::UnorderedElementsAre;
using testing::VethNetwork;
using testing::Worker;

TEST_F(SeparateHostsTest, CollectivesAndTransfersCrossTheNamespaces) {
  StartHeadApart();
  EXPECT_THAT(address_, StartsWith(network_->ip(0) + ":"));
  AddWorkerApart(1);
  AddWorkerApart(2);
  std::unique_ptr<client::Client> client = Connect();
  // One device in each process.
  absl::StatusOr<SessionSlice> two = SliceOverTwoProcesses(*client);
  ASSERT_TRUE(two.ok()) << two.status();

  // An all-reduce over Gloo between the two namespaces, twice (the second
  // reuses the first's contexts).
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::vector<float>> sum =
        SumOfTwo(two->session, two->slice);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_THAT(*sum, ElementsAre(11, 22, 11, 22));
  }
  // Both halves of an array cross between them on the data plane.
  absl::StatusOr<std::pair<std::vector<float>, std::vector<float>>> moved =
      SwappedThenDoubled(two->session, two->slice, 1.5, -4);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(moved->first, ElementsAre(1.5, -4));
  EXPECT_THAT(moved->second, ElementsAre(3, -8));
}

TEST_F(SeparateHostsTest, AKilledWorkerAndACutOneAreDeadAndTheClientGoesOn) {
  // Heartbeats every 0.2 s (the fixture's), a worker silent for 1.5 s is
  // dead: only a broken stream can tell the head of the killed one sooner.
  // (The head's gRPC keepalive, a ping a second with 2 s to answer, would
  // break the cut one's stream at about 3 s: the heartbeats tell first.)
  constexpr absl::Duration kTimeout = absl::Milliseconds(1500);
  StartHeadApart(
      {"--worker-timeout", absl::StrCat(absl::ToDoubleSeconds(kTimeout))});
  for (int n = 1; n <= 6; ++n) AddWorkerApart(n);
  std::unique_ptr<client::Client> client = Connect();
  absl::StatusOr<client::Session> session = client->OpenSession({.name = "t"});
  ASSERT_TRUE(session.ok()) << session.status();
  // Two slices of two devices, each over two namespaces; two workers spare.
  std::vector<client::Slice> slices;
  std::vector<transport::SliceInfo> placed;
  std::vector<client::Array> arrays;
  for (int s = 0; s < 2; ++s) {
    absl::StatusOr<client::Slice> slice = session->CreateSlice(2);
    ASSERT_TRUE(slice.ok()) << slice.status();
    absl::StatusOr<transport::SliceInfo> granted =
        slice->Ready().AwaitFor(kWait);
    ASSERT_TRUE(granted.ok()) << granted.status();
    absl::StatusOr<std::vector<float>> sum = SumOfTwo(*session, *slice);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_THAT(*sum, ElementsAre(11, 22, 11, 22));
    absl::StatusOr<client::Array> x = session->FromHost(
        F32({2}, {1, 2}), *slice, *client::Sharding::TiledByDims({2}));
    ASSERT_TRUE(x.ok() && x->Ready().AwaitFor(kWait).ok());
    slices.push_back(*slice);
    placed.push_back(*granted);
    arrays.push_back(*x);
  }

  // The first slice's first worker is killed; the second slice's first
  // worker loses its link.
  const HostId killed = client->topology()->HostOf(placed[0].devices[0]);
  const HostId cut = client->topology()->HostOf(placed[1].devices[0]);
  WorkerOf(killed).process->Signal(SIGKILL);
  ASSERT_TRUE(network_->CutLink(NamespaceOf(cut)).ok());

  // The head hears of the killed one through its broken stream, of the
  // cut one through its missed heartbeats. (How soon: bench/
  // death_detection_bench.cc and BENCHMARKS.md; no clock decides here.)
  for (const auto& [host, why] :
       {std::pair{killed, "its connection broke"},
        std::pair{cut, "no heartbeat answered for "}}) {
    absl::StatusOr<std::string> reason = AwaitHostDead(host, kWait);
    ASSERT_TRUE(reason.ok()) << "host " << host << ": " << reason.status();
    EXPECT_THAT(*reason, HasSubstr(why)) << "host " << host;
    if (host == cut) {
      EXPECT_THAT(*reason,
                  HasSubstr(absl::StrCat("(timeout ",
                                         absl::FormatDuration(kTimeout), ")")));
    }
  }
  // What they held is lost, and the error names the host: fetched, and
  // as the input of a program.
  for (int s = 0; s < 2; ++s) {
    const std::string lost =
        absl::StrCat("host ", (s == 0 ? killed : cut).value(), " was lost");
    absl::Status fetched = arrays[s].ToHost().AwaitFor(kWait).status();
    EXPECT_EQ(fetched.code(), absl::StatusCode::kDataLoss) << fetched;
    EXPECT_THAT(fetched.message(), HasSubstr(lost));
    absl::StatusOr<client::Executable> twice =
        session->Compile(testing::TimesTwoProgram(), slices[s]);
    ASSERT_TRUE(twice.ok()) << twice.status();
    absl::StatusOr<std::vector<client::Array>> y = twice->Execute({arrays[s]});
    absl::Status run =
        y.ok() ? (*y)[0].ToHost().AwaitFor(kWait).status() : y.status();
    EXPECT_EQ(run.code(), absl::StatusCode::kDataLoss) << run;
    EXPECT_THAT(run.message(), HasSubstr(lost));
  }

  // Each slice is remapped onto a spare worker and runs again, its
  // collectives and transfers still crossing the namespaces.
  for (int s = 0; s < 2; ++s) {
    absl::StatusOr<std::vector<float>> sum = SumOfTwo(*session, slices[s]);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_THAT(*sum, ElementsAre(11, 22, 11, 22));
    absl::StatusOr<transport::SliceInfo> now = slices[s].Info().AwaitFor(kWait);
    ASSERT_TRUE(now.ok()) << now.status();
    for (DeviceId device : now->devices) {
      EXPECT_NE(device, placed[0].devices[0]);
      EXPECT_NE(device, placed[1].devices[0]);
    }
    absl::StatusOr<std::pair<std::vector<float>, std::vector<float>>> moved =
        SwappedThenDoubled(*session, slices[s], 5, 6);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_THAT(moved->first, ElementsAre(5, 6));
    EXPECT_THAT(moved->second, ElementsAre(10, 12));
  }
}

// A run that was killed never removed its namespaces: the next one does,
// by the pid in their names, and leaves a live run's alone.
TEST(VethNetworkTest, DeadRunsLeftoversAreRemovedAndALiveRunsStay) {
  if (geteuid() != 0) GTEST_SKIP() << "making namespaces needs root";
  // A pid that no longer exists: a child that exited and was reaped.
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start({"/bin/true"});
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE((*child)->Wait(kWait).ok());
  const std::string dead = absl::StrCat("cw", (*child)->pid(), "n0");
  // A live run's: this process's, under a counter it never reaches.
  const std::string live = absl::StrCat("cw", getpid(), "n99999h0");
  const std::vector<std::string> made = {dead + "sw", dead + "h0", live};
  absl::Cleanup remove_made = [&made] {
    for (const std::string& ns : made) {
      RunIp({"netns", "del", ns}).IgnoreError();
    }
  };
  for (const std::string& ns : made) {
    absl::StatusOr<std::string> added = RunIp({"netns", "add", ns});
    if (!added.ok()) {
      GTEST_SKIP() << "no network namespaces: " << added.status();
    }
  }
  // As a dead run leaves it: its veth end here, the peer in its switch.
  absl::StatusOr<std::string> linked =
      RunIp({"link", "add", dead + "c", "type", "veth", "peer", "name", "cl",
             "netns", dead + "sw"});
  if (!linked.ok()) GTEST_SKIP() << "no veth pairs: " << linked.status();

  absl::StatusOr<std::vector<std::string>> removed =
      VethNetwork::RemoveLeftovers();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed,
              UnorderedElementsAre(dead + "c", dead + "sw", dead + "h0"));
  absl::StatusOr<std::string> namespaces = RunIp({"netns", "list"});
  ASSERT_TRUE(namespaces.ok()) << namespaces.status();
  EXPECT_THAT(*namespaces, Not(HasSubstr(dead)));
  EXPECT_THAT(*namespaces, HasSubstr(live));
  EXPECT_FALSE(RunIp({"link", "show", dead + "c"}).ok());
}

}  // namespace separate_hosts_test
}  // namespace causeway::cli
