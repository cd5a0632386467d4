// The head→worker control channel: everything the head asks of one worker
// (host), as plain messages, and the worker→head notices that come back.
//
// The hot path is Dispatch: ONE message per worker per dispatched graph (or
// Execute), carrying every op of that worker's devices, every buffer it must
// reserve to receive data and every piece it must send. It is
// fire-and-forget: errors end up inside the output buffers.
//
// Ordering: messages from the head to one worker are delivered in the order
// sent. Each device runs its launches in the order received, which the
// dispatcher makes the island's gang order (increasing seq).
//
// The worker serves WorkerService; the head holds a ControlChannel per
// worker. Implementations: InProcessControlChannel
// (in_process_control_channel.h, a direct call into the WorkerService) and
// gRPC. Messages are
// plain structs that could be serialized; the in-process implementation
// passes hlo::Literal values and the parsed module (shared, immutable) as an
// optimisation of "serialize".
#ifndef CAUSEWAY_TRANSPORT_CONTROL_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_CONTROL_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"
#include "causeway/trace/events.h"
#include "causeway/transport/topology.h"

namespace causeway::transport {

// A compiled program, named by the fingerprint of its text (the head's
// compile cache key).
using ProgramId = StrongId<struct ProgramIdTag, uint64_t>;

// A buffer on a device of the worker.
struct DeviceBuffer {
  DeviceId device;
  BufferId buffer;
};

struct LoadProgramRequest {
  ProgramId program;
  std::string name;  // The module's name, for errors and traces.
  // The parsed and verified module (a network channel sends `hlo_text` and
  // the worker parses it again).
  std::shared_ptr<const hlo::Module> module;
  std::string hlo_text;
};

// Where one piece of a receive comes from: the transfer that sends it
// (unique within the receive) and its source.
struct PieceOrigin {
  uint64_t transfer_id = 0;
  DeviceId device;
  HostId host;
  std::string description;  // For the status view.
};

// A box inside a buffer (offsets and sizes per dimension).
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> dims;
};

// Reserve `buffer` on `device` and fill it from pieces pushed by other
// devices through the data plane (and zeros for `zero_fill`, the padding of
// an uneven shard).
struct ReceiveSpec {
  DeviceId device;
  BufferId buffer;
  hlo::Shape shape;
  // One entry per piece that will arrive.
  std::vector<PieceOrigin> pieces;
  std::vector<Box> zero_fill;
  // A single piece that is the whole buffer (no copy on arrival).
  bool whole = false;
};

// An input of a launch on one device.
struct LaunchInput {
  BufferId buffer;
  // The buffer is a staging copy made for this launch only (a transfer from
  // another device list or sharding): the launch drops its reference after
  // running, which frees it.
  bool release_after_use = false;
  // Where the data comes from, for the status view (DescribeInput): the
  // client's handle of the array and what produced it ("output 0 of
  // 'add'", "uploaded by the client"), shared by every launch that reads
  // it. A staged input comes from the pieces of its staging receive.
  ArrayHandle array;
  std::shared_ptr<const std::string> producer;
};

struct LaunchOutput {
  BufferId buffer;
  hlo::Shape shape;  // The shard shape, reserved at enqueue.
};

// One partition of a launch: what one device runs.
// LaunchOp::peers_key for these peers: never 0.
uint64_t PeersKey(const std::vector<DeviceId>& devices,
                  const std::vector<HostId>& hosts);

struct LaunchOp {
  DeviceId device;
  IslandId island;
  uint64_t seq = 0;  // Gang sequence number on `island`.
  ProgramId program;
  std::string program_name;
  SessionId session;
  std::string session_name;
  int64_t partition = 0;
  int64_t num_partitions = 1;
  // The island's collective epoch when the launch was released: never
  // smaller than that of a launch with a smaller seq on the island. The
  // head bumps it when a host dies, when a launch over several hosts fails
  // and when a session with one running closes; the cross-process
  // collectives key their communicators on it (docs/collectives.md).
  uint64_t epoch = 0;
  // Every device of the launch, in partition order (devices[partition] is
  // `device`): the collective peers.
  std::vector<DeviceId> devices;
  // The hosts of every device of the launch (collective peers): if one of
  // them dies, the launch fails with DATA_LOSS everywhere.
  std::vector<HostId> participant_hosts;
  // A fingerprint of `devices` and `participant_hosts`, the same in every
  // op of one launch (PeersKey), or 0. With one, a network channel sends
  // the two lists once per stream and a number after that
  // (wire_names.h); without, in every op.
  uint64_t peers_key = 0;
  // Staging buffers on this device that transfers fill for this launch's
  // inputs (an argument on another device list or sharding). Reserved right
  // before the outputs, so a device's memory is taken in launch order.
  std::vector<ReceiveSpec> staging;
  std::vector<LaunchInput> inputs;
  std::vector<LaunchOutput> outputs;  // The root, a tuple flattened.
  // Not OK: the launch must not run (a device of it was lost before it was
  // sent); its outputs fail with this status, in order.
  absl::Status abandoned;
};

// Where input `input` of `op` comes from, as the status view shows it:
// "array 5 (output 0 of 'f') on this device", or for a staged input
// "transfer of array 5 (output 0 of 'f') from device 1 (host 0)" (the
// devices its staging receive's pieces come from); "" when the launch does
// not say.
std::string DescribeInputSource(const LaunchOp& op, size_t input);

// When `source` (on `device`) is ready, push the box `region` of it to
// `destination` on `destination_device` of `destination_host`, at
// `destination_offsets`.
struct SendSpec {
  uint64_t transfer_id = 0;
  DeviceId device;
  BufferId source;
  Box region;
  bool whole = false;  // `region` is all of `source` and all of the
                       // destination.
  HostId destination_host;
  DeviceId destination_device;
  BufferId destination;
  std::vector<int64_t> destination_offsets;
};

// One dispatch message. The worker handles `receives` first (so launches
// can read them), then `launches` in order, then `sends`, then `releases`
// (the head's references to buffers of deleted arrays).
struct WorkerBatch {
  std::vector<ReceiveSpec> receives;
  std::vector<LaunchOp> launches;
  std::vector<SendSpec> sends;
  std::vector<DeviceBuffer> releases;
};

// Host data into a buffer (one shard of an uploaded array).
struct PutBufferRequest {
  DeviceId device;
  BufferId buffer;
  hlo::Literal value;
};

// What one queued or running op looks like, for the status view.
struct OpStatus {
  uint64_t seq = 0;
  IslandId island;
  std::string program;
  std::string session;
  int64_t partition = 0;
  // Inputs not ready yet, each "array 5 shard 1 <- <source>".
  std::vector<std::string> waiting_for;
  bool waiting_for_memory = false;
};

// A snapshot of one device's object store (its memory accounting). Bytes of
// waiting reservations are not part of used_bytes.
struct ObjectStoreStats {
  int64_t budget_bytes = 0;
  int64_t used_bytes = 0;      // Reserved and ready buffers.
  int64_t reserved_bytes = 0;  // Part of used_bytes still awaiting data.
  int64_t waiting_bytes = 0;   // Asked for by waiting reservations.
  int64_t num_waiting = 0;
  int64_t num_reserved = 0;
  int64_t num_ready = 0;
  int64_t num_error = 0;
};

struct DeviceStatus {
  DeviceId device;
  std::optional<OpStatus> running;
  std::vector<OpStatus> queued;  // In run order, the running op excluded.
  ObjectStoreStats memory;
  int64_t ops_completed = 0;
};

// A piece that will never arrive: its sender's data plane could not deliver
// it. The sending worker reports it (WorkerListener::OnPushFailed); the
// head passes it to the destination's worker (WorkerService::FailBuffers),
// which fails the destination buffer with `status`.
struct UndeliveredPiece {
  uint64_t transfer_id = 0;
  HostId source_host;
  DeviceId source_device;
  HostId destination_host;
  DeviceBuffer destination;
  // DATA_LOSS: "transfer 7 from device 0 (host 0) to array 3 shard 1 on
  // device 5 (host 2) was not delivered: <the data plane's cause>".
  absl::Status status;
};

struct WorkerStatus {
  HostId host;
  std::vector<DeviceStatus> devices;
  // Receives still waiting for pieces: "array 9 shard 0 on device 4 <- ...".
  std::vector<std::string> pending_receives;
};

// The cluster's membership as the head sees it: sent to every alive worker
// whenever it changes (a host joins or dies, an island moves to a new
// epoch). Updates may arrive out of order; a worker keeps the one with the
// highest version.
struct PeerInfo {
  HostId host;
  IslandId island;
  std::string address;  // Its data plane's ("" in embedded mode).
  HostState state = HostState::kAlive;
  // HostInfo::incarnation: a worker process's data plane dials a peer
  // expecting it ("" in embedded mode).
  std::string incarnation;
};
struct MembershipUpdate {
  uint64_t version = 0;                 // Topology::version().
  std::vector<PeerInfo> hosts;          // Every host, by id.
  std::vector<uint64_t> island_epochs;  // By island id.
};

// What a worker serves: every call the head makes on it. The worker
// implements it; the server side of every control channel (in-process,
// gRPC) delivers the head's calls to it in the order the head made them.
// Thread-safe; every method returns promptly (waiting happens in the
// futures).
class WorkerService {
 public:
  virtual ~WorkerService() = default;

  // Prepares the program on the worker (idempotent per program). Resolves
  // when the worker can run it, or with why not.
  virtual Future<> LoadProgram(LoadProgramRequest request) = 0;
  virtual void UnloadProgram(ProgramId program) = 0;

  // Fire-and-forget, in order (see the header comment).
  virtual void Dispatch(WorkerBatch batch) = 0;

  // Resolves when the buffer holds the value (after back-pressure), or with
  // the error (ResourceExhausted if it can never fit).
  virtual Future<> PutBuffer(PutBufferRequest request) = 0;
  // Resolves when every buffer is ready, or with the first error.
  virtual Future<> AwaitBuffers(std::vector<DeviceBuffer> buffers) = 0;
  // The buffer's value once ready.
  virtual Future<hlo::Literal> FetchBuffer(DeviceBuffer buffer) = 0;
  // Drops the head's reference to each buffer (unknown ones are ignored).
  virtual void ReleaseBuffers(std::vector<DeviceBuffer> buffers) = 0;

  // Another host is gone: fail receives waiting for its data and launches
  // that have a device there, with `status` (DATA_LOSS).
  virtual void PeerLost(HostId host, absl::Status status) = 0;

  // Pieces another worker could not deliver here: each fails its
  // destination buffer with its status (once the receive is announced, if
  // it is not yet). Pieces already received are not touched.
  virtual void FailBuffers(std::vector<UndeliveredPiece> pieces) = 0;

  // A session ended: fail its queued launches with `status` and stop its
  // running ones (Device::CancelSession).
  virtual void CancelSession(SessionId session, absl::Status status) = 0;

  // The membership changed (see MembershipUpdate).
  virtual void UpdateMembership(MembershipUpdate update) = 0;

  // Liveness: resolves OK promptly while the worker runs.
  virtual Future<> Heartbeat() = 0;
  virtual Future<WorkerStatus> GetStatus() = 0;
};

// The head's handle to one worker: the worker's service, reached through a
// transport (InProcessControlChannel, gRPC). Thread-safe. Calls on a worker
// that is gone return (or resolve with) Unavailable.
class ControlChannel : public WorkerService {};

// What a device reports when an op leaves it (ran, failed or abandoned).
struct OpDone {
  HostId host;
  DeviceId device;
  IslandId island;
  uint64_t seq = 0;
  absl::Status status;
};

// Worker→head notices: the head implements it; the server side of every
// control channel calls it. Called on device, data-plane and transport
// threads; must not block on device work. Every notice names the host it
// comes from, which the transport knows (a network one from the connection
// it arrived on, never from the message).
class WorkerListener {
 public:
  virtual ~WorkerListener() = default;
  virtual void OnOpDone(const OpDone& done) = 0;
  // Several at once (one launch's ops of one host, worker/op_done_batcher.h):
  // a transport sends them as one notice.
  virtual void OnOpsDone(const std::vector<OpDone>& done) {
    for (const OpDone& one : done) OnOpDone(one);
  }
  // This worker's data plane could not deliver `piece`: the head fails its
  // destination (FailBuffers on the destination's channel), unless a host
  // of it is dead already (its failure handling covers the piece).
  virtual void OnPushFailed(const UndeliveredPiece& piece) = 0;
  // The transport's connection to `host` is gone for good (its stream
  // broke, its process was killed): the host is dead at once. A call that
  // merely failed is not this.
  virtual void OnWorkerDisconnected(HostId host, absl::Status why) = 0;
  // A batch of `host`'s trace events (a trace::EventBuffer's Take on the
  // worker), with the clock offset the transport measured (the head's clock
  // minus the worker's): the head replays them into its sink, so that one
  // trace shows every device of a multi-process run.
  virtual void OnTraceEvents(HostId host,
                             std::vector<trace::EventRecord> events,
                             absl::Duration clock_offset) = 0;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_CONTROL_CHANNEL_H_
