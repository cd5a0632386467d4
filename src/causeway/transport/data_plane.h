// The data plane: worker-to-worker movement of array data. A transfer moves
// one piece (a box) of a source shard into a destination buffer on another
// device, possibly on another host; the head only plans transfers, the bytes
// never pass through it.
//
// The sending worker pushes the piece as soon as the source buffer is ready;
// the receiving worker writes it straight into the destination buffer, which
// its own control message reserved (and may not have seen yet: a receiver
// holds pieces that arrive before the buffer is announced). An error in
// place of the data (the source failed) fails the destination buffer, so an
// error flows to every consumer like data does.
//
// Implementations: InProcessDataPlane (below: a direct call into the
// receiving worker) and TCP (on Asio).
#ifndef CAUSEWAY_TRANSPORT_DATA_PLANE_H_
#define CAUSEWAY_TRANSPORT_DATA_PLANE_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/literal.h"

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
  // The bytes, or the error of the source.
  absl::StatusOr<hlo::Literal> data;
};

// The receiving side: a worker.
class PieceReceiver {
 public:
  virtual ~PieceReceiver() = default;
  // Takes one piece. Called on the sender's thread by the in-process data
  // plane; must not block on other work.
  virtual void ReceivePiece(PieceMessage piece) = 0;
};

// The sending side, as a worker sees it. Thread-safe.
class DataPlane {
 public:
  virtual ~DataPlane() = default;
  // Delivers `piece` to host `destination`. Unavailable if that host cannot
  // be reached (stopped, unknown): the piece is then lost, and the head's
  // failure handling fails the destination.
  virtual absl::Status Push(HostId destination, PieceMessage piece) = 0;
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

  absl::Status Push(HostId destination, PieceMessage piece) override;

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
