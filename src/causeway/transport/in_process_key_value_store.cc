#include "causeway/transport/in_process_key_value_store.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace causeway::transport {
namespace {

absl::Status CheckKey(absl::string_view key, absl::string_view what) {
  if (key.empty() && what == "key") {
    return absl::InvalidArgumentError("key-value store: empty key");
  }
  if (static_cast<int64_t>(key.size()) > KeyValueStore::kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key-value store: a ", what, " of ", key.size(),
                     " bytes is longer than the limit of ",
                     KeyValueStore::kMaxKeyBytes));
  }
  return absl::OkStatus();
}

}  // namespace

InProcessKeyValueStore::InProcessKeyValueStore()
    : timer_([this] { TimerLoop(); }) {}

InProcessKeyValueStore::~InProcessKeyValueStore() {
  std::map<uint64_t, Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    waiters = std::move(waiters_);
    waiters_by_key_.clear();
    waiters_by_deadline_.clear();
    timer_cv_.Signal();
  }
  timer_.join();
  for (auto& [id, waiter] : waiters) {
    waiter.promise.Set(absl::CancelledError(absl::StrCat(
        "key-value store shut down while waiting for '", waiter.key, "'")));
  }
}

Future<> InProcessKeyValueStore::Set(std::string key, std::string value) {
  if (absl::Status status = CheckKey(key, "key"); !status.ok()) {
    return MakeErrorFuture(std::move(status));
  }
  if (static_cast<int64_t>(value.size()) > kMaxValueBytes) {
    return MakeErrorFuture(absl::InvalidArgumentError(absl::StrCat(
        "key-value store: the value of '", key, "' has ", value.size(),
        " bytes, more than the limit of ", kMaxValueBytes)));
  }
  std::vector<Promise<std::string>> woken;
  {
    absl::MutexLock lock(&mu_);
    auto [begin, end] = waiters_by_key_.equal_range(key);
    for (auto it = begin; it != end; ++it) {
      auto waiter = waiters_.find(it->second);
      waiters_by_deadline_.erase({waiter->second.deadline, it->second});
      woken.push_back(std::move(waiter->second.promise));
      waiters_.erase(waiter);
    }
    waiters_by_key_.erase(begin, end);
    values_[std::move(key)] = value;
  }
  for (Promise<std::string>& promise : woken) promise.Set(value);
  return MakeReadyFuture();
}

Future<std::string> InProcessKeyValueStore::Get(std::string key,
                                                absl::Time deadline) {
  if (absl::Status status = CheckKey(key, "key"); !status.ok()) {
    return MakeErrorFuture<std::string>(std::move(status));
  }
  absl::MutexLock lock(&mu_);
  if (auto it = values_.find(key); it != values_.end()) {
    return MakeReadyFuture<std::string>(std::string(it->second));
  }
  if (deadline <= absl::Now() || stopping_) {
    return MakeErrorFuture<std::string>(absl::DeadlineExceededError(
        absl::StrCat("key-value store: '", key, "' is not set")));
  }
  auto [promise, future] = MakePromise<std::string>();
  const uint64_t id = next_waiter_++;
  waiters_by_key_.emplace(key, id);
  const bool earliest = waiters_by_deadline_.empty() ||
                        deadline < waiters_by_deadline_.begin()->first;
  waiters_by_deadline_.emplace(deadline, id);
  waiters_.emplace(id, Waiter{std::move(key), deadline, std::move(promise)});
  if (earliest) timer_cv_.Signal();
  return std::move(future);
}

Future<> InProcessKeyValueStore::DeletePrefix(std::string prefix) {
  if (absl::Status status = CheckKey(prefix, "prefix"); !status.ok()) {
    return MakeErrorFuture(std::move(status));
  }
  absl::MutexLock lock(&mu_);
  auto it = values_.lower_bound(prefix);
  while (it != values_.end() && absl::StartsWith(it->first, prefix)) {
    it = values_.erase(it);
  }
  return MakeReadyFuture();
}

std::vector<std::string> InProcessKeyValueStore::Keys(
    absl::string_view prefix) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> keys;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && absl::StartsWith(it->first, prefix); ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

void InProcessKeyValueStore::TimerLoop() {
  while (true) {
    std::vector<Waiter> expired;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_) {
        const absl::Time next = waiters_by_deadline_.empty()
                                    ? absl::InfiniteFuture()
                                    : waiters_by_deadline_.begin()->first;
        if (next <= absl::Now()) break;
        timer_cv_.WaitWithDeadline(&mu_, next);
      }
      if (stopping_) return;
      const absl::Time now = absl::Now();
      while (!waiters_by_deadline_.empty() &&
             waiters_by_deadline_.begin()->first <= now) {
        const uint64_t id = waiters_by_deadline_.begin()->second;
        waiters_by_deadline_.erase(waiters_by_deadline_.begin());
        auto waiter = waiters_.find(id);
        auto [begin, end] = waiters_by_key_.equal_range(waiter->second.key);
        for (auto it = begin; it != end; ++it) {
          if (it->second == id) {
            waiters_by_key_.erase(it);
            break;
          }
        }
        expired.push_back(std::move(waiter->second));
        waiters_.erase(waiter);
      }
    }
    for (Waiter& waiter : expired) {
      waiter.promise.Set(absl::DeadlineExceededError(
          absl::StrCat("key-value store: '", waiter.key,
                       "' was not set within the deadline")));
    }
  }
}

}  // namespace causeway::transport
