// The client→head session protocol: what a client may ask of the head, as
// plain request/response structs, and the channel interface that carries
// them (client side: SessionChannel; head side: SessionService). The
// in-process implementation calls the head's SessionService directly; the
// gRPC one carries the same structs, so the head's logic never sees the
// transport.
//
// After IFRT Proxy (reference/ifrt_hlo.md A.1b): handles of arrays and
// executables are minted by the client, so Execute and Copy are
// fire-and-forget (no reply, nothing on the critical path waits for a round
// trip); errors live inside the result arrays and surface when the client
// waits on them (ArrayReady / Fetch).
#ifndef CAUSEWAY_TRANSPORT_SESSION_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_SESSION_CHANNEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway {

using SliceHandle = StrongId<struct SliceHandleTag, uint64_t>;
using ExecutableHandle = StrongId<struct ExecutableHandleTag, uint64_t>;

namespace transport {

struct OpenSessionRequest {
  std::string name;          // For status and traces.
  double weight = 1.0;       // Fair-share weight on every island.
  int priority = 0;          // Default priority of its slice requests.
};

// "n devices in one island, mesh shape 2x2". The client mints `handle`.
struct SliceRequest {
  SliceHandle handle;
  int64_t num_devices = 1;
  std::vector<int64_t> mesh_shape;   // Empty: {num_devices}.
  std::optional<IslandId> island;    // Empty: any island.
  std::optional<int> priority;       // Empty: the session's.
  bool allow_smaller = false;        // May shrink on failure remap.
  // Time-share devices with other shared slices instead of owning them:
  // the island scheduler interleaves their launches in gang order.
  bool shared = false;
};

// What a granted slice currently maps to. Changes (generation+1) when the
// head remaps the slice after a failure.
struct SliceInfo {
  SliceHandle handle;
  IslandId island;
  std::vector<DeviceId> devices;  // Virtual device i → physical device.
  std::vector<int64_t> mesh_shape;
  uint64_t generation = 0;
};

// An array's metadata. Shard i of the array lives on virtual device i of
// `slice` (devices_of_slice[i]); `sharding` uses logical device numbers
// 0..num_devices-1 as XLA writes them.
struct ArraySpec {
  ArrayHandle handle;
  hlo::Shape global_shape;
  hlo::Sharding sharding;
  SliceHandle slice;
};

struct CompileRequest {
  ExecutableHandle handle;
  std::string hlo_text;
  SliceHandle slice;  // May still be queued: compile before provisioning.
};

// The result of compiling: from the module itself.
struct CompileInfo {
  ExecutableHandle handle;
  int64_t num_partitions = 1;
  std::vector<hlo::Shape> parameter_shapes;  // Per-partition (shard) shapes.
  std::vector<hlo::Sharding> parameter_shardings;
  std::vector<hlo::Shape> output_shapes;     // Per-partition, tuple flattened.
  std::vector<hlo::Sharding> output_shardings;
};

// Runs an executable. `outputs` are minted by the client, one per output
// (tuple flattened); their specs follow from the CompileInfo and the slice.
struct ExecuteOp {
  ExecutableHandle executable;
  std::vector<ArrayHandle> arguments;
  std::vector<ArraySpec> outputs;
};

// Copies (and reshards) `source` into a new array `destination` on another
// slice and/or sharding. Data moves worker to worker.
//
// With `pieces`, an assembly instead (`source` unused): the destination's
// shard i is shard `pieces[i].shard` of array `pieces[i].array`, which has
// that shard's shape (JAX's make_array_from_single_device_arrays with the
// arrays on devices).
struct CopyOp {
  struct Piece {
    ArrayHandle array;
    int64_t shard = 0;
  };
  ArrayHandle source;
  ArraySpec destination;
  std::vector<Piece> pieces;
};

// Several executions and copies recorded by the client and submitted as one
// dataflow graph: dispatched all at once, one message per worker.
struct ProgramGraph {
  std::vector<std::variant<ExecuteOp, CopyOp>> ops;
};

// The head's view of everything, for `causeway status` and tests.
struct StatusReport {
  std::string text;  // Human-readable, one block per device.
  std::string json;  // The same, machine-readable.
};

// Client side of one session's connection to the head. Thread-safe. The
// futures returned resolve on a thread of the channel's implementation;
// callers attach continuations with an explicit executor.
class SessionChannel {
 public:
  virtual ~SessionChannel() = default;

  virtual Future<SessionId> OpenSession(OpenSessionRequest request) = 0;
  // Releases the session's slices, arrays and executables.
  virtual Future<> CloseSession() = 0;

  // Resolves when the slice is granted (it may wait in the queue).
  virtual Future<SliceInfo> RequestSlice(SliceRequest request) = 0;
  virtual Future<SliceInfo> GetSlice(SliceHandle slice) = 0;
  virtual Future<> ReleaseSlice(SliceHandle slice) = 0;

  // Resolves when the program is parsed and verified (errors carry
  // line:column); loading onto devices happens when the slice is granted.
  virtual Future<CompileInfo> Compile(CompileRequest request) = 0;

  // Host → devices: `global` is split by spec.sharding.
  virtual Future<> PutArray(ArraySpec spec, hlo::Literal global) = 0;
  // Host → devices, one buffer per device: shards[i] becomes the buffer on
  // virtual device i of spec.slice and must have the shard shape
  // spec.sharding gives. Replicas are taken as given, not compared (as
  // JAX's make_array_from_single_device_arrays): `causeway run` gives each
  // partition its own argument this way.
  virtual Future<> PutShards(ArraySpec spec,
                             std::vector<hlo::Literal> shards) = 0;
  // Fire-and-forget: errors surface in the output arrays.
  virtual void Execute(ExecuteOp op) = 0;
  virtual void Copy(CopyOp op) = 0;
  virtual void Submit(ProgramGraph graph) = 0;

  // Resolves when the array's every shard is ready, or with its error.
  virtual Future<> ArrayReady(ArrayHandle array) = 0;
  // Devices → host: the global value, assembled from the shards.
  virtual Future<hlo::Literal> Fetch(ArrayHandle array) = 0;
  // Devices → host: every device's buffer, replicas too, in the order of
  // the slice's devices (what each partition of a program produced).
  virtual Future<std::vector<hlo::Literal>> FetchShards(ArrayHandle array) = 0;
  virtual void Delete(std::vector<ArrayHandle> arrays) = 0;

  virtual Future<StatusReport> GetStatus() = 0;
  // Chrome trace-event JSON of recent work (opens in Perfetto).
  virtual Future<std::string> GetTrace() = 0;
};


// What the head serves to its sessions: the SessionChannel's calls, each
// naming the session it belongs to. The head implements it; the server side
// of every session channel (in-process, gRPC) adapts it, having opened the
// session first. Calls naming a session that is not open fail with
// FailedPrecondition (the fire-and-forget ones are dropped). Thread-safe.
// How a session stays open.
enum class SessionLease {
  // The transport holds it open: it ends only by CloseSession (the
  // in-process channel, whose client lives in the head's process).
  kHeld,
  // It expires when silent for the head's lease (HeadOptions): every call
  // on it, and Touch, renews it. A client that is killed or disconnects
  // without closing loses its devices, arrays and executables then.
  kLeased,
};

class SessionService {
 public:
  virtual ~SessionService() = default;

  // InvalidArgument for a bad request, ResourceExhausted when the head
  // has as many sessions as it allows, Unavailable once it shuts down.
  virtual absl::StatusOr<SessionId> OpenSession(
      const OpenSessionRequest& request, SessionLease lease) = 0;
  virtual Future<> CloseSession(SessionId session) = 0;
  // The client is there (a keepalive): renews a leased session's lease.
  virtual void Touch(SessionId session) = 0;
  virtual Future<SliceInfo> RequestSlice(SessionId session,
                                         SliceRequest request) = 0;
  virtual Future<SliceInfo> GetSlice(SessionId session, SliceHandle slice) = 0;
  virtual Future<> ReleaseSlice(SessionId session, SliceHandle slice) = 0;
  virtual Future<CompileInfo> Compile(SessionId session,
                                      CompileRequest request) = 0;
  virtual Future<> PutArray(SessionId session, ArraySpec spec,
                            hlo::Literal global) = 0;
  virtual Future<> PutShards(SessionId session, ArraySpec spec,
                             std::vector<hlo::Literal> shards) = 0;
  virtual void Execute(SessionId session, ExecuteOp op) = 0;
  virtual void Copy(SessionId session, CopyOp op) = 0;
  virtual void Submit(SessionId session, ProgramGraph graph) = 0;
  virtual Future<> ArrayReady(SessionId session, ArrayHandle array) = 0;
  virtual Future<hlo::Literal> Fetch(SessionId session, ArrayHandle array) = 0;
  virtual Future<std::vector<hlo::Literal>> FetchShards(SessionId session,
                                                        ArrayHandle array) = 0;
  virtual void Delete(SessionId session, std::vector<ArrayHandle> arrays) = 0;
  // Not tied to a session: `causeway status` asks without opening one.
  virtual Future<StatusReport> GetStatus() = 0;
  virtual Future<std::string> GetTrace() = 0;
};

}  // namespace transport
}  // namespace causeway

#endif  // CAUSEWAY_TRANSPORT_SESSION_CHANNEL_H_
