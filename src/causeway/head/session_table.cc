#include "causeway/head/session_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway::head {
namespace {

// Sessions whose end is remembered for the error later calls get.
constexpr size_t kEndedSessionsRemembered = 1024;

}  // namespace

absl::StatusOr<SessionTable::Opened> SessionTable::Open(const std::string& name,
                                                        double weight,
                                                        int priority,
                                                        bool leased) {
  if (name.size() > limits_.max_name_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("session name is ", name.size(), " bytes long; at most ",
                     limits_.max_name_length));
  }
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("the head is shutting down");
  if (static_cast<int64_t>(sessions_.size()) >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the head has ", sessions_.size(),
                     " sessions open, as many as it allows (head flag "
                     "--max-sessions)"));
  }
  const SessionId id(next_session_++);
  auto session = std::make_unique<Session>(
      id, name.empty() ? absl::StrCat("session ", id.value()) : name, weight,
      priority, leased, limits_.per_session);
  Opened opened{id, session->name()};
  sessions_.emplace(id, std::move(session));
  return opened;
}

void SessionTable::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

absl::StatusOr<std::string> SessionTable::End(SessionId session_id,
                                              const absl::Status& status,
                                              const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return NotOpenLocked(session_id);
  Session& session = *it->second;
  session.CancelDeferred(status);
  for (const auto& [handle, slice] : session.slices()) {
    slices_by_id_.erase(slice->id);
  }
  std::string name = session.name();
  sessions_.erase(it);
  ended_.emplace(session_id, why);
  ended_order_.push_back(session_id);
  if (ended_order_.size() > kEndedSessionsRemembered) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  return name;
}

absl::Status SessionTable::AwaitEnded(SessionId session, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ended = [this, session]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !sessions_.contains(session);
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&ended), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("session ", session.value(), " is still open"));
  }
  return absl::OkStatus();
}

absl::Status SessionTable::WithSession(SessionId session,
                                       absl::FunctionRef<void(Session&)> work) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return NotOpenLocked(session);
  work(*it->second);
  return absl::OkStatus();
}

bool SessionTable::WithSliceOwner(
    SliceId slice, absl::FunctionRef<void(Session&, SliceRecord&)> work) {
  absl::MutexLock lock(&mu_);
  auto by_id = slices_by_id_.find(slice);
  if (by_id == slices_by_id_.end()) return false;
  auto session = sessions_.find(by_id->second.first);
  if (session == sessions_.end()) return false;
  SliceRecord* record = session->second->FindSlice(by_id->second.second);
  if (record == nullptr) return false;
  work(*session->second, *record);
  return true;
}

bool SessionTable::SliceQueued(SessionId session_id, SliceHandle handle,
                               SliceId id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return false;
  it->second->SliceQueued(handle, id);
  slices_by_id_[id] = {session_id, handle};
  return true;
}

void SessionTable::ForgetSlice(SliceId slice) {
  absl::MutexLock lock(&mu_);
  slices_by_id_.erase(slice);
}

void SessionTable::Exclusive(absl::FunctionRef<void()> work) {
  absl::MutexLock lock(&mu_);
  work();
}

void SessionTable::ForEach(
    absl::FunctionRef<void(const Session&)> visit) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, session] : sessions_) visit(*session);
}

std::vector<SessionId> SessionTable::Ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionId> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, session] : sessions_) ids.push_back(id);
  return ids;
}

absl::Status SessionTable::NotOpen(SessionId session) const {
  absl::MutexLock lock(&mu_);
  return NotOpenLocked(session);
}

absl::Status SessionTable::NotOpenLocked(SessionId session) const {
  auto ended = ended_.find(session);
  if (ended != ended_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", session.value(), " is not open: ", ended->second,
        " (its handles are gone)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "session ", session.value(),
      " is not open (call OpenSession first; a closed session's handles are "
      "gone)"));
}

}  // namespace causeway::head
