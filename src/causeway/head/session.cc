#include "causeway/head/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway::head {

transport::SliceInfo SliceRecord::Info() const {
  transport::SliceInfo info;
  info.handle = handle;
  info.island = island;
  info.devices = devices;
  info.mesh_shape = mesh_shape;
  info.generation = generation;
  return info;
}

const char* SliceStateName(SliceRecord::State state) {
  switch (state) {
    case SliceRecord::State::kRequesting:
      return "requesting";
    case SliceRecord::State::kQueued:
      return "queued";
    case SliceRecord::State::kGranted:
      return "granted";
    case SliceRecord::State::kBroken:
      return "broken";
    case SliceRecord::State::kReleased:
      return "released";
    case SliceRecord::State::kFailed:
      return "failed";
  }
  return "unknown";
}

Session::Session(SessionId id, std::string name, double weight, int priority,
                 bool leased, Limits limits)
    : id_(id),
      name_(std::move(name)),
      weight_(weight),
      priority_(priority),
      leased_(leased),
      limits_(limits) {}

// ---------------------------------------------------------------------------
// Slices.

absl::StatusOr<SliceRecord*> Session::AddSlice(
    const transport::SliceRequest& request) {
  if (slices_.contains(request.handle)) {
    return absl::AlreadyExistsError(
        absl::StrCat("slice handle ", request.handle.value(),
                     " is already used in this session"));
  }
  if (static_cast<int64_t>(slices_.size()) >= limits_.max_slices) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the session has ", slices_.size(),
                     " slices, as many as a session may have (head flag "
                     "--max-slices-per-session); release one first"));
  }
  auto record = std::make_shared<SliceRecord>();
  record->handle = request.handle;
  record->request = request;
  SliceRecord* added = record.get();
  slices_.emplace(request.handle, std::move(record));
  return added;
}

SliceRecord* Session::FindSlice(SliceHandle handle) {
  auto it = slices_.find(handle);
  return it == slices_.end() ? nullptr : it->second.get();
}

const SliceRecord* Session::FindSlice(SliceHandle handle) const {
  auto it = slices_.find(handle);
  return it == slices_.end() ? nullptr : it->second.get();
}

absl::StatusOr<SliceRecord*> Session::GetSlice(SliceHandle handle) {
  SliceRecord* slice = FindSlice(handle);
  if (slice == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown slice handle ", handle.value()));
  }
  return slice;
}

void Session::SliceQueued(SliceHandle handle, SliceId id) {
  SliceRecord* slice = FindSlice(handle);
  if (slice == nullptr) return;
  slice->id = id;
  if (slice->state == SliceRecord::State::kRequesting) {
    slice->state = SliceRecord::State::kQueued;
  }
}

bool Session::SliceOnDevices(SliceRecord& slice, IslandId island,
                             std::vector<DeviceId> devices,
                             std::vector<int64_t> mesh_shape,
                             uint64_t generation) {
  if (!slice.Waiting() && generation <= slice.generation) return false;
  slice.state = SliceRecord::State::kGranted;
  slice.island = island;
  slice.devices = std::move(devices);
  slice.mesh_shape = std::move(mesh_shape);
  slice.generation = generation;
  return true;
}

void Session::SliceBroken(SliceRecord& slice, uint64_t generation) {
  slice.state = SliceRecord::State::kBroken;
  slice.generation = std::max(slice.generation, generation);
}

void Session::SliceFailed(SliceHandle handle, absl::Status why) {
  SliceRecord* slice = FindSlice(handle);
  if (slice == nullptr) return;
  slice->state = SliceRecord::State::kFailed;
  slice->failure = std::move(why);
}

std::optional<SliceId> Session::SliceReleased(SliceHandle handle) {
  SliceRecord* slice = FindSlice(handle);
  if (slice == nullptr) return std::nullopt;
  slice->state = SliceRecord::State::kReleased;
  if (slice->id.value() < 0) return std::nullopt;
  return slice->id;
}

// ---------------------------------------------------------------------------
// Executables.

absl::Status Session::CheckNewExecutable(ExecutableHandle handle) const {
  if (executables_.contains(handle)) {
    return absl::AlreadyExistsError(
        absl::StrCat("executable handle ", handle.value(),
                     " is already used in this session"));
  }
  if (static_cast<int64_t>(executables_.size()) >= limits_.max_executables) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the session has ", executables_.size(),
                     " executables, as many as a session may have (head flag "
                     "--max-executables-per-session)"));
  }
  return absl::OkStatus();
}

absl::Status Session::AddExecutable(
    std::shared_ptr<ExecutableRecord> executable) {
  const ExecutableHandle handle = executable->handle;
  if (!executables_.emplace(handle, std::move(executable)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("executable handle ", handle.value(),
                     " is already used in this session"));
  }
  return absl::OkStatus();
}

const ExecutableRecord* Session::FindExecutable(ExecutableHandle handle) const {
  auto it = executables_.find(handle);
  return it == executables_.end() ? nullptr : it->second.get();
}

std::vector<const ExecutableRecord*> Session::ExecutablesOn(
    SliceHandle slice) const {
  std::vector<const ExecutableRecord*> on;
  for (const auto& [handle, executable] : executables_) {
    if (executable->slice == slice) on.push_back(executable.get());
  }
  return on;
}

// ---------------------------------------------------------------------------
// Deferred work.

bool Session::Blocked(const WaitsFor& waits_for) const {
  SliceHandle slice;
  if (const auto* handle = std::get_if<SliceHandle>(&waits_for)) {
    slice = *handle;
  } else if (const auto* executable =
                 std::get_if<ExecutableHandle>(&waits_for)) {
    const ExecutableRecord* record = FindExecutable(*executable);
    if (record == nullptr) return false;  // Fails when it runs.
    slice = record->slice;
  } else {
    return false;
  }
  const SliceRecord* record = FindSlice(slice);
  return record != nullptr && record->Waiting();
}

void Session::RunOrDefer(WaitsFor waits_for, Run run, Cancel cancel) {
  if (deferred_.empty() && !Blocked(waits_for)) {
    std::move(run)(*this);
    return;
  }
  deferred_.push_back(
      Deferred{std::move(waits_for), std::move(run), std::move(cancel)});
}

void Session::DrainDeferred() {
  while (!deferred_.empty() && !Blocked(deferred_.front().waits_for)) {
    Deferred op = std::move(deferred_.front());
    deferred_.pop_front();
    std::move(op.run)(*this);
  }
}

void Session::CancelDeferred(const absl::Status& status) {
  std::deque<Deferred> deferred;
  deferred.swap(deferred_);
  for (Deferred& op : deferred) std::move(op.cancel)(status);
}

}  // namespace causeway::head
