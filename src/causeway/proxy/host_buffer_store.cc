#include "causeway/proxy/host_buffer_store.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::proxy {

HostBuffer::HostBuffer(int64_t size)
    : value_(hlo::Literal::Uninitialized(
          hlo::Shape(hlo::PrimitiveType::kU8, {size}))) {}

HostBuffer HostBuffer::Copy(std::string_view bytes) {
  HostBuffer buffer(static_cast<int64_t>(bytes.size()));
  if (!bytes.empty()) std::memcpy(buffer.data(), bytes.data(), bytes.size());
  return buffer;
}

std::string_view HostBuffer::bytes() const {
  return std::string_view(static_cast<const char*>(value_.untyped_data()),
                          static_cast<size_t>(value_.size_bytes()));
}

absl::Status HostBufferStore::CheckSize(int64_t bytes) const {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a host buffer of ", bytes, " bytes"));
  }
  if (bytes > limits_.max_buffer_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a host buffer of ", bytes, " bytes is larger than the proxy's limit of ",
        limits_.max_buffer_bytes, " bytes"));
  }
  absl::MutexLock lock(&mu_);
  if (total_bytes_ + bytes > limits_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a host buffer of ", bytes, " bytes would take this session's host "
        "buffers past the proxy's limit of ", limits_.max_total_bytes,
        " bytes (", total_bytes_, " held)"));
  }
  return absl::OkStatus();
}

absl::Status HostBufferStore::Store(uint64_t handle, HostBuffer data) {
  const int64_t bytes = data.size();
  if (absl::Status s = CheckSize(bytes); !s.ok()) return s;
  std::vector<Promise<HostBuffer>> waiters;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("the session has ended");
    if (total_bytes_ + bytes > limits_.max_total_bytes) {
      return absl::ResourceExhaustedError(
          "this session's host buffers are at the proxy's limit");
    }
    Entry& entry = entries_[handle];
    if (entry.data.has_value()) {
      return absl::AlreadyExistsError(
          absl::StrCat("host buffer ", handle, " is stored already"));
    }
    entry.data = data;
    total_bytes_ += bytes;
    waiters = std::move(entry.waiters);
    num_waiters_ -= static_cast<int64_t>(waiters.size());
  }
  for (Promise<HostBuffer>& waiter : waiters) waiter.Set(data);
  return absl::OkStatus();
}

Future<HostBuffer> HostBufferStore::Lookup(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return MakeReadyFuture<HostBuffer>(
        absl::CancelledError("the session has ended"));
  }
  Entry& entry = entries_[handle];
  if (entry.data.has_value()) return MakeReadyFuture<HostBuffer>(*entry.data);
  if (!entry.failure.ok()) {
    absl::Status failure = std::move(entry.failure);
    entries_.erase(handle);
    return MakeReadyFuture<HostBuffer>(std::move(failure));
  }
  if (num_waiters_ >= limits_.max_waiters) {
    if (entry.waiters.empty()) entries_.erase(handle);
    return MakeReadyFuture<HostBuffer>(absl::ResourceExhaustedError(absl::StrCat(
        "more than ", limits_.max_waiters, " requests wait for host buffers")));
  }
  auto [promise, future] = MakePromise<HostBuffer>();
  entry.waiters.push_back(std::move(promise));
  ++num_waiters_;
  return future;
}

void HostBufferStore::Fail(uint64_t handle, absl::Status status) {
  CW_CHECK(!status.ok());
  std::vector<Promise<HostBuffer>> waiters;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    Entry& entry = entries_[handle];
    if (entry.data.has_value()) return;
    if (entry.waiters.empty()) {
      entry.failure = status;
    } else {
      waiters = std::move(entry.waiters);
      num_waiters_ -= static_cast<int64_t>(waiters.size());
      entries_.erase(handle);
    }
  }
  for (Promise<HostBuffer>& waiter : waiters) waiter.Set(status);
}

absl::Status HostBufferStore::CheckUnused(uint64_t handle) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(handle);
  if (it != entries_.end() &&
      (it->second.data.has_value() || !it->second.failure.ok())) {
    return absl::AlreadyExistsError(
        absl::StrCat("host buffer ", handle, " is in use already"));
  }
  return absl::OkStatus();
}

absl::Status HostBufferStore::Delete(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end() ||
      (!it->second.data.has_value() && it->second.failure.ok())) {
    return absl::NotFoundError(absl::StrCat("host buffer ", handle, " is not stored"));
  }
  if (it->second.data.has_value()) total_bytes_ -= it->second.data->size();
  entries_.erase(it);
  return absl::OkStatus();
}

void HostBufferStore::Close() {
  std::map<uint64_t, Entry> entries;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    entries = std::move(entries_);
    entries_.clear();
    total_bytes_ = 0;
    num_waiters_ = 0;
  }
  for (auto& [handle, entry] : entries) {
    for (Promise<HostBuffer>& waiter : entry.waiters) {
      waiter.Set(absl::CancelledError("the session has ended"));
    }
  }
}

int64_t HostBufferStore::total_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_bytes_;
}

}  // namespace causeway::proxy
