// The head's side of the worker protocol (proto/worker.proto) over gRPC.
//
// Workers dial the head (the head never dials a worker): each opens one
// Worker stream, registers on it, and from then on the stream carries the
// head's commands down, in the order the head makes them (one `dispatch`
// message per worker per dispatched graph), and the worker's notices up.
// GrpcWorkerServer serves those streams; each registered worker gets a
// GrpcControlChannel, the head's ControlChannel to it.
//
// Bulk bytes never ride the stream: a PutBuffer's value waits in the
// channel until the worker pulls it (PullShard, 1 MiB chunks); a
// FetchBuffer's value comes up on PushShard. Both are dialled by the
// worker and named by the command's id, the worker's host id and its
// incarnation.
//
// Health: a broken stream is a dead worker at once (the head hears
// WorkerListener::OnWorkerDisconnected); a worker that stops answering
// while its connection stays up is caught by the head's heartbeats
// (Heartbeat is a Ping answered by a Pong from the worker's stream reader)
// and by gRPC keepalive, which drops a connection whose peer does not
// answer transport pings. A command that fails is just that command's
// error.
//
// A registration, a notice or a bulk call that is malformed ends that
// worker's stream (it is then dead to the head); the server goes on
// serving everyone else.
//
// Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_CONTROL_CHANNEL_H_
#define CAUSEWAY_TRANSPORT_GRPC_CONTROL_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_stream_writer.h"
#include "causeway/transport/key_value_store.h"
#include "causeway/transport/proto/worker.grpc.pb.h"
#include "causeway/transport/topology.h"
#include "causeway/transport/wire_convert.h"

namespace causeway::transport {

// What a worker says about itself when it registers.
struct WorkerHello {
  IslandId island;
  HostSpec spec;  // Its devices: count, kind, memory each.
  std::string data_plane_address;
  uint64_t incarnation = 0;  // Fresh at every worker start.
  std::string name;          // For status and logs: "hostname pid 123".
};

// What the head makes of it.
struct WorkerAdmission {
  HostId host;                      // New for every incarnation.
  std::vector<DeviceInfo> devices;  // The host's, in order.
};

// The head's side of membership, as the worker server needs it. The head
// process implements it over the head. A worker joins in two steps:
// AdmitWorker gives it its ids (sent to the worker as the first message on
// its stream), then ActivateWorker hands the head its channel, through
// which the head may call it from then on.
class WorkerMembership {
 public:
  virtual ~WorkerMembership() = default;
  // A worker registered. The refusal's status goes back to the worker,
  // which then exits.
  virtual absl::StatusOr<WorkerAdmission> AdmitWorker(
      const WorkerHello& hello) = 0;
  // The admitted worker `host` is reached through `channel`. An error ends
  // its stream.
  virtual absl::Status ActivateWorker(
      HostId host, std::shared_ptr<ControlChannel> channel) = 0;
  // Where the worker's notices go, OnWorkerDisconnected included: when a
  // stream ends the worker is gone for good (one that comes back registers
  // as a new host).
  virtual WorkerListener& listener() = 0;
};

struct GrpcWorkerServerOptions {
  WireLimits limits;
  // Told to workers; the head's own heartbeats set the pace.
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  // The store the workers' kv requests reach (the Gloo rendezvous); not
  // owned, must outlive the server. Null: kv requests are answered
  // Unimplemented.
  KeyValueStore* key_value_store = nullptr;
  // The longest a worker's Get may wait for its key.
  absl::Duration max_kv_wait = absl::Minutes(10);
  // Bytes of commands queued for one worker and not yet written to its
  // stream (dispatches counted by an estimate per op): a worker that does
  // not read its stream is cut off past this (its stream ends
  // RESOURCE_EXHAUSTED naming the limit, and the head treats it as gone)
  // instead of the head's memory growing. 0: no bound.
  int64_t max_queued_bytes_per_worker = int64_t{256} << 20;
};

// The head's control channel to one worker, over the stream the worker
// dialled. Calls on a worker whose stream ended fail with Unavailable (the
// fire-and-forget ones are dropped).
class GrpcControlChannel final : public ControlChannel {
 public:
  // `start_write` starts writing one command on the stream (false when it
  // is ending: nothing was started); the command stays alive until the
  // stream reports the write over through WriteDone, and no other write
  // starts before. Past `max_queued_bytes` of commands waiting to be
  // written (0: no bound), nothing more is sent and `on_overflow` runs
  // once, on the sending thread (it must not block).
  GrpcControlChannel(std::string name, const WireLimits& limits,
                     std::function<bool(const wire::HeadToWorker&)> start_write,
                     int64_t max_queued_bytes = 0,
                     std::function<void()> on_overflow = nullptr);
  ~GrpcControlChannel() override;

  // Commands went over `max_queued_bytes`: the worker is cut off.
  bool overflowed() const { return writer_->overflowed(); }
  // The stream's: the write in progress is over (`ok`: taken); the next
  // starts on this thread.
  void WriteDone(bool ok);

  // What the writer queues: a dispatch (or a release, which travels as
  // one), made into its message when its write starts, or any other
  // command, ready.
  using Outgoing = std::variant<WorkerBatch, wire::HeadToWorker>;

  HostId host() const;
  const std::string& name() const { return name_; }

  Future<> LoadProgram(LoadProgramRequest request) override;
  void UnloadProgram(ProgramId program) override;
  void Dispatch(WorkerBatch batch) override;
  Future<> PutBuffer(PutBufferRequest request) override;
  Future<> AwaitBuffers(std::vector<DeviceBuffer> buffers) override;
  Future<hlo::Literal> FetchBuffer(DeviceBuffer buffer) override;
  void ReleaseBuffers(std::vector<DeviceBuffer> buffers) override;
  void PeerLost(HostId host, absl::Status status) override;
  void FailBuffers(std::vector<UndeliveredPiece> pieces) override;
  void CancelSession(SessionId session, absl::Status status) override;
  void UpdateMembership(MembershipUpdate update) override;
  Future<> Heartbeat() override;
  Future<WorkerStatus> GetStatus() override;

  // The head's clock minus the worker's, from the heartbeat with the
  // shortest round trip of the last few (zero before the first answer).
  absl::Duration clock_offset() const;

 private:
  friend class GrpcWorkerServer;
  using Pending = absl::AnyInvocable<void(const absl::Status& status,
                                          const wire::Reply* reply) &&>;

  void set_host(HostId host);
  // Sends a command without an answer.
  void Send(wire::HeadToWorker command);
  // Sends a command whose answer (or the stream's end) calls `pending`.
  void Call(wire::HeadToWorker command, Pending pending);
  template <typename T, typename Extract>
  Future<T> CallFor(wire::HeadToWorker command, Extract extract);
  absl::Status GoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // From the stream and the bulk calls (the server).
  void OnReply(uint64_t id, const wire::Reply& reply);
  void OnPong(const wire::Pong& pong);
  absl::StatusOr<hlo::Literal> TakeUpload(uint64_t command);
  // The pending fetch `command` gets its value (or error).
  absl::Status DeliverFetch(uint64_t command,
                            absl::StatusOr<hlo::Literal> value);
  bool ExpectsFetch(uint64_t command) const;
  // The stream ended: everything pending fails with `why`.
  void Disconnect(const absl::Status& why);
  // Answers the worker's kv request `id`.
  void SendKvReply(uint64_t id, const absl::StatusOr<std::string>& result);

  const std::string name_;
  const WireLimits limits_;
  std::unique_ptr<StreamWriter<Outgoing>> writer_;

  mutable absl::Mutex mu_;
  HostId host_ ABSL_GUARDED_BY(mu_);
  absl::Status gone_ ABSL_GUARDED_BY(mu_);  // Set once the stream ended.
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, hlo::Literal> uploads_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Promise<hlo::Literal>> fetches_ ABSL_GUARDED_BY(mu_);
  // Clock samples of recent pongs: (round trip, offset).
  std::deque<std::pair<absl::Duration, absl::Duration>> clock_samples_
      ABSL_GUARDED_BY(mu_);
};

// Serves the Worker streams and the workers' bulk calls.
//
// A Worker stream runs on gRPC's callback API: its reads complete on
// gRPC's own few threads, whatever the number of workers, and its notices
// are handled there (they take the head's locks, never wait on the
// network). A synchronous stream held a thread in Read per worker, and at
// 128 hosts and more waking the right one of hundreds of threads for each
// message cost the head more per host the more hosts there were
// (docs/sim_devices.md). Each channel's writer (StreamWriter)
// has no thread: the thread that sends a command starts its write when
// none is in progress, and the write's OnWriteDone starts the next.
class GrpcWorkerServer final
    : public wire::HeadWorkers::WithCallbackMethod_Worker<
          wire::HeadWorkers::Service> {
 public:
  // `membership` and `auth` must outlive the server.
  GrpcWorkerServer(WorkerMembership* membership, const TokenCheck* auth,
                   GrpcWorkerServerOptions options);
  ~GrpcWorkerServer() override;

  // Ends every worker's stream and refuses new ones. Idempotent.
  void Shutdown();
  int64_t num_workers() const;

  grpc::Status GetVersion(grpc::ServerContext* context,
                          const wire::VersionRequest* request,
                          wire::VersionResponse* response) override;
  grpc::ServerBidiReactor<wire::WorkerToHead, wire::HeadToWorker>* Worker(
      grpc::CallbackServerContext* context) override;
  grpc::Status PullShard(grpc::ServerContext* context,
                         const wire::ShardRef* request,
                         grpc::ServerWriter<wire::ShardData>* writer) override;
  grpc::Status PushShard(grpc::ServerContext* context,
                         grpc::ServerReader<wire::ShardData>* reader,
                         wire::PushShardResponse* response) override;

 private:
  class WorkerStream;
  struct Connection {
    HostId host;
    uint64_t incarnation = 0;
    std::shared_ptr<GrpcControlChannel> channel;
    grpc::CallbackServerContext* context = nullptr;
  };

  // A worker's first message: admits the worker, lists it and hands the
  // head its channel. The connection of an admitted worker, with
  // `*refused` set if its stream must end at once (activation refused,
  // the head shutting down); an error if it was not admitted.
  absl::StatusOr<Connection> Register(grpc::CallbackServerContext* context,
                                      const wire::WorkerToHead& first,
                                      WorkerStream* stream,
                                      absl::Status* refused);
  // The stream of `connection` is ending: FindChannel and Shutdown no
  // longer see it (its context lives until the stream is done).
  void Unlist(const Connection& connection);

  // The channel of the live worker `host` of `incarnation`; NotFound
  // otherwise (a stale incarnation reads like an unknown host).
  absl::StatusOr<std::shared_ptr<GrpcControlChannel>> FindChannel(
      int64_t host, uint64_t incarnation) const;
  // Handles one notice; an error ends the worker's stream.
  // `trace_names`: the names of the connection's trace events so far.
  absl::Status HandleNotice(const Connection& connection,
                            NameDecoder& trace_names,
                            const wire::WorkerToHead& notice);
  // Serves a kv request; a malformed one is answered with the error (the
  // stream goes on).
  void HandleKv(const Connection& connection, const wire::KvRequest& request);

  WorkerMembership* const membership_;
  const TokenCheck* const auth_;
  const GrpcWorkerServerOptions options_;

  mutable absl::Mutex mu_;
  std::map<HostId, Connection> workers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_CONTROL_CHANNEL_H_
