// The data plane: worker-to-worker movement of array data. A transfer moves
// one piece (a box) of a source shard into a destination buffer on another
// device, possibly on another host; the head only plans transfers, the bytes
// never pass through it. See docs/data_plane.md.
//
// The sending worker pushes the piece as soon as the source buffer is ready;
// the receiving worker writes it straight into the destination buffer, which
// its own control message reserved (and may not have seen yet: a receiver
// holds pieces that arrive before the buffer is announced). An error in
// place of the data (the source failed) fails the destination buffer, so an
// error flows to every consumer like data does.
//
// Delivery: a push resolves once the receiving worker has taken the piece,
// or with an error if it never will. The sender then reports the piece as
// undelivered (WorkerListener::OnPushFailed), and the head fails the
// destination through the destination's control channel: a consumer never
// waits forever for a piece that was lost. A receiver that loses its
// connection from a peer fails the receives waiting for that peer itself
// (PieceReceiver::ConnectionLost).
//
// Implementations: InProcessDataPlane (below: a direct call into the
// receiving worker) and TcpDataPlane (tcp_data_plane.h, on Asio).
#ifndef CAUSEWAY_TRANSPORT_DATA_PLANE_H_
#define CAUSEWAY_TRANSPORT_DATA_PLANE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::transport {

// One piece of a transfer, as it travels.
struct PieceMessage {
  uint64_t transfer_id = 0;
  DeviceId source_device;
  HostId source_host;
  DeviceId destination_device;
  BufferId destination;
  // Where the piece lands in the destination buffer (one per dimension).
  std::vector<int64_t> offsets;
  // The piece is the destination buffer's whole value (no other pieces).
  bool whole = false;
  // The bytes, or the error of the source. With `source_offsets` set, the
  // piece is the box `source_offsets`..`+dims` of `data` (the sender's
  // whole source shard, shared, not copied: a network data plane gathers
  // the box's runs from it); otherwise it is all of `data`.
  absl::StatusOr<hlo::Literal> data;
  std::vector<int64_t> source_offsets;
  std::vector<int64_t> dims;
  // The receiving network data plane's account of the memory the piece
  // holds (its bound on pieces that come before their receive): given
  // back when the piece is dropped. Null for pieces made in process.
  std::shared_ptr<const void> held;
};

// The shape of the piece `piece.data` holds (an array): its box of `data`,
// or `data`'s shape. InvalidArgument if the box does not fit in `data`.
absl::StatusOr<hlo::Shape> PieceShape(const PieceMessage& piece);

// The piece's bytes as a literal of their own: `data` itself (shared), or
// a copy of its box.
absl::StatusOr<hlo::Literal> TakePieceValue(PieceMessage piece);

// What a network data plane knows of a piece before its bytes arrive.
struct PieceHeader {
  uint64_t transfer_id = 0;
  DeviceId source_device;
  HostId source_host;
  DeviceId destination_device;
  BufferId destination;
  std::vector<int64_t> offsets;
  bool whole = false;
  hlo::Shape shape;  // The piece's array shape.
};

// The contiguous byte runs of a box inside a row-major array, in the box's
// own row-major order: the innermost dimensions that the box spans whole,
// plus one more, are contiguous in both. One definition for everything
// that moves boxes (the object store's piece copies, piece extraction, the
// network reading pieces in place).
class BoxRuns {
 public:
  // The box `offsets`..`offsets + dims` of an array of `array_dims` whose
  // elements are `element_bytes` wide. The box must fit (CHECK).
  BoxRuns(absl::Span<const int64_t> array_dims,
          absl::Span<const int64_t> offsets, absl::Span<const int64_t> dims,
          int64_t element_bytes);

  int64_t count() const { return count_; }  // 0 for an empty box.
  int64_t run_bytes() const { return run_bytes_; }
  int64_t total_bytes() const { return count_ * run_bytes_; }

  // Walks the runs in order: offset() is the byte offset of the current
  // run in the array.
  class Cursor {
   public:
    explicit Cursor(const BoxRuns& runs);
    bool done() const { return run_ >= runs_->count_; }
    int64_t offset() const { return offset_; }
    void Next();

   private:
    const BoxRuns* runs_;
    int64_t run_ = 0;
    int64_t offset_ = 0;
    std::vector<int64_t> index_;  // Over the outer dimensions.
  };

 private:
  int64_t count_ = 0;
  int64_t run_bytes_ = 0;
  int64_t first_ = 0;                   // Byte offset of the first run.
  std::vector<int64_t> outer_dims_;     // The box's outer dimensions.
  std::vector<int64_t> outer_strides_;  // Their strides in the array, bytes.
};

// Copies the box `source_offsets`..`+dims` of `source` into `destination`
// at `destination_offsets` (both row-major, elements `element_bytes` wide;
// both boxes must fit, CHECK).
void CopyBox(const std::byte* source, absl::Span<const int64_t> source_dims,
             absl::Span<const int64_t> source_offsets, std::byte* destination,
             absl::Span<const int64_t> destination_dims,
             absl::Span<const int64_t> destination_offsets,
             absl::Span<const int64_t> dims, int64_t element_bytes);

// One announced piece being written in place: the network reads its bytes
// straight into the destination buffer's memory (`base`, laid out as
// `runs`), then calls Finish. The memory stays valid until Finish, whatever
// happens to the buffer meanwhile. Not thread-safe; one writer per piece.
class PieceWriter {
 public:
  PieceWriter(std::byte* base, BoxRuns runs,
              absl::AnyInvocable<void(absl::Status) &&> finish);
  // Not finished: Finish(Cancelled).
  ~PieceWriter();

  PieceWriter(const PieceWriter&) = delete;
  PieceWriter& operator=(const PieceWriter&) = delete;

  std::byte* base() const { return base_; }
  const BoxRuns& runs() const { return runs_; }

  // OK: every byte of the runs is written. An error: the piece is lost
  // (the destination fails with `status`). Once.
  void Finish(absl::Status status);

 private:
  std::byte* const base_;
  const BoxRuns runs_;
  absl::AnyInvocable<void(absl::Status) &&> finish_;
};

// The receiving side: a worker. Calls come from the data plane's threads
// (the in-process data plane: the sender's thread) and must not block on
// other work.
class PieceReceiver {
 public:
  virtual ~PieceReceiver() = default;

  // Takes one piece: its bytes as a literal, or the error in its place.
  virtual void ReceivePiece(PieceMessage piece) = 0;

  // For a network data plane that has read a piece's header: where its
  // bytes go.
  //  * A writer: the receive is announced and its memory granted; read the
  //    bytes into the writer's runs, then Finish.
  //  * Null: not in place (not announced yet, memory not granted yet):
  //    read the bytes into a literal and deliver it with ReceivePiece.
  //  * An error: the piece is refused (a duplicate, or it does not fit its
  //    buffer, which the receiver has failed): drop its bytes.
  virtual absl::StatusOr<std::unique_ptr<PieceWriter>> BeginPiece(
      const PieceHeader& header) = 0;

  // The connection that carried pieces from `peer` broke: pieces on it may
  // be lost. Fails every receive still waiting for data from `peer` with
  // `status` (DATA_LOSS), as a head's PeerLost does; pieces from `peer`
  // that still come (the peer reconnects or reports them undelivered) are
  // accounted for and dropped.
  virtual void ConnectionLost(HostId peer, absl::Status status) = 0;
};

// The sending side, as a worker sees it. Thread-safe.
class DataPlane {
 public:
  virtual ~DataPlane() = default;
  // Delivers `piece` to host `destination`. The future resolves OK once
  // the destination's receiver has taken the piece, or with Unavailable
  // (naming the host and the cause) if it was not delivered: the host is
  // unknown, stopped or unreachable, or the connection broke first. It
  // resolves on a data plane thread or the calling thread: continuations
  // must be short and must not block.
  virtual Future<> Push(HostId destination, PieceMessage piece) = 0;
};

// Delivers pieces by calling the destination worker directly, on the
// pushing thread. Thread-safe.
class InProcessDataPlane final : public DataPlane {
 public:
  // `receiver` must stay valid until Unregister(host) returns.
  void Register(HostId host, PieceReceiver* receiver);
  // After this returns no call into the host's receiver is in progress or
  // will start.
  void Unregister(HostId host);

  Future<> Push(HostId destination, PieceMessage piece) override;

 private:
  struct Endpoint {
    PieceReceiver* receiver = nullptr;
    int64_t active_calls = 0;
  };
  absl::Mutex mu_;
  std::unordered_map<HostId, Endpoint> endpoints_ ABSL_GUARDED_BY(mu_);
};

// The box `offsets`..`offsets+dims` of the array `source` (same rank), as a
// new literal of shape dims. InvalidArgument if the box does not fit.
absl::StatusOr<hlo::Literal> ExtractPiece(const hlo::Literal& source,
                                          absl::Span<const int64_t> offsets,
                                          absl::Span<const int64_t> dims);

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_DATA_PLANE_H_
