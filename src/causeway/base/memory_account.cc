#include "causeway/base/memory_account.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway {
namespace {

thread_local std::shared_ptr<MemoryAccount> current_account;
thread_local bool charges_may_throw = true;

}  // namespace

MemoryLimitExceeded::MemoryLimitExceeded(int64_t requested_bytes,
                                         int64_t live_bytes,
                                         int64_t limit_bytes)
    : requested_bytes_(requested_bytes),
      live_bytes_(live_bytes),
      limit_bytes_(limit_bytes),
      message_(absl::StrCat("a buffer of ", requested_bytes,
                            " bytes would exceed the memory limit of ",
                            limit_bytes, " bytes (", live_bytes,
                            " bytes held)")) {}

MemoryAccount::MemoryAccount(int64_t limit_bytes)
    : limit_bytes_(limit_bytes > 0 ? limit_bytes : PhysicalMemoryBytes()) {}

int64_t MemoryAccount::available_bytes() const {
  return std::max<int64_t>(0, limit_bytes_ - live_bytes());
}

void MemoryAccount::Charge(int64_t bytes, bool may_throw) {
  int64_t live = live_.load(std::memory_order_relaxed);
  while (true) {
    const bool fits = bytes <= limit_bytes_ && live <= limit_bytes_ - bytes;
    if (!fits && may_throw) {
      throw MemoryLimitExceeded(bytes, live, limit_bytes_);
    }
    if (live_.compare_exchange_weak(live, live + bytes,
                                    std::memory_order_relaxed)) {
      break;
    }
  }
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (live + bytes > peak &&
         !peak_.compare_exchange_weak(peak, live + bytes,
                                      std::memory_order_relaxed)) {
  }
}

void MemoryAccount::Credit(int64_t bytes) {
  live_.fetch_sub(bytes, std::memory_order_relaxed);
}

ScopedMemoryAccount::ScopedMemoryAccount(std::shared_ptr<MemoryAccount> account)
    : previous_(std::exchange(current_account, std::move(account))) {}

ScopedMemoryAccount::~ScopedMemoryAccount() {
  current_account = std::move(previous_);
}

const std::shared_ptr<MemoryAccount>& ScopedMemoryAccount::Current() {
  return current_account;
}

ScopedNonThrowingCharges::ScopedNonThrowingCharges()
    : previous_(std::exchange(charges_may_throw, false)) {}

ScopedNonThrowingCharges::~ScopedNonThrowingCharges() {
  charges_may_throw = previous_;
}

MemoryCharge::MemoryCharge(int64_t bytes) {
  if (current_account == nullptr || bytes <= 0) return;
  current_account->Charge(bytes, charges_may_throw);
  account_ = current_account;
  bytes_ = bytes;
}

MemoryCharge::~MemoryCharge() {
  if (account_ != nullptr) account_->Credit(bytes_);
}

MemoryCharge::MemoryCharge(MemoryCharge&& other) noexcept
    : account_(std::move(other.account_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept {
  if (this != &other) {
    if (account_ != nullptr) account_->Credit(bytes_);
    account_ = std::move(other.account_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

int64_t PhysicalMemoryBytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return int64_t{1} << 40;
    return static_cast<int64_t>(pages) * page_size;
  }();
  return bytes;
}

}  // namespace causeway
