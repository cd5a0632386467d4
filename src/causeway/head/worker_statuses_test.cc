#include "causeway/head/worker_statuses.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace {

// A dispatcher that records no events.
Dispatcher::Options QuietDispatcher() {
  Dispatcher::Options options;
  options.events = &trace::NullEventSink();
  return options;
}

using ::testing::ElementsAre;
using transport::FakeControlChannel;

// Hosts 0 and 1 alive behind fake channels, host 2 dead.
class WorkerStatusPollTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int h = 0; h < 3; ++h) {
      absl::StatusOr<HostAssignment> host = membership_.Register(
          {IslandId(0), transport::HostSpec{1}, absl::StrCat("w", h), ""});
      ASSERT_TRUE(host.ok()) << host.status();
      auto channel = std::make_shared<FakeControlChannel>();
      ASSERT_TRUE(membership_.Activate(host->host, channel).ok());
      hosts_.push_back(channel);
    }
    membership_.MarkDead(HostId(2), "test");
  }

  Outbox outbox_;
  Membership membership_;
  Dispatcher dispatcher_{QuietDispatcher(), &membership_, &outbox_};
  std::vector<std::shared_ptr<FakeControlChannel>> hosts_;
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
  outbox_.Drain();
}

}  // namespace
}  // namespace causeway::head
