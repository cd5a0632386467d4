// Shared state behind the client's handle types (Array, Slice, Executable,
// Session). Not public API: include the public headers instead.
#ifndef CAUSEWAY_CLIENT_INTERNAL_H_
#define CAUSEWAY_CLIENT_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/client/array.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/hlo/shape.h"
#include "causeway/transport/session_channel.h"

namespace causeway::client::internal {

// Handles are minted by the client, unique in the process (so that several
// sessions over one in-process head never collide), without a round trip.
ArrayHandle MintArrayHandle();
SliceHandle MintSliceHandle();
ExecutableHandle MintExecutableHandle();

// One session's connection. Thread-safe.
class SessionCore {
 public:
  SessionCore(std::unique_ptr<transport::SessionChannel> channel,
              std::string name)
      : channel_(std::move(channel)), name_(std::move(name)) {}

  transport::SessionChannel& channel() { return *channel_; }
  const std::string& name() const { return name_; }
  SessionId id() const { return id_; }
  void set_id(SessionId id) { id_ = id; }

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // FailedPrecondition naming the session once it is closed.
  absl::Status CheckOpen() const;
  // Marks the session closed; returns false if it already was.
  bool MarkClosed() { return !closed_.exchange(true); }

  uint64_t NextTraceId() { return next_trace_id_.fetch_add(1) + 1; }

  // The array is no longer referenced by the client.
  void DropArray(ArrayHandle handle);

 private:
  const std::unique_ptr<transport::SessionChannel> channel_;
  const std::string name_;
  SessionId id_;
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> next_trace_id_{0};
};

struct SliceState {
  SliceState(std::shared_ptr<SessionCore> session, SliceHandle handle,
             Mesh mesh, std::optional<IslandId> island)
      : session(std::move(session)),
        handle(handle),
        mesh(std::move(mesh)),
        island(island) {}
  ~SliceState();  // Releases the slice unless released or closed already.

  const std::shared_ptr<SessionCore> session;
  const SliceHandle handle;
  const Mesh mesh;
  const std::optional<IslandId> island;
  Future<transport::SliceInfo> granted;  // Set once, right after creation.
  std::atomic<bool> released{false};
};

struct ArrayState {
  ArrayState(std::shared_ptr<SessionCore> session, Slice slice,
             ArrayHandle handle, hlo::Shape shape, Sharding sharding)
      : session(std::move(session)),
        slice(std::move(slice)),
        handle(handle),
        shape(std::move(shape)),
        sharding(std::move(sharding)) {}
  ~ArrayState();  // Deletes the array on the devices.

  // OK when an op may name this array: it is not deleted, its session is
  // open, and it is not the output of an unsubmitted trace other than
  // `trace_id` (0: no trace).
  absl::Status CheckUsable(uint64_t trace_id) const;

  const std::shared_ptr<SessionCore> session;
  const Slice slice;
  const ArrayHandle handle;
  const hlo::Shape shape;
  const Sharding sharding;
  // FromHost: the upload's reply (a refused upload is the array's error).
  std::optional<Future<>> uploaded;
  // Nonzero while the array is the output of that trace, not yet submitted.
  std::atomic<uint64_t> pending_trace{0};
  // Its trace was destroyed unsubmitted: the array will never exist.
  std::atomic<bool> abandoned{false};
  std::atomic<bool> deleted{false};
};

struct ExecutableState {
  std::shared_ptr<SessionCore> session;
  Slice slice;
  transport::CompileInfo info;
  std::string name;
  std::vector<hlo::Shape> parameter_shapes;  // Global.
  std::vector<Sharding> parameter_shardings;
  std::vector<hlo::Shape> output_shapes;  // Global.
  std::vector<Sharding> output_shardings;
};

using GraphOp = std::variant<transport::ExecuteOp, transport::CopyOp>;

// Appends to `ops` an execution of `executable` on `args`, preceded by the
// copies of arguments that live on another slice or sharding, and returns
// the outputs (marked as pending in `trace_id` when it is nonzero). The
// copies' arrays go to `temporaries`: the caller keeps them alive until the
// ops are sent, so that their deletion follows their creation.
absl::StatusOr<std::vector<Array>> AppendExecute(
    const ExecutableState& executable, absl::Span<const Array> args,
    uint64_t trace_id, std::vector<GraphOp>* ops,
    std::vector<Array>* temporaries);

// Appends a copy of `array` to `slice` with `sharding` and returns it.
absl::StatusOr<Array> AppendCopy(const std::shared_ptr<SessionCore>& session,
                                 const Array& array, const Slice& slice,
                                 const Sharding& sharding, uint64_t trace_id,
                                 std::vector<GraphOp>* ops);

// Appends an assembly and returns its array: an array of `global_shape` on
// `slice` with `sharding` whose shard i is shard pieces[i].second of array
// pieces[i].first (which must have that shard's shape).
absl::StatusOr<Array> AppendAssemble(
    const std::shared_ptr<SessionCore>& session,
    absl::Span<const std::pair<Array, int64_t>> pieces,
    const hlo::Shape& global_shape, const Slice& slice,
    const Sharding& sharding, std::vector<GraphOp>* ops);

// Sends ops recorded outside a trace: one op as itself, several as a graph.
void SendOps(SessionCore& session, std::vector<GraphOp> ops);

}  // namespace causeway::client::internal

#endif  // CAUSEWAY_CLIENT_INTERNAL_H_
