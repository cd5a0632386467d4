// RateLimiter: a token bucket. At most `burst` events at once, refilled at
// `rate` events per second: a caller that goes faster is refused (and told
// so by its caller, naming the limit), one that keeps within it never is.
//
// Thread-safe.
#ifndef CAUSEWAY_BASE_RATE_LIMITER_H_
#define CAUSEWAY_BASE_RATE_LIMITER_H_

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace causeway {

class RateLimiter {
 public:
  // `rate` > 0 events per second, `burst` >= 1. `now` is the clock (tests
  // give their own); the bucket starts full.
  RateLimiter(double rate, double burst,
              std::function<absl::Time()> now = &absl::Now);

  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes one event's token: true if there was one.
  bool TryAcquire();

  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  const double rate_;
  const double burst_;
  const std::function<absl::Time()> now_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway

#endif  // CAUSEWAY_BASE_RATE_LIMITER_H_
