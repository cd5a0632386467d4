// The Gloo collectives across real processes on loopback: gloo_peer
// children (built beside this test) run all-reduces in a loop through
// GlooCollectives, sharing this process's key-value store over their stdio.
// One of them is killed (SIGKILL) or stopped (SIGSTOP) mid-loop; every
// survivor must fail its all-reduce with DATA_LOSS, the status of a lost
// peer, long before the collective timeout (60 s, so DEADLINE_EXCEEDED
// would mean it waited). The StoreServer kills and reaps every child at the
// end, also when a test fails.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "causeway/transport/testing/stream_key_value_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport::testing {
namespace gloo_multiprocess_test {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string PeerBinary() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CW_CHECK(n > 0);
  self[n] = '\0';
  return (std::filesystem::path(self).parent_path() / "gloo_peer").string();
}

// A launch of 0.5 MiB f32 all-reduces over `partitions` devices (ids
// 100..), each process holding `per_process` consecutive partitions.
class GlooMultiProcessTest : public ::testing::Test {
 protected:
  void StartPeers(int64_t partitions, int64_t per_process) {
    ASSERT_TRUE(std::filesystem::exists(PeerBinary()))
        << PeerBinary() << " is missing: build the gloo_peer target";
    std::vector<std::string> devices;
    for (int64_t p = 0; p < partitions; ++p) {
      devices.push_back(absl::StrCat(100 + p));
    }
    for (int64_t first = 0; first < partitions; first += per_process) {
      std::vector<std::string> local;
      for (int64_t p = first; p < first + per_process; ++p) {
        local.push_back(absl::StrCat(p));
      }
      absl::StatusOr<int> child = server_.Start(
          {PeerBinary(), "--mode=loop",
           absl::StrCat("--devices=", absl::StrJoin(devices, ",")),
           absl::StrCat("--local=", absl::StrJoin(local, ",")),
           "--elements=131072", "--iterations=0", "--timeout_ms=60000"});
      ASSERT_TRUE(child.ok()) << child.status();
      partitions_of_.push_back(per_process);
    }
    // Every process has finished one all-reduce: the contexts exist and
    // the loops run.
    for (size_t child = 0; child < partitions_of_.size(); ++child) {
      absl::StatusOr<std::string> report = server_.NextReport(
          static_cast<int>(child), absl::Now() + absl::Seconds(60));
      ASSERT_TRUE(report.ok()) << report.status();
      ASSERT_EQ(*report, "ready");
    }
  }

  // Each survivor's partitions report how their all-reduce failed. How
  // long that took after `since` goes to the test's log (not a threshold:
  // the status code says they did not wait for the timeout).
  void ExpectSurvivorsFailWithDataLoss(int dead, absl::Time since) {
    for (size_t child = 0; child < partitions_of_.size(); ++child) {
      if (static_cast<int>(child) == dead) continue;
      for (int64_t k = 0; k < partitions_of_[child]; ++k) {
        absl::StatusOr<std::string> report = server_.NextReport(
            static_cast<int>(child), absl::Now() + absl::Seconds(90));
        if (!report.ok()) {
          absl::StatusOr<int> status = server_.Reap(
              static_cast<int>(child), absl::Now() + absl::Seconds(5));
          FAIL() << "child " << child << ": " << report.status()
                 << "; wait status "
                 << (status.ok() ? absl::StrCat(*status)
                                 : status.status().ToString());
        }
        const std::vector<std::string> fields = absl::StrSplit(*report, ' ');
        ASSERT_EQ(fields.size(), 4u) << *report;
        EXPECT_EQ(fields[0], "failed");
        int code = 0;
        ASSERT_TRUE(absl::SimpleAtoi(fields[2], &code));
        absl::StatusOr<std::string> message = FromHex(fields[3]);
        ASSERT_TRUE(message.ok());
        EXPECT_EQ(static_cast<absl::StatusCode>(code),
                  absl::StatusCode::kDataLoss)
            << "child " << child << ", partition " << fields[1] << ": "
            << *message;
        EXPECT_THAT(*message, HasSubstr("all-reduce.1"));
      }
      const absl::Duration took = absl::Now() - since;
      RecordProperty(absl::StrCat("child_", child, "_failed_after_ms"),
                     absl::StrCat(absl::ToInt64Milliseconds(took)));
      absl::StatusOr<int> status = server_.Reap(
          static_cast<int>(child), absl::Now() + absl::Seconds(30));
      ASSERT_TRUE(status.ok()) << status.status();
      EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "child " << child << " wait status " << *status;
    }
  }

  StoreServer server_;
  std::vector<int64_t> partitions_of_;  // By child.
};

TEST_F(GlooMultiProcessTest, KillingOneOfThreeProcessesFailsEverySurvivor) {
  StartPeers(3, 1);
  const absl::Time killed = absl::Now();
  server_.Signal(1, SIGKILL);
  ExpectSurvivorsFailWithDataLoss(1, killed);
}

TEST_F(GlooMultiProcessTest,
       KillingAProcessOfTwoRanksFailsBothRanksOfTheOthers) {
  StartPeers(6, 2);
  const absl::Time killed = absl::Now();
  server_.Signal(0, SIGKILL);
  ExpectSurvivorsFailWithDataLoss(0, killed);
}

// A stopped process keeps its sockets open: nothing fails by itself. When
// the head declares it dead, each survivor cancels its launch, which ends
// its own blocked call (even a lone survivor's) and its peers'.
TEST_F(GlooMultiProcessTest, AStoppedPeerDeclaredDeadFailsTheLoneSurvivor) {
  StartPeers(2, 1);
  server_.Signal(1, SIGSTOP);
  const absl::Time declared = absl::Now();
  server_.Command(0, absl::StrCat("abort ", ToHex("host 1 was lost")));
  ExpectSurvivorsFailWithDataLoss(1, declared);
}

TEST_F(GlooMultiProcessTest, AStoppedPeerDeclaredDeadFailsEverySurvivor) {
  StartPeers(3, 1);
  server_.Signal(2, SIGSTOP);
  const absl::Time declared = absl::Now();
  server_.Command(0, absl::StrCat("abort ", ToHex("host 2 was lost")));
  server_.Command(1, absl::StrCat("abort ", ToHex("host 2 was lost")));
  ExpectSurvivorsFailWithDataLoss(2, declared);
}

}  // namespace gloo_multiprocess_test
}  // namespace causeway::transport::testing
