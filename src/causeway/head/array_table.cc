#include "causeway/head/array_table.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::head {

ArrayHandle ArrayTable::NewInternalHandle() {
  absl::MutexLock lock(&mu_);
  return ArrayHandle(next_internal_++);
}

absl::Status ArrayTable::CheckNewHandles(
    SessionId session, absl::Span<const transport::ArraySpec> specs) const {
  absl::MutexLock lock(&mu_);
  std::set<ArrayHandle> seen;
  for (const transport::ArraySpec& spec : specs) {
    if (arrays_.contains({session, spec.handle}) ||
        !seen.insert(spec.handle).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "array handle ", spec.handle.value(),
          " is already in use in this session (mint a fresh handle for "
          "every result)"));
    }
  }
  auto count = counts_.find(session);
  const int64_t held = count == counts_.end() ? 0 : count->second;
  if (held + static_cast<int64_t>(specs.size()) >
      options_.max_arrays_per_session) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the session holds ", held, " arrays and may hold at most ",
        options_.max_arrays_per_session,
        " (head flag --max-arrays-per-session); delete arrays it no longer "
        "needs"));
  }
  return absl::OkStatus();
}

void ArrayTable::InsertLocked(std::shared_ptr<const ArrayRecord> record) {
  const Key key(record->session, record->handle);
  CW_CHECK(arrays_.emplace(key, std::move(record)).second)
      << "array handle " << key.second << " added twice";
  ++counts_[key.first];
}

void ArrayTable::Add(std::shared_ptr<const ArrayRecord> record) {
  absl::MutexLock lock(&mu_);
  InsertLocked(std::move(record));
}

void ArrayTable::AddErrors(SessionId session,
                           absl::Span<const transport::ArraySpec> specs,
                           const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  for (const transport::ArraySpec& spec : specs) {
    if (arrays_.contains({session, spec.handle})) continue;  // Never clobber.
    auto record = std::make_shared<ArrayRecord>();
    record->session = session;
    record->handle = spec.handle;
    record->slice = spec.slice;
    record->placement = ArrayPlacement{spec.global_shape, spec.sharding, {}};
    record->error = error;
    InsertLocked(std::move(record));
  }
}

std::shared_ptr<const ArrayRecord> ArrayTable::Fail(SessionId session,
                                                    ArrayHandle handle,
                                                    const absl::Status& error) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find({session, handle});
  if (it == arrays_.end()) return nullptr;
  auto failed = std::make_shared<ArrayRecord>(*it->second);
  failed->error = error;
  failed->buffers = nullptr;
  std::shared_ptr<const ArrayRecord> old = std::move(it->second);
  it->second = std::move(failed);
  return old;
}

absl::StatusOr<std::shared_ptr<const ArrayRecord>> ArrayTable::Find(
    SessionId session, ArrayHandle handle,
    absl::FunctionRef<std::string()> context) const {
  std::shared_ptr<const ArrayRecord> record;
  {
    absl::MutexLock lock(&mu_);
    auto it = arrays_.find({session, handle});
    if (it != arrays_.end()) record = it->second;
  }
  if (record == nullptr) {
    const std::string prefix = context();
    return absl::NotFoundError(absl::StrCat(
        prefix, prefix.empty() ? "" : ": ", "unknown array handle ",
        handle.value(), " (never created in this session, or deleted)"));
  }
  if (!record->error.ok()) return record->error;
  return record;
}

std::shared_ptr<const ArrayRecord> ArrayTable::Remove(SessionId session,
                                                      ArrayHandle handle) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find({session, handle});
  if (it == arrays_.end()) return nullptr;
  std::shared_ptr<const ArrayRecord> record = std::move(it->second);
  arrays_.erase(it);
  if (--counts_[session] == 0) counts_.erase(session);
  return record;
}

std::vector<std::shared_ptr<const ArrayRecord>> ArrayTable::RemoveSession(
    SessionId session) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ArrayRecord>> removed;
  auto first = arrays_.lower_bound({session, ArrayHandle(0)});
  auto last = first;
  while (last != arrays_.end() && last->first.first == session) {
    removed.push_back(std::move(last->second));
    ++last;
  }
  arrays_.erase(first, last);
  counts_.erase(session);
  return removed;
}

std::vector<std::shared_ptr<const ArrayRecord>> ArrayTable::FailArraysOnHost(
    HostId host, const transport::Topology& topology,
    const absl::Status& lost) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ArrayRecord>> failed;
  for (auto& [key, record] : arrays_) {
    if (!record->error.ok() || record->buffers == nullptr) continue;
    const std::vector<DeviceId>& devices = record->placement.devices;
    int64_t shard = -1;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (topology.HostOf(devices[i]) == host) {
        shard = static_cast<int64_t>(i);
        break;
      }
    }
    if (shard < 0) continue;
    auto replacement = std::make_shared<ArrayRecord>(*record);
    replacement->error = absl::DataLossError(absl::StrCat(
        "array ", key.second.value(), " lost shard ", shard, " on device ",
        devices[shard].value(), ": ", lost.message()));
    replacement->buffers = nullptr;
    failed.push_back(std::move(record));
    record = std::move(replacement);
  }
  return failed;
}

int64_t ArrayTable::Count(SessionId session) const {
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(session);
  return it == counts_.end() ? 0 : it->second;
}

int64_t ArrayTable::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(arrays_.size());
}

}  // namespace causeway::head
