// The head's table of every session's arrays.
//
// The client mints array handles; the table maps each (session, handle) to
// a record with an internal handle, unique across sessions, that names the
// array's buffers on the workers (BufferId{internal, shard}). Two sessions
// may therefore use the same handle numbers, and a session can only ever
// name its own arrays: another session's handle is NotFound.
//
// An error array (its op could not even be dispatched: unknown handle,
// wrong shape, ...) has a record with the error and no buffers; every op
// that uses it yields error arrays too. An array that lost a shard (its
// host died) becomes such an error array, DATA_LOSS.
//
// Records are immutable: a change replaces the record, so a reader holding
// one sees a consistent array. Thread-safe.
#ifndef CAUSEWAY_HEAD_ARRAY_TABLE_H_
#define CAUSEWAY_HEAD_ARRAY_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"
#include "causeway/head/transfer_plan.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Where an array's buffers are on their way to the workers (dispatcher.h).
struct ArrayBuffers;

struct ArrayRecord {
  SessionId session;
  ArrayHandle handle;    // The client's.
  ArrayHandle internal;  // Names its buffers on the workers.
  SliceHandle slice;
  ArrayPlacement placement;
  absl::Status error;    // Not OK: an error array, without buffers.
  // "output 0 of 'f'", for the status view; launches that read the array
  // share it (LaunchInput::producer).
  std::shared_ptr<const std::string> producer;
  std::shared_ptr<ArrayBuffers> buffers;  // Null for error arrays.
};

class ArrayTable {
 public:
  struct Options {
    // Arrays one session may hold at once; more are refused.
    int64_t max_arrays_per_session = int64_t{1} << 20;
  };

  ArrayTable() : ArrayTable(Options()) {}
  explicit ArrayTable(Options options) : options_(options) {}
  ArrayTable(const ArrayTable&) = delete;
  ArrayTable& operator=(const ArrayTable&) = delete;

  // A fresh internal handle (for an array's or a staging copy's buffers).
  ArrayHandle NewInternalHandle() ABSL_LOCKS_EXCLUDED(mu_);

  // OK if every handle of `specs` is distinct and new in the session;
  // AlreadyExists naming the first that is not; ResourceExhausted if they
  // would take the session past its limit.
  absl::Status CheckNewHandles(
      SessionId session, absl::Span<const transport::ArraySpec> specs) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Adds a record for a handle that is new in its session (CHECK).
  void Add(std::shared_ptr<const ArrayRecord> record) ABSL_LOCKS_EXCLUDED(mu_);
  // Error arrays for `specs`, failing with `error`; handles already in use
  // keep their arrays (an error never clobbers an array).
  void AddErrors(SessionId session,
                 absl::Span<const transport::ArraySpec> specs,
                 const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces an existing array by an error array failing with `error` (the
  // launch that was to fill it was refused). Returns the old record, or
  // null if the handle is not there.
  std::shared_ptr<const ArrayRecord> Fail(SessionId session, ArrayHandle handle,
                                          const absl::Status& error)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The array, if it holds data or will: NotFound ("<context>: unknown
  // array handle N (...)"; no prefix when `context` is empty) if the
  // session never created it or deleted it, and the array's own error,
  // unchanged, if it failed.
  absl::StatusOr<std::shared_ptr<const ArrayRecord>> Find(
      SessionId session, ArrayHandle handle,
      absl::FunctionRef<std::string()> context) const ABSL_LOCKS_EXCLUDED(mu_);

  // Removes the array; returns its record (null if unknown) so that the
  // caller can release its buffers.
  std::shared_ptr<const ArrayRecord> Remove(SessionId session,
                                            ArrayHandle handle)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes every array of the session.
  std::vector<std::shared_ptr<const ArrayRecord>> RemoveSession(
      SessionId session) ABSL_LOCKS_EXCLUDED(mu_);

  // Every array with a shard on a device of `host` becomes DATA_LOSS
  // ("array 7 lost shard 0 on device 0: <lost's message>"). Returns the
  // records as they were, whose buffers on other hosts the caller releases.
  std::vector<std::shared_ptr<const ArrayRecord>> FailArraysOnHost(
      HostId host, const transport::Topology& topology,
      const absl::Status& lost) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t Count(SessionId session) const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<SessionId, ArrayHandle>;

  void InsertLocked(std::shared_ptr<const ArrayRecord> record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<Key, std::shared_ptr<const ArrayRecord>> arrays_
      ABSL_GUARDED_BY(mu_);
  std::map<SessionId, int64_t> counts_ ABSL_GUARDED_BY(mu_);
  uint64_t next_internal_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_ARRAY_TABLE_H_
