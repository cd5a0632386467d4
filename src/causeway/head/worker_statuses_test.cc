#include "causeway/head/worker_statuses.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/head/testing/fake_hosts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace worker_statuses_test {

using ::testing::ElementsAre;

// Hosts 0 and 1 alive behind fake channels, host 2 dead.
class WorkerStatusPollTest : public testing::FakeHostsTest {
 protected:
  void SetUp() override {
    AddHosts(3, 1);
    membership_.MarkDead(HostId(2), "test");
  }

  WorkerStatusPoll poll_{&membership_, &dispatcher_};
};

TEST_F(WorkerStatusPollTest, EveryAliveWorkerIsAskedOnceTheOutboxDrains) {
  Future<WorkerStatuses> statuses = poll_.Ask(absl::Seconds(30));
  EXPECT_THAT(hosts_[0]->calls(), ::testing::IsEmpty());
  outbox_.Drain();
  absl::StatusOr<WorkerStatuses> answered = statuses.Await();
  ASSERT_TRUE(answered.ok()) << answered.status();
  std::vector<HostId> hosts;
  for (const auto& [host, status] : *answered) {
    hosts.push_back(host);
    EXPECT_TRUE(status.ok()) << host << ": " << status.status();
  }
  EXPECT_THAT(hosts, ElementsAre(HostId(0), HostId(1)));
  EXPECT_THAT(hosts_[2]->calls(), ::testing::IsEmpty());
}

TEST_F(WorkerStatusPollTest, AWorkerNotAskedByTheDeadlineIsDeadlineExceeded) {
  // Nothing drains the outbox: no question leaves, the deadline passes.
  Future<WorkerStatuses> statuses = poll_.Ask(absl::ZeroDuration());
  absl::StatusOr<WorkerStatuses> answered = statuses.Await();
  ASSERT_TRUE(answered.ok()) << answered.status();
  ASSERT_EQ(answered->size(), 2u);
  for (const auto& [host, status] : *answered) {
    EXPECT_EQ(status.status().code(), absl::StatusCode::kDeadlineExceeded)
        << host;
  }
}

}  // namespace worker_statuses_test
}  // namespace causeway::head
