#include "causeway/base/rate_limiter.h"

#include "gtest/gtest.h"

namespace causeway {
namespace rate_limiter_test {

// A clock the test moves by hand.
class RateLimiterTest : public ::testing::Test {
 protected:
  std::function<absl::Time()> Clock() {
    return [this] { return now_; };
  }
  absl::Time now_ = absl::UnixEpoch();
};

TEST_F(RateLimiterTest, AllowsABurstThenRefuses) {
  RateLimiter limiter(/*rate=*/10, /*burst=*/3, Clock());
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_FALSE(limiter.TryAcquire());
}

TEST_F(RateLimiterTest, RefillsAtItsRate) {
  RateLimiter limiter(/*rate=*/10, /*burst=*/1, Clock());
  EXPECT_TRUE(limiter.TryAcquire());
  now_ += absl::Milliseconds(50);  // Half a token.
  EXPECT_FALSE(limiter.TryAcquire());
  now_ += absl::Milliseconds(50);
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_FALSE(limiter.TryAcquire());
}

TEST_F(RateLimiterTest, NeverHoldsMoreThanItsBurst) {
  RateLimiter limiter(/*rate=*/100, /*burst=*/2, Clock());
  now_ += absl::Hours(1);
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_TRUE(limiter.TryAcquire());
  EXPECT_FALSE(limiter.TryAcquire());
}

TEST_F(RateLimiterTest, AClockThatGoesBackGivesNothing) {
  RateLimiter limiter(/*rate=*/10, /*burst=*/1, Clock());
  EXPECT_TRUE(limiter.TryAcquire());
  now_ -= absl::Seconds(10);
  EXPECT_FALSE(limiter.TryAcquire());
  now_ += absl::Seconds(10);  // Back where it was: still nothing gained.
  EXPECT_FALSE(limiter.TryAcquire());
}

}  // namespace rate_limiter_test
}  // namespace causeway
