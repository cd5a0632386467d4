// The head's open sessions (session.h), and why recently ended ones ended.
//
// The table's lock is the session service's: everything a session's work
// decides (its slices' state, its deferred work, the launches it plans) is
// decided under it, one session operation at a time, so a session's work
// keeps its order and a host's failure (Head::MarkHostDead) is serialized
// with planning. Lock order: this lock, then the parts' (array table,
// dispatcher); work run under it only posts, never calls a channel or
// resolves a promise inline.
//
// Thread-safe.
#ifndef CAUSEWAY_HEAD_SESSION_TABLE_H_
#define CAUSEWAY_HEAD_SESSION_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/head/session.h"

namespace causeway::head {

class SessionTable {
 public:
  struct Limits {
    int64_t max_sessions = 4096;
    size_t max_name_length = 256;
    Session::Limits per_session;
  };
  struct Opened {
    SessionId id;
    std::string name;
  };

  explicit SessionTable(Limits limits) : limits_(limits) {}

  SessionTable(const SessionTable&) = delete;
  SessionTable& operator=(const SessionTable&) = delete;

  // A new session named `name` ("session N" if empty). Unavailable once
  // the table is shut down; InvalidArgument for a name too long;
  // ResourceExhausted beyond the limit.
  absl::StatusOr<Opened> Open(const std::string& name, double weight,
                              int priority, bool leased)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Refuses new sessions from now on. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Removes the session: its deferred work hears `status` (under the
  // lock), later calls naming it are told `why` (NotOpen). Its name, or
  // NotOpen's error if it was not open.
  absl::StatusOr<std::string> End(SessionId session, const absl::Status& status,
                                  const std::string& why)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `session` is not open; DeadlineExceeded if still open at
  // `deadline`.
  absl::Status AwaitEnded(SessionId session, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `work` with the session under the table's lock (see the header
  // comment for what it may do), or returns NotOpen's error.
  absl::Status WithSession(SessionId session,
                           absl::FunctionRef<void(Session&)> work)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same for the session a slice id belongs to (the resource manager's
  // events); false, and `work` not called, if none.
  bool WithSliceOwner(SliceId slice,
                      absl::FunctionRef<void(Session&, SliceRecord&)> work)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The resource manager gave the session's slice `handle` the id `id`:
  // it is queued, and its events reach it through WithSliceOwner. False if
  // the session ended meanwhile.
  bool SliceQueued(SessionId session, SliceHandle handle, SliceId id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The slice is released: its events no longer reach a session.
  void ForgetSlice(SliceId slice) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `work` under the table's lock, between two sessions' operations.
  void Exclusive(absl::FunctionRef<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `visit` for every open session, in id order, under the lock.
  void ForEach(absl::FunctionRef<void(const Session&)> visit) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ids of every open session.
  std::vector<SessionId> Ids() const ABSL_LOCKS_EXCLUDED(mu_);

  // FailedPrecondition: the session is not open, and why if it ended
  // recently.
  absl::Status NotOpen(SessionId session) const ABSL_LOCKS_EXCLUDED(mu_);

  // The counter of transfer ids, unique across the head's sessions: only
  // for work run by WithSession (under the lock).
  uint64_t* transfer_ids() { return &next_transfer_id_; }

 private:
  absl::Status NotOpenLocked(SessionId session) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable absl::Mutex mu_;
  std::map<SessionId, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<SliceId, std::pair<SessionId, SliceHandle>> slices_by_id_
      ABSL_GUARDED_BY(mu_);
  // Why recently ended sessions ended, oldest first.
  std::map<SessionId, std::string> ended_ ABSL_GUARDED_BY(mu_);
  std::deque<SessionId> ended_order_ ABSL_GUARDED_BY(mu_);
  int64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_transfer_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_SESSION_TABLE_H_
