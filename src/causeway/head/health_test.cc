#include "causeway/head/health.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "causeway/transport/testing/fake_control_channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace health_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using transport::FakeControlChannel;
using Heartbeats = FakeControlChannel::Heartbeats;

// One alive host behind a fake channel, a monitor on a clock the test
// moves (interval 1 s, timeout 3 s).
class HealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HostAssignment host =
        *membership_.Register({IslandId(0), transport::HostSpec{1}, "w", ""});
    host_ = host.host;
    ASSERT_TRUE(membership_.Activate(host_, channel_).ok());
    monitor_ = std::make_unique<HealthMonitor>(
        HealthMonitor::Options{.heartbeat_interval = absl::Seconds(1),
                               .heartbeat_timeout = absl::Seconds(3),
                               .clock = [this] { return Now(); }},
        &membership_,
        HealthMonitor::Callbacks{
            .host_lost =
                [this](HostId host, const std::string& reason) {
                  absl::MutexLock lock(&mu_);
                  lost_.push_back(reason);
                },
            .lease_expired =
                [this](SessionId session, const std::string& reason) {
                  absl::MutexLock lock(&mu_);
                  expired_.push_back(session);
                  expired_reason_ = reason;
                }});
    monitor_->WatchHost(host_);
  }

  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  // Moves the clock in steps of a second, checking after each.
  void Advance(absl::Duration by) {
    for (absl::Duration step = absl::ZeroDuration(); step < by;
         step += absl::Seconds(1)) {
      {
        absl::MutexLock lock(&mu_);
        now_ += absl::Seconds(1);
      }
      monitor_->CheckNow();
    }
  }
  std::vector<std::string> lost() {
    absl::MutexLock lock(&mu_);
    return lost_;
  }
  std::vector<SessionId> expired() {
    absl::MutexLock lock(&mu_);
    return expired_;
  }
  int64_t pings() {
    int64_t count = 0;
    for (const std::string& call : channel_->calls())
      count += call == "Heartbeat";
    return count;
  }

  Membership membership_;
  std::shared_ptr<FakeControlChannel> channel_ =
      std::make_shared<FakeControlChannel>();
  HostId host_;
  std::unique_ptr<HealthMonitor> monitor_;
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  std::vector<std::string> lost_ ABSL_GUARDED_BY(mu_);
  std::vector<SessionId> expired_ ABSL_GUARDED_BY(mu_);
  std::string expired_reason_ ABSL_GUARDED_BY(mu_);
};

TEST_F(HealthMonitorTest, AHostThatAnswersStaysAlive) {
  Advance(absl::Seconds(20));
  EXPECT_THAT(lost(), IsEmpty());
  EXPECT_EQ(pings(), 20);
}

TEST_F(HealthMonitorTest, AHostSilentForTheTimeoutIsLostOnce) {
  channel_->set_heartbeats(Heartbeats::kHang);
  Advance(absl::Seconds(3));
  EXPECT_THAT(lost(), IsEmpty());
  Advance(absl::Seconds(1));
  ASSERT_EQ(lost().size(), 1u);
  EXPECT_THAT(lost()[0], HasSubstr("no heartbeat answered for 4s"));
  Advance(absl::Seconds(5));
  EXPECT_EQ(lost().size(), 1u);
  EXPECT_EQ(pings(), 1);  // One ping in flight at a time.
}

TEST_F(HealthMonitorTest, AFailedHeartbeatIsNotADeathWithinTheTimeout) {
  channel_->set_heartbeats(Heartbeats::kFail);
  Advance(absl::Seconds(2));
  channel_->set_heartbeats(Heartbeats::kAnswer);
  Advance(absl::Seconds(10));
  EXPECT_THAT(lost(), IsEmpty());
}

TEST_F(HealthMonitorTest, AHostThatKeepsFailingIsLostAfterTheTimeout) {
  channel_->set_heartbeats(Heartbeats::kFail);
  Advance(absl::Seconds(4));
  EXPECT_EQ(lost().size(), 1u);
}

TEST_F(HealthMonitorTest, ALateAnswerAfterTheHostWasForgottenIsIgnored) {
  channel_->set_heartbeats(Heartbeats::kHang);
  Advance(absl::Seconds(1));
  monitor_->ForgetHost(host_);
  channel_->ReleaseHeldHeartbeats(absl::OkStatus());
  Advance(absl::Seconds(10));
  EXPECT_THAT(lost(), IsEmpty());
}

TEST_F(HealthMonitorTest, ALeasedSessionExpiresWhenSilentForItsLease) {
  monitor_->WatchSession(SessionId(7), absl::Seconds(10));
  Advance(absl::Seconds(6));
  monitor_->Touch(SessionId(7));
  Advance(absl::Seconds(9));
  EXPECT_THAT(expired(), IsEmpty());
  Advance(absl::Seconds(1));
  EXPECT_THAT(expired(), ElementsAre(SessionId(7)));
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(expired_reason_, HasSubstr("lease of 10s expired"));
}

TEST_F(HealthMonitorTest, AForgottenSessionNeverExpires) {
  monitor_->WatchSession(SessionId(7), absl::Seconds(1));
  monitor_->ForgetSession(SessionId(7));
  monitor_->Touch(SessionId(7));
  Advance(absl::Seconds(5));
  EXPECT_THAT(expired(), IsEmpty());
}

}  // namespace health_test
}  // namespace causeway::head
