#include "causeway/transport/gloo_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace causeway::transport {

std::string EncodeStatus(const absl::Status& status) {
  return absl::StrCat(static_cast<int>(status.code()), ":", status.message());
}

absl::Status DecodeStatus(absl::string_view value) {
  const size_t colon = value.find(':');
  int code = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(value.substr(0, colon), &code) || code <= 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(
        absl::StrCat("not an encoded status: '", value.substr(0, 64), "'"));
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      value.substr(colon + 1));
}

GlooStore::GlooStore(KeyValueStore& store, std::string prefix,
                     absl::Time deadline)
    : store_(store),
      prefix_(std::move(prefix)),
      deadline_(deadline),
      waker_(std::make_shared<Waker>()) {}

GlooStore::~GlooStore() {
  absl::MutexLock lock(&waker_->mu);
  waker_->finished = true;  // No pokes at sockets that are not ours now.
}

void GlooStore::Waker::AbortLocked(absl::Status status) {
  if (!abort.ok() || finished) return;
  abort = std::move(status);
  cv.SignalAll();
}

void GlooStore::Abort(absl::Status status) {
  if (status.ok()) status = absl::CancelledError("rendezvous aborted");
  absl::MutexLock lock(&waker_->mu);
  waker_->AbortLocked(std::move(status));
}

void GlooStore::AbortWhenSet(std::string full_key) {
  store_.Get(std::move(full_key), deadline_)
      .OnReady(InlineExecutor::Instance(),
               [waker = waker_](const absl::StatusOr<std::string>& value) {
                 if (!value.ok()) return;  // Not set in time: no abort.
                 absl::Status status = DecodeStatus(*value);
                 if (status.ok()) return;
                 absl::MutexLock lock(&waker->mu);
                 waker->AbortLocked(std::move(status));
               });
}

absl::Status GlooStore::failure() const {
  absl::MutexLock lock(&failure_mu_);
  return failure_;
}

absl::Status GlooStore::aborted() const {
  absl::MutexLock lock(&waker_->mu);
  return waker_->abort;
}

std::string GlooStore::missing_key() const {
  absl::MutexLock lock(&failure_mu_);
  return missing_key_;
}

void GlooStore::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&failure_mu_);
    if (failure_.ok()) failure_ = status;
  }
  throw ::gloo::IoException(std::string(status.message()));
}

std::string GlooStore::AwaitValue(const Future<std::string>& future,
                                  const std::string& key,
                                  absl::Time deadline) {
  future.OnReady(InlineExecutor::Instance(),
                 [waker = waker_](const absl::StatusOr<std::string>&) {
                   absl::MutexLock lock(&waker->mu);
                   waker->cv.SignalAll();
                 });
  absl::Status abort;
  {
    absl::MutexLock lock(&waker_->mu);
    while (!future.IsReady() && waker_->abort.ok() && absl::Now() < deadline) {
      waker_->cv.WaitWithDeadline(&waker_->mu, deadline);
    }
    abort = waker_->abort;
  }
  if (!abort.ok()) Fail(std::move(abort));
  if (!future.IsReady() || absl::IsDeadlineExceeded(future.Await().status())) {
    {
      absl::MutexLock lock(&failure_mu_);
      if (missing_key_.empty()) missing_key_ = key;
    }
    Fail(absl::DeadlineExceededError(
        absl::StrCat("rendezvous key '", prefix_, key, "' was not set in time")));
  }
  const absl::StatusOr<std::string>& value = future.Await();
  if (!value.ok()) Fail(value.status());
  return *value;
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status abort;
  {
    absl::MutexLock lock(&waker_->mu);
    abort = waker_->abort;
  }
  if (!abort.ok()) Fail(std::move(abort));
  Future<> done =
      store_.Set(prefix_ + key, std::string(data.begin(), data.end()));
  // A Set carries no value: wait for its acknowledgement like a Get.
  Future<std::string> acknowledged =
      done.Map(InlineExecutor::Instance(), [] { return std::string(); });
  AwaitValue(acknowledged, key, deadline_);
}

std::vector<char> GlooStore::get(const std::string& key) {
  auto fetched = fetched_.find(key);
  if (fetched != fetched_.end()) {
    std::vector<char> value(fetched->second.begin(), fetched->second.end());
    fetched_.erase(fetched);
    return value;
  }
  const std::string value =
      AwaitValue(store_.Get(prefix_ + key, deadline_), key, deadline_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(
                 std::max<int64_t>(0, absl::ToInt64Milliseconds(
                                          deadline_ - absl::Now()))));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const absl::Time deadline =
      std::min(deadline_, absl::Now() + absl::Milliseconds(timeout.count()));
  // Issue every lookup at once, then collect them in order.
  std::vector<Future<std::string>> pending;
  pending.reserve(keys.size());
  for (const std::string& key : keys) {
    pending.push_back(store_.Get(prefix_ + key, deadline));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    fetched_[keys[i]] = AwaitValue(pending[i], keys[i], deadline);
  }
}

}  // namespace causeway::transport
