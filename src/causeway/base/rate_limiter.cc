#include "causeway/base/rate_limiter.h"

#include <algorithm>
#include <utility>

#include "causeway/base/logging.h"

namespace causeway {

RateLimiter::RateLimiter(double rate, double burst,
                         std::function<absl::Time()> now)
    : rate_(rate), burst_(burst), now_(std::move(now)) {
  CW_CHECK(rate > 0 && burst >= 1) << "rate " << rate << ", burst " << burst;
  tokens_ = burst_;
  last_ = now_();
}

bool RateLimiter::TryAcquire() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  if (now > last_) {
    tokens_ = std::min(
        burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_);
    last_ = now;
  }
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

}  // namespace causeway
