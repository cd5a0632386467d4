// The object store of one device: its buffers, their reference counts and its
// memory budget. See docs/object_store.md.
//
// A buffer is one shard of an array on this device, named by a BufferId. Its
// memory is reserved when the op that produces it is enqueued (output shapes
// are static), long before its data exists, so consumers (here or on another
// host) can be enqueued against it at once. A buffer moves through
//
//   waiting --(memory granted)--> reserved --(data)--> ready
//   waiting or reserved --(error)--> error;  ready --(FailAll)--> error
//
// * waiting: asked for memory that is not free yet. Reservations are granted
//   strictly in FIFO order, so a large one is never starved by small ones and
//   queued ops keep their order (back-pressure).
// * reserved: memory is counted against the budget; the data has not come.
// * ready: holds an hlo::Literal (immutable from now on).
// * error: holds an absl::Status that every reader gets (the failing op's
//   error, DATA_LOSS for a lost device, ...). Errors hold no memory.
//
// Nothing waits forever: every future this store hands out is resolved when
// the data comes, when the buffer fails (Fail, FailAll, a rejected write), or
// when its last reference is released (kCancelled). A waiting reservation
// waits as long as the buffers ahead of it hold their memory; the owner of
// the op bounds that wait (Fail(id, DeadlineExceeded) on its deadline), and
// the end of a session releases all its buffers.
#ifndef CAUSEWAY_WORKER_OBJECT_STORE_H_
#define CAUSEWAY_WORKER_OBJECT_STORE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"
#include "causeway/transport/control_channel.h"

namespace causeway::worker {

// Copies the array `piece` into `dest` (same element type and rank) so that
// piece element i lands at dest element offsets + i, row-major, any rank and
// element type. InvalidArgument, naming the shapes, if the types or ranks
// differ or the piece does not fit inside `dest` at `offsets`; `dest` is
// unchanged then. Copies `dest`'s storage first if it is shared.
absl::Status CopyPieceInto(const hlo::Literal& piece,
                           absl::Span<const int64_t> offsets,
                           hlo::Literal* dest);

// The buffers of one device and its memory budget. Thread-safe: every method
// may be called from any thread. No future is resolved and no callback runs
// while the store's lock is held; futures are resolved on the thread whose
// call settled them (e.g. the thread that called Release resolves the
// reservations that its freed memory granted, in FIFO order).
//
// References: Reserve and Put create an entry holding one reference, owned
// by the caller (also when their future fails, except with kAlreadyExists,
// which leaves the existing entry untouched). AddRef adds one; Release drops
// one, and the last Release removes the entry and returns its bytes to the
// budget at once. Readers get hlo::Literal copies, which share storage with
// the stored value, so the bytes themselves live until the last copy dies;
// the budget counts what the store holds, not what readers still read.
class ObjectStore {
 public:
  // `budget_bytes` >= 0 (CHECK).
  ObjectStore(DeviceId device, int64_t budget_bytes);
  ~ObjectStore();

  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  DeviceId device() const { return device_; }
  int64_t budget_bytes() const { return budget_bytes_; }

  // Creates buffer `id` of array shape `shape` and asks for its bytes. The
  // future resolves OK once they are granted (at once if nothing waits ahead
  // and they fit; otherwise when released memory reaches this reservation in
  // FIFO order). It fails at once, with the buffer in error, with
  // ResourceExhausted ("buffer array 1 shard 0 needs N bytes but device D has
  // a budget of M bytes") if it can never fit, InvalidArgument for a non-array
  // shape, or the FailAll status after FailAll. kAlreadyExists if `id` exists.
  // A waiting reservation is cancelled by Fail(id, status) (the future gets
  // `status`) or by releasing its last reference (kCancelled): the owner of
  // the op does so when the op is abandoned or its wait times out.
  Future<> Reserve(BufferId id, const hlo::Shape& shape);

  // Reserve(id, value.shape()) and, once granted, Fulfill(id, value); for data
  // that comes from the host. The future resolves when the buffer is ready.
  Future<> Put(BufferId id, hlo::Literal value);

  // Sets the data of a waiting or reserved buffer; `value` must have its shape
  // (layouts ignored), else InvalidArgument. Data for a waiting buffer is held
  // and becomes the buffer's value when its reservation is granted. Errors:
  // NotFound (unknown id), FailedPrecondition (already ready or failed, or it
  // expects pieces). A rejected write to a buffer that still awaits data also
  // fails the buffer with the same error, so its readers never hang.
  absl::Status Fulfill(BufferId id, hlo::Literal value);

  // Declares that the data of a waiting or reserved buffer arrives as
  // `num_pieces` >= 1 pieces (a transfer or reshard with several sources).
  // Must come before the first WritePiece.
  absl::Status ExpectPieces(BufferId id, int64_t num_pieces);

  // Copies `piece` into the buffer at `offsets` (one per dimension, see
  // CopyPieceInto). The buffer becomes ready when its last expected piece has
  // arrived; the pieces must cover it exactly once (checked by element
  // count). Pieces for a waiting buffer are held and copied in on grant. An
  // error in place of a piece is reported with Fail(id, status). Errors as
  // for Fulfill; a rejected piece fails the buffer.
  absl::Status WritePiece(BufferId id, absl::Span<const int64_t> offsets,
                          hlo::Literal piece);

  // Writing one piece in place: a network data plane reads its bytes
  // straight into the buffer's memory. BeginWrite checks the piece as
  // Fulfill (a piece covering the whole buffer, for a buffer that expects
  // no pieces) or WritePiece would, and returns the first byte of the
  // buffer's memory (row-major, its reserved shape); EndWrite(id, OK) then
  // counts the piece as written (the buffer may become ready), an error
  // fails the buffer. Between the two the memory stays valid, whatever
  // happens to the buffer, and the entry stays (BeginWrite holds a
  // reference, EndWrite drops it). Pieces need the buffer's memory granted
  // (Unavailable while it waits: write them with WritePiece); a whole value
  // may be written while it waits. Other errors as for Fulfill and
  // WritePiece, and a rejected piece fails the buffer.
  absl::StatusOr<std::byte*> BeginWrite(BufferId id,
                                        absl::Span<const int64_t> offsets,
                                        const hlo::Shape& piece);
  void EndWrite(BufferId id, absl::Status written);

  // Puts a waiting or reserved buffer in error with `error` (not OK, CHECK):
  // its readers (and a waiting reservation's future) get `error`, and its
  // memory is freed at once. OK if the buffer had already failed (the first
  // error stays). NotFound, or FailedPrecondition if the buffer is ready.
  absl::Status Fail(BufferId id, absl::Status error);

  // The buffer's value: resolves when it is ready, or with its error.
  // NotFound naming the buffer and device if `id` is unknown; kCancelled if
  // the last reference is released before the data came.
  Future<hlo::Literal> Get(BufferId id) const;

  // Reference counting (see the class comment). NotFound for an unknown id.
  absl::Status AddRef(BufferId id);
  absl::Status Release(BufferId id);

  // The device is lost: every buffer, ready ones included, goes into error
  // with `error` (callers pass DATA_LOSS; not OK, CHECK), waiting
  // reservations fail with it, all memory is freed, and every later Reserve
  // or Put fails with it. Buffers already in error keep their first error.
  // Entries stay until released, so readers see the error.
  void FailAll(absl::Status error);

  transport::ObjectStoreStats Stats() const;

  // For the status view: the accounting, then one line per buffer (sorted by
  // id) with its state, shape, bytes and references, and its error if any.
  std::string DebugString() const;

 private:
  struct Entry;
  struct Resolutions;

  // Reserve, holding `value` (Put) to make the buffer ready on grant.
  Future<> ReserveWithValue(BufferId id, const hlo::Shape& shape,
                            std::optional<hlo::Literal> value);
  Entry* FindLocked(BufferId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NotFoundError(BufferId id) const;
  absl::Status AcceptValueLocked(BufferId id, Entry& entry, hlo::Literal value,
                                 Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AcceptPieceLocked(BufferId id, Entry& entry,
                                 absl::Span<const int64_t> offsets,
                                 hlo::Literal piece, Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checks WritePiece and BeginWrite share; counts the piece as
  // received.
  absl::Status CheckPieceLocked(BufferId id, Entry& entry,
                                absl::Span<const int64_t> offsets,
                                const hlo::Shape& piece, Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The memory pieces are assembled in, made on first use.
  std::byte* AssemblyLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CopyIntoAssemblyLocked(Entry& entry, const hlo::Literal& piece,
                              absl::Span<const int64_t> offsets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops one reference; the last removes the entry.
  void ReleaseLocked(BufferId id, Entry& entry, Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompletePiecesLocked(BufferId id, Entry& entry, Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MakeReadyLocked(Entry& entry, hlo::Literal value, Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailEntryLocked(BufferId id, Entry& entry, absl::Status error,
                       Resolutions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RejectLocked(BufferId id, Entry& entry, absl::Status error,
                            Resolutions& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFromWaitQueueLocked(BufferId id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GrantWaitingLocked(Resolutions& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  transport::ObjectStoreStats StatsLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DeviceId device_;
  const int64_t budget_bytes_;

  mutable absl::Mutex mu_;
  std::map<BufferId, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::deque<BufferId> wait_queue_ ABSL_GUARDED_BY(mu_);  // FIFO.
  int64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);  // Set by FailAll.
};

}  // namespace causeway::worker

#endif  // CAUSEWAY_WORKER_OBJECT_STORE_H_
