// The worker's side of the worker protocol (proto/worker.proto) over gRPC:
// the agent that dials the head, registers the worker, drives its
// WorkerService from the commands on the stream, and sends its notices up.
//
//   auto agent = GrpcWorkerAgent::Register(options);   // host id, devices
//   ... build the worker with (*agent)->host(), (*agent)->devices(),
//       listener = agent->get() ...
//   absl::Status why = (*agent)->Serve(worker, &events);  // until it ends
//
// The stream is on gRPC's callback API: commands are read on gRPC's
// threads and applied in the order they come, on a command thread of the
// agent (each WorkerService call returns promptly); a put's value is pulled
// as soon as its command arrives and the put is applied, in its place in
// the order, once it is here, so that later commands find the buffer.
// Answers and notices go up with no thread of their own: the thread that
// sends starts the write when none is in progress, and a write's
// completion starts the next (OpDone notices queued together merged into
// one message). Pings are answered as they are read (after the worker's own
// Heartbeat), so a big pull never delays them. Bulk bytes go on their own
// calls (PullShard for a put's value, PushShard for a fetched one) on a
// second connection.
//
// The head's key-value store (key_value_store()) rides the same stream: a
// request goes up as a `kv` notice and its answer comes down as a
// `kv_reply`, matched by id, handled as it is read (never behind
// commands). When the stream ends every pending call fails with
// Unavailable, and later calls fail at once.
//
// A worker that loses the head does not reconnect in place: its state
// belongs to that head. The process makes a fresh worker and registers it
// again (a new incarnation) with whatever head answers at the address
// (cli/worker_command.cc).
//
// Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_WORKER_AGENT_H_
#define CAUSEWAY_TRANSPORT_GRPC_WORKER_AGENT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_stream_writer.h"
#include "causeway/transport/key_value_store.h"
#include "causeway/transport/proto/worker.grpc.pb.h"
#include "causeway/transport/topology.h"
#include "causeway/transport/wire_convert.h"

namespace causeway::transport {

struct GrpcWorkerAgentOptions {
  std::string head;  // HOST:PORT.
  GrpcSecurity security;
  KeepaliveOptions keepalive;
  // How long registering may wait for the head to answer.
  absl::Duration connect_timeout = absl::Seconds(10);
  // Registering gives up, CANCELLED, once this says so (a worker told to
  // stop while its head is away); asked every 50 ms while a call of the
  // registration waits. Unset: only connect_timeout ends the wait.
  std::function<bool()> stopped;
  WireLimits limits;
  // Bytes of notices (replies, op completions, trace events) waiting to be
  // written to the head: past it (a head that stops reading) the worker
  // ends its stream RESOURCE_EXHAUSTED naming this bound, as the head does
  // with a worker that stops reading (--max-worker-queue-bytes).
  int64_t max_queued_notice_bytes = int64_t{256} << 20;
  // What the worker offers.
  IslandId island = IslandId(0);
  HostSpec spec;
  std::string data_plane_address;
  // This start's incarnation: peers' data planes dial this worker expecting
  // it (TcpDataPlane::incarnation()). Zero: a random one.
  uint64_t incarnation = 0;
  std::string name;
};

class GrpcWorkerAgent final : public WorkerListener {
 public:
  // Dials the head, negotiates the version and registers with a fresh
  // incarnation. Unavailable when no head answers in time; the head's
  // refusal (UNAUTHENTICATED, InvalidArgument, ...) otherwise.
  static absl::StatusOr<std::unique_ptr<GrpcWorkerAgent>> Register(
      GrpcWorkerAgentOptions options);
  ~GrpcWorkerAgent() override;  // Stop(), then waits for bulk calls.

  HostId host() const { return host_; }
  uint64_t incarnation() const { return incarnation_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  absl::Duration heartbeat_interval() const { return heartbeat_interval_; }

  // Serves `worker` from the stream until the stream ends or Stop is
  // called; returns why it ended. Call once. Membership updates go to
  // WorkerService::UpdateMembership. With `events` (the worker's event
  // sink), its events are sent to the head every `trace_interval`. Futures
  // of `worker` may still call back into the agent afterwards: stop the
  // worker (which resolves them) before destroying the agent, and the agent
  // before the worker.
  absl::Status Serve(WorkerService* worker,
                     trace::EventBuffer* events = nullptr,
                     absl::Duration trace_interval = absl::Milliseconds(100));

  // Ends the stream (Serve returns) and waits for the bulk calls to end.
  // Idempotent.
  void Stop();

  // The head's key-value store, over this stream (see the header comment).
  // Futures resolve on the gRPC thread that read the answer (continuations
  // must not block), or on the caller's for an error known at once. Valid as long as the agent.
  KeyValueStore& key_value_store() { return store_; }

  // Notices up the stream (the worker's listener).
  void OnOpDone(const OpDone& done) override;
  // One notice for them all.
  void OnOpsDone(const std::vector<OpDone>& done) override;
  void OnPushFailed(const UndeliveredPiece& piece) override;
  // Head-side notices: a worker reports neither its own disconnection nor
  // trace events through its listener (Serve sends its EventBuffer's).
  void OnWorkerDisconnected(HostId host, absl::Status why) override {}
  void OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                     absl::Duration clock_offset) override {}

 private:
  // One op_done notice carrying `done`.
  void SendOpsDone(absl::Span<const OpDone> done);
  explicit GrpcWorkerAgent(GrpcWorkerAgentOptions options);

  class HeadStore final : public KeyValueStore {
   public:
    explicit HeadStore(GrpcWorkerAgent* agent) : agent_(agent) {}
    Future<> Set(std::string key, std::string value) override;
    Future<std::string> Get(std::string key, absl::Time deadline) override;
    Future<> DeletePrefix(std::string prefix) override;

   private:
    GrpcWorkerAgent* const agent_;
  };
  using KvPending =
      absl::AnyInvocable<void(absl::StatusOr<std::string> result) &&>;
  // Sends `request` (its id filled in here); `pending` gets the answer.
  void CallStore(wire::KvRequest request, KvPending pending);
  void OnKvReply(const wire::KvReply& reply);
  // The stream ended: every pending store call fails with `why`, and so do
  // later ones.
  void CloseStore(const absl::Status& why);

  // A command waiting to be applied; a put's value is being pulled.
  struct Queued {
    ArenaMessage<wire::HeadToWorker> command;
    std::optional<Future<hlo::Literal>> value;
  };

  // The stream to the head (a ClientBidiReactor).
  class Stream;

  // A command read off the stream (on gRPC's thread): a ping or a kv reply
  // is handled at once, anything else queued for the command thread (a
  // put's value starts being pulled).
  void OnCommand(WorkerService* worker,
                 ArenaMessage<wire::HeadToWorker> command);
  void Reply(uint64_t id, const absl::Status& status,
             wire::Reply reply = {});
  void Ping(WorkerService* worker, uint64_t id, int64_t head_time_us);
  // The command thread: applies queued commands in order until the stream
  // ends; an error ends the stream (a head that sends malformed commands
  // cannot be served correctly).
  void ApplyCommands(WorkerService* worker);
  absl::Status ApplyCommand(WorkerService* worker, Queued& queued);
  absl::Status HandleCommand(WorkerService* worker,
                             const wire::HeadToWorker& command);
  // Sends the events `events` gathered, every `interval`, until the stream
  // ends.
  void SendTraceEvents(trace::EventBuffer* events, absl::Duration interval);
  // Pulls the value of put command `id` (on a transfer thread).
  Future<hlo::Literal> StartPull(uint64_t id);
  absl::StatusOr<hlo::Literal> Pull(uint64_t id);
  void Push(uint64_t id, const hlo::Literal& value);

  const GrpcWorkerAgentOptions options_;
  const uint64_t incarnation_;
  HostId host_;
  std::vector<DeviceInfo> devices_;
  absl::Duration heartbeat_interval_;

  std::unique_ptr<wire::HeadWorkers::Stub> control_;
  std::unique_ptr<wire::HeadWorkers::Stub> bulk_;
  grpc::ClientContext context_;
  // Made by Register; done before the agent goes.
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<StreamWriter<wire::WorkerToHead>> writer_;
  // Bulk calls (blocking) and callbacks that start them.
  std::unique_ptr<ThreadPool> transfers_;
  // The names of the head's dispatches so far; the command thread's only.
  NameDecoder command_names_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_done_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> transfer_contexts_ ABSL_GUARDED_BY(mu_);
  std::deque<Queued> commands_ ABSL_GUARDED_BY(mu_);
  bool commands_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status command_error_ ABSL_GUARDED_BY(mu_);

  HeadStore store_{this};
  absl::Mutex kv_mu_;
  uint64_t next_kv_id_ ABSL_GUARDED_BY(kv_mu_) = 1;
  std::map<uint64_t, KvPending> kv_pending_ ABSL_GUARDED_BY(kv_mu_);
  absl::Status kv_closed_ ABSL_GUARDED_BY(kv_mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_WORKER_AGENT_H_
