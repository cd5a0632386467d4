#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_control_channel.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/executor.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/grpc_reactor_writes.h"

namespace causeway::transport {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

absl::Status ReplyStatus(const wire::Reply& reply, const WireLimits& limits) {
  absl::Status status;
  absl::Status malformed = StatusFromWire(
      reply.status(), limits, FieldPath("WorkerToHead.reply.status"), &status);
  return malformed.ok() ? status : malformed;
}

absl::StatusOr<WorkerHello> HelloFromWire(const wire::Register& message,
                                          const WireLimits& limits) {
  const FieldPath path("WorkerToHead.registration");
  WorkerHello hello;
  if (message.island() < 0 || message.island() >= Topology::kMaxIslands) {
    return path.Field("island").Invalid(absl::StrCat(
        message.island(), " is not in [0, ", Topology::kMaxIslands, ")"));
  }
  hello.island = IslandId(message.island());
  if (message.num_devices() < 1 ||
      message.num_devices() > Topology::kMaxDevices) {
    return path.Field("num_devices")
        .Invalid(absl::StrCat(message.num_devices(), " is not in [1, ",
                              Topology::kMaxDevices, "]"));
  }
  hello.spec.num_devices = message.num_devices();
  CW_ASSIGN_OR_RETURN(hello.spec.kind,
                      StringFromWire(message.device_kind(), 64,
                                     path.Field("device_kind")));
  if (hello.spec.kind.empty()) {
    return path.Field("device_kind").Invalid("empty");
  }
  if (message.memory_per_device() <= 0) {
    return path.Field("memory_per_device")
        .Invalid(absl::StrCat(message.memory_per_device(),
                              " is not positive"));
  }
  hello.spec.memory_per_device = message.memory_per_device();
  CW_ASSIGN_OR_RETURN(hello.data_plane_address,
                      StringFromWire(message.data_plane_address(), 1024,
                                     path.Field("data_plane_address")));
  if (message.incarnation() == 0) {
    return path.Field("incarnation").Invalid("must be nonzero");
  }
  hello.incarnation = message.incarnation();
  CW_ASSIGN_OR_RETURN(hello.name, StringFromWire(message.name(), 1024,
                                                 path.Field("name")));
  return hello;
}

}  // namespace

// --- GrpcControlChannel. ---

namespace {

template <typename T>
void MoveAppend(std::vector<T>& from, std::vector<T>& to) {
  if (to.empty()) {
    to = std::move(from);
    return;
  }
  to.insert(to.end(), std::make_move_iterator(from.begin()),
            std::make_move_iterator(from.end()));
}

// Dispatches (and releases, which travel as dispatches) queued one behind
// the other go as one message. A worker handles a batch's receives, then
// launches, then sends, then releases, so merging keeps every launch and
// send in order and only delays releases (never frees a buffer early).
bool MergeCommands(GrpcControlChannel::Outgoing& into,
                   GrpcControlChannel::Outgoing& next) {
  WorkerBatch* to = std::get_if<WorkerBatch>(&into);
  WorkerBatch* from = std::get_if<WorkerBatch>(&next);
  if (to == nullptr || from == nullptr) return false;
  MoveAppend(from->receives, to->receives);
  MoveAppend(from->launches, to->launches);
  MoveAppend(from->sends, to->sends);
  MoveAppend(from->releases, to->releases);
  return true;
}

}  // namespace

GrpcControlChannel::GrpcControlChannel(
    std::string name, const WireLimits& limits,
    std::function<bool(const wire::HeadToWorker&)> start_write,
    int64_t max_queued_bytes, std::function<void()> on_overflow)
    : name_(std::move(name)), limits_(limits) {
  StreamWriter<Outgoing>::Options options;
  options.max_queued_bytes = max_queued_bytes;
  options.on_overflow = std::move(on_overflow);
  // A command's serialized size; a dispatch's estimated (it is serialized
  // only when written): a fixed cost per op.
  options.size = [](const Outgoing& outgoing) -> int64_t {
    if (const auto* command = std::get_if<wire::HeadToWorker>(&outgoing)) {
      return static_cast<int64_t>(command->ByteSizeLong());
    }
    const WorkerBatch& batch = std::get<WorkerBatch>(outgoing);
    constexpr int64_t kBytesPerOp = 256;
    return kBytesPerOp *
           static_cast<int64_t>(1 + batch.receives.size() +
                                batch.launches.size() + batch.sends.size() +
                                batch.releases.size());
  };
  // By one thread at a time (the one whose turn it is to write): a
  // dispatch becomes its message here, in a reused arena (no malloc per
  // field, one reset to drop it; the message lives until the next write
  // starts, after this one is done), and its names are numbered in the
  // order the worker reads them.
  options.start = [start_write = std::move(start_write),
                   names = std::make_shared<NameEncoder>(),
                   arena = std::make_shared<
                       ReusedArenaMessage<wire::HeadToWorker>>()](
                      const Outgoing& outgoing) {
    if (const auto* command = std::get_if<wire::HeadToWorker>(&outgoing)) {
      return start_write(*command);
    }
    wire::HeadToWorker* message = arena->Next();
    ToWire(std::get<WorkerBatch>(outgoing), *names,
           message->mutable_dispatch());
    return start_write(*message);
  };
  options.merge = MergeCommands;
  writer_ = std::make_unique<StreamWriter<Outgoing>>(std::move(options));
}

GrpcControlChannel::~GrpcControlChannel() {
  Disconnect(absl::UnavailableError(
      absl::StrCat("the channel to ", name_, " is gone")));
}

HostId GrpcControlChannel::host() const {
  absl::MutexLock lock(&mu_);
  return host_;
}

void GrpcControlChannel::set_host(HostId host) {
  absl::MutexLock lock(&mu_);
  host_ = host;
}

absl::Status GrpcControlChannel::GoneLocked() const {
  return gone_;
}

void GrpcControlChannel::WriteDone(bool ok) { writer_->WriteDone(ok); }

void GrpcControlChannel::Send(wire::HeadToWorker command) {
  writer_->Send(Outgoing(std::move(command)));
}

void GrpcControlChannel::Call(wire::HeadToWorker command, Pending pending) {
  absl::Status gone;
  {
    absl::MutexLock lock(&mu_);
    gone = GoneLocked();
    if (gone.ok()) {
      const uint64_t id = next_id_++;
      command.set_id(id);
      pending_.emplace(id, std::move(pending));
      if (!writer_->Send(Outgoing(std::move(command)))) {
        // The stream is breaking; Disconnect fails what is pending.
        return;
      }
      return;
    }
  }
  std::move(pending)(gone, nullptr);
}

template <typename T, typename Extract>
Future<T> GrpcControlChannel::CallFor(wire::HeadToWorker command,
                                      Extract extract) {
  PromiseAndFuture<T> pair = MakePromise<T>();
  Call(std::move(command),
       [promise = std::move(pair.promise), extract = std::move(extract)](
           const absl::Status& status, const wire::Reply* reply) mutable {
         if (!status.ok()) return promise.Set(status);
         promise.Set(extract(*reply));
       });
  return std::move(pair.future);
}

Future<> GrpcControlChannel::LoadProgram(LoadProgramRequest request) {
  wire::HeadToWorker command;
  ToWire(request, command.mutable_load_program());
  return CallFor<void>(std::move(command),
                       [](const wire::Reply&) { return absl::OkStatus(); });
}

void GrpcControlChannel::UnloadProgram(ProgramId program) {
  wire::HeadToWorker command;
  command.mutable_unload_program()->set_program(program.value());
  Send(std::move(command));
}

void GrpcControlChannel::Dispatch(WorkerBatch batch) {
  writer_->Send(Outgoing(std::move(batch)));
}

Future<> GrpcControlChannel::PutBuffer(PutBufferRequest request) {
  if (!request.value.shape().IsArray()) {
    return MakeErrorFuture(absl::InvalidArgumentError(absl::StrCat(
        "PutBuffer takes an array value, not ",
        request.value.shape().ToString())));
  }
  wire::HeadToWorker command;
  wire::PutBuffer* put = command.mutable_put_buffer();
  put->set_device(request.device.value());
  ToWire(request.buffer, put->mutable_buffer());
  ToWire(request.value.shape(), put->mutable_shape());
  PromiseAndFuture<> pair = MakePromise();
  absl::Status gone;
  {
    absl::MutexLock lock(&mu_);
    gone = GoneLocked();
    if (gone.ok()) {
      const uint64_t id = next_id_++;
      command.set_id(id);
      uploads_.emplace(id, std::move(request.value));
      pending_.emplace(
          id, [this, id, promise = std::move(pair.promise)](
                  const absl::Status& status, const wire::Reply*) mutable {
            {
              absl::MutexLock lock(&mu_);
              uploads_.erase(id);  // Unpulled when the put failed.
            }
            promise.Set(status);
          });
      writer_->Send(Outgoing(std::move(command)));
    }
  }
  if (!gone.ok()) return MakeErrorFuture(gone);
  return std::move(pair.future);
}

Future<> GrpcControlChannel::AwaitBuffers(std::vector<DeviceBuffer> buffers) {
  wire::HeadToWorker command;
  for (const DeviceBuffer& buffer : buffers) {
    ToWire(buffer, command.mutable_await_buffers()->add_buffers());
  }
  return CallFor<void>(std::move(command),
                       [](const wire::Reply&) { return absl::OkStatus(); });
}

Future<hlo::Literal> GrpcControlChannel::FetchBuffer(DeviceBuffer buffer) {
  wire::HeadToWorker command;
  ToWire(buffer, command.mutable_fetch_buffer());
  PromiseAndFuture<hlo::Literal> pair = MakePromise<hlo::Literal>();
  absl::Status gone;
  {
    absl::MutexLock lock(&mu_);
    gone = GoneLocked();
    if (gone.ok()) {
      const uint64_t id = next_id_++;
      command.set_id(id);
      fetches_.emplace(id, std::move(pair.promise));
      // A small value comes in the answer; a larger one on PushShard, and
      // then the stream answers only a failure.
      pending_.emplace(id, [this, id](const absl::Status& status,
                                      const wire::Reply* reply) mutable {
        if (!status.ok()) {
          DeliverFetch(id, status).IgnoreError();
        } else if (reply != nullptr && reply->has_value()) {
          DeliverFetch(id, FromWire(reply->value(), limits_,
                                    FieldPath("Reply").Field("value")))
              .IgnoreError();
        } else {
          DeliverFetch(id, absl::InternalError("the worker answered a fetch "
                                               "without its value"))
              .IgnoreError();
        }
      });
      writer_->Send(Outgoing(std::move(command)));
    }
  }
  if (!gone.ok()) return MakeErrorFuture<hlo::Literal>(gone);
  return std::move(pair.future);
}

void GrpcControlChannel::ReleaseBuffers(std::vector<DeviceBuffer> buffers) {
  WorkerBatch batch;
  batch.releases = std::move(buffers);
  Dispatch(std::move(batch));
}

void GrpcControlChannel::PeerLost(HostId host, absl::Status status) {
  wire::HeadToWorker command;
  command.mutable_peer_lost()->set_host(host.value());
  ToWire(status, command.mutable_peer_lost()->mutable_status());
  Send(std::move(command));
}

void GrpcControlChannel::FailBuffers(std::vector<UndeliveredPiece> pieces) {
  wire::HeadToWorker command;
  for (const UndeliveredPiece& piece : pieces) {
    ToWire(piece, command.mutable_fail_buffers()->add_pieces());
  }
  Send(std::move(command));
}

void GrpcControlChannel::SendKvReply(
    uint64_t id, const absl::StatusOr<std::string>& result) {
  wire::HeadToWorker command;
  wire::KvReply* reply = command.mutable_kv_reply();
  reply->set_id(id);
  if (result.ok()) {
    reply->set_value(*result);
  } else {
    ToWire(result.status(), reply->mutable_status());
  }
  Send(std::move(command));
}

void GrpcControlChannel::CancelSession(SessionId session,
                                       absl::Status status) {
  wire::HeadToWorker command;
  command.mutable_cancel_session()->set_session(session.value());
  ToWire(status, command.mutable_cancel_session()->mutable_status());
  Send(std::move(command));
}

void GrpcControlChannel::UpdateMembership(MembershipUpdate update) {
  wire::HeadToWorker command;
  ToWire(update, command.mutable_membership());
  Send(std::move(command));
}

Future<> GrpcControlChannel::Heartbeat() {
  wire::HeadToWorker command;
  command.mutable_ping()->set_head_time_us(NowMicros());
  return CallFor<void>(std::move(command),
                       [](const wire::Reply&) { return absl::OkStatus(); });
}

Future<WorkerStatus> GrpcControlChannel::GetStatus() {
  wire::HeadToWorker command;
  command.mutable_get_status();
  const WireLimits& limits = limits_;
  return CallFor<WorkerStatus>(
      std::move(command), [&limits](const wire::Reply& reply) {
        return FromWire(reply.worker_status(), limits,
                        FieldPath("WorkerToHead.reply.worker_status"));
      });
}

void GrpcControlChannel::OnReply(uint64_t id, const wire::Reply& reply) {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // Answered already (a fetch).
    pending = std::move(it->second);
    pending_.erase(it);
  }
  std::move(pending)(ReplyStatus(reply, limits_), &reply);
}

void GrpcControlChannel::OnPong(const wire::Pong& pong) {
  const absl::Time now = absl::Now();
  const absl::Time sent = absl::FromUnixMicros(pong.head_time_us());
  const absl::Time answered = absl::FromUnixMicros(pong.worker_time_us());
  if (sent <= now) {
    // The worker answered halfway through the round trip, give or take.
    const absl::Duration round_trip = now - sent;
    const absl::Duration offset = (sent + round_trip / 2) - answered;
    absl::MutexLock lock(&mu_);
    clock_samples_.emplace_back(round_trip, offset);
    if (clock_samples_.size() > 16) clock_samples_.pop_front();
  }
  wire::Reply ok;
  OnReply(pong.seq(), ok);
}

absl::Duration GrpcControlChannel::clock_offset() const {
  absl::MutexLock lock(&mu_);
  if (clock_samples_.empty()) return absl::ZeroDuration();
  auto best = clock_samples_.begin();
  for (auto it = clock_samples_.begin(); it != clock_samples_.end(); ++it) {
    if (it->first < best->first) best = it;
  }
  return best->second;
}

absl::StatusOr<hlo::Literal> GrpcControlChannel::TakeUpload(uint64_t command) {
  absl::MutexLock lock(&mu_);
  auto it = uploads_.find(command);
  if (it == uploads_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no value waits for put_buffer command ", command));
  }
  hlo::Literal value = std::move(it->second);
  uploads_.erase(it);
  return value;
}

bool GrpcControlChannel::ExpectsFetch(uint64_t command) const {
  absl::MutexLock lock(&mu_);
  return fetches_.contains(command);
}

absl::Status GrpcControlChannel::DeliverFetch(
    uint64_t command, absl::StatusOr<hlo::Literal> value) {
  std::optional<Promise<hlo::Literal>> promise;
  {
    absl::MutexLock lock(&mu_);
    auto it = fetches_.find(command);
    if (it == fetches_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no fetch_buffer command ", command, " is waiting"));
    }
    promise.emplace(std::move(it->second));
    fetches_.erase(it);
    pending_.erase(command);
  }
  promise->Set(std::move(value));
  return absl::OkStatus();
}

void GrpcControlChannel::Disconnect(const absl::Status& why) {
  std::map<uint64_t, Pending> pending;
  std::map<uint64_t, Promise<hlo::Literal>> fetches;
  {
    absl::MutexLock lock(&mu_);
    if (!gone_.ok()) return;
    gone_ = why;
    pending.swap(pending_);
    fetches.swap(fetches_);
    uploads_.clear();
  }
  writer_->Close(/*drain=*/false);
  for (auto& [id, promise] : fetches) promise.Set(why);
  for (auto& [id, callback] : pending) {
    // A fetch's entry was failed through its promise above.
    std::move(callback)(why, nullptr);
  }
}

// --- GrpcWorkerServer. ---

GrpcWorkerServer::GrpcWorkerServer(WorkerMembership* membership,
                                   const TokenCheck* auth,
                                   GrpcWorkerServerOptions options)
    : membership_(membership), auth_(auth), options_(std::move(options)) {}

GrpcWorkerServer::~GrpcWorkerServer() { Shutdown(); }

void GrpcWorkerServer::Shutdown() {
  // Cancelled under the lock: a handler erases its entry under it before
  // it returns and its context dies, so every context still listed is
  // alive (copied out and cancelled after the lock, one could be gone:
  // "pure virtual method called"). TryCancel only marks the call; it runs
  // nothing of ours.
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [host, connection] : workers_) connection.context->TryCancel();
}

int64_t GrpcWorkerServer::num_workers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(workers_.size());
}

absl::StatusOr<std::shared_ptr<GrpcControlChannel>>
GrpcWorkerServer::FindChannel(int64_t host, uint64_t incarnation) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(HostId(host));
  if (it == workers_.end() || it->second.incarnation != incarnation) {
    return absl::NotFoundError(absl::StrCat(
        "no live worker host ", host, " of incarnation ", incarnation));
  }
  return it->second.channel;
}

grpc::Status GrpcWorkerServer::GetVersion(grpc::ServerContext* context,
                                          const wire::VersionRequest* request,
                                          wire::VersionResponse* response) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  absl::StatusOr<uint32_t> version =
      ChooseProtocolVersion(kWorkerProtocol, request->min_version(),
                            request->max_version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  response->set_version(*version);
  return grpc::Status::OK;
}

// One worker's stream. Its reactions (OnReadDone, OnWriteDone) run on
// gRPC's threads; OnDone runs last, after every other, and deletes
// it. Reads go one at a time: the next starts once a notice is handled.
//
// Writes are started by the channel's writer through Writes (ReactorWrites),
// on the thread that sent the command or, when one was in progress, on the
// thread of its OnWriteDone, which hands the channel the next
// (GrpcControlChannel::WriteDone). The stream finishes only with no write
// in progress, so by OnDone no write is in progress or can start.
class GrpcWorkerServer::WorkerStream final
    : public grpc::ServerBidiReactor<wire::WorkerToHead, wire::HeadToWorker> {
 public:
  // What the channel's writer shares with the stream; outlives it.
  using Writes =
      ReactorWrites<wire::WorkerToHead, wire::HeadToWorker, GrpcControlChannel>;

  WorkerStream(GrpcWorkerServer* server, grpc::CallbackServerContext* context)
      : server_(server),
        context_(context),
        writes_(std::make_shared<Writes>(this)) {
    if (grpc::Status denied = server_->auth_->Check(*context); !denied.ok()) {
      End(denied);
      return;
    }
    StartRead(&first_);
  }

  const std::shared_ptr<Writes>& writes() const { return writes_; }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (connection_.has_value() && connection_->channel->overflowed()) {
        // Cancelled by the channel: commands for it piled up unwritten.
        End(ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
            "more than ", server_->options_.max_queued_bytes_per_worker,
            " bytes of commands waited to be written to ",
            connection_->channel->name(), " (host ",
            connection_->host.value(),
            "; head flag --max-worker-queue-bytes): it does not read its "
            "stream, and is cut off"))));
        return;
      }
      // Read fails alike for a worker that half-closed, one whose message
      // does not parse, and one that is gone.
      End(ToGrpcStatus(absl::UnavailableError(absl::StrCat(
          "the stream of ",
          connection_ ? absl::StrCat(connection_->channel->name(), " (host ",
                                     connection_->host.value(), ")")
                      : std::string("a worker that never registered"),
          " ended",
          context_->IsCancelled()
              ? " (cancelled)"
              : ": the worker closed it, or sent a message that does not "
                "parse"))));
      return;
    }
    if (!connection_.has_value()) {
      absl::Status refused;
      absl::StatusOr<Connection> connection =
          server_->Register(context_, first_, this, &refused);
      if (connection.ok()) connection_ = *std::move(connection);
      if (!connection.ok() || !refused.ok()) {
        End(ToGrpcStatus(connection.ok() ? refused : connection.status()));
        return;
      }
    } else if (absl::Status handled =
                   server_->HandleNotice(*connection_, trace_names_, *notice_);
               !handled.ok()) {
      End(ToGrpcStatus(handled));
      return;
    }
    notice_ = notices_.Next();
    StartRead(notice_);
  }

  void OnWriteDone(bool ok) override {
    // Otherwise the channel's next write starts here, on this thread (a
    // failed one breaks its writer: the stream is ending, its read fails
    // too).
    if (std::optional<grpc::Status> finish = writes_->WriteDone(ok)) {
      Finish(*std::move(finish));
    }
  }

  void OnDone() override {
    if (connection_.has_value()) {
      const absl::Status ended = FromGrpcStatus(ended_);
      CW_LOG(WARNING) << connection_->channel->name() << " (host "
                      << connection_->host.value() << ") is gone: " << ended;
      // The head first, then the calls still waiting on the channel: by
      // the time they fail, the host is dead, so a fetch in flight reads
      // as DATA_LOSS (what it held is gone), not as a call that may be
      // retried.
      server_->membership_->listener().OnWorkerDisconnected(connection_->host,
                                                            ended);
      connection_->channel->Disconnect(ended);
    }
    delete this;
  }

 private:
  // Ends the stream with `why` (never OK: the head ends a worker's stream
  // only when something failed). From the constructor or a read: a
  // cancelled call fails its read in progress, so that is where a
  // cancellation ends it too.
  void End(grpc::Status why) {
    ended_ = why;
    if (connection_.has_value()) server_->Unlist(*connection_);
    // Otherwise OnWriteDone finishes it once gRPC has taken the write in
    // progress, or failed it (a peer that is gone fails it, by keepalive;
    // so does a cancel).
    if (writes_->FinishWhenIdle(std::move(why))) Finish(ended_);
  }

  GrpcWorkerServer* const server_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Writes> writes_;
  // Touched by the reads, which go one at a time, and by OnDone, after
  // every other reaction.
  std::optional<Connection> connection_;
  wire::WorkerToHead first_;
  ReusedArenaMessage<wire::WorkerToHead> notices_;
  wire::WorkerToHead* notice_ = nullptr;
  NameDecoder trace_names_;  // The names of this worker's trace events.
  grpc::Status ended_;  // Written by End; read in OnDone.
};

grpc::ServerBidiReactor<wire::WorkerToHead, wire::HeadToWorker>*
GrpcWorkerServer::Worker(grpc::CallbackServerContext* context) {
  return new WorkerStream(this, context);
}

absl::StatusOr<GrpcWorkerServer::Connection> GrpcWorkerServer::Register(
    grpc::CallbackServerContext* context, const wire::WorkerToHead& first,
    WorkerStream* stream, absl::Status* refused) {
  if (!first.has_registration()) {
    return absl::InvalidArgumentError(
        "WorkerToHead: the first message of a worker must be its "
        "registration");
  }
  const uint32_t version = first.registration().version();
  if (!kWorkerProtocol.Contains(version)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "WorkerToHead.registration.version: ", version, " is not one this "
        "head speaks (", kWorkerProtocol.min, "..", kWorkerProtocol.max,
        ")"));
  }
  CW_ASSIGN_OR_RETURN(WorkerHello hello,
                      HelloFromWire(first.registration(), options_.limits));
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::UnavailableError("the head is shutting down");
    }
  }
  auto channel = std::make_shared<GrpcControlChannel>(
      hello.name.empty() ? absl::StrCat("worker ", context->peer())
                         : hello.name,
      options_.limits,
      [writes = stream->writes()](const wire::HeadToWorker& command) {
        return writes->Start(command);
      },
      options_.max_queued_bytes_per_worker,
      // A worker that does not read: its stream is cancelled, its read in
      // progress fails, and the head treats it as gone.
      [context] { context->TryCancel(); });
  stream->writes()->set_writer(channel);
  absl::StatusOr<WorkerAdmission> admission = membership_->AdmitWorker(hello);
  if (!admission.ok()) {
    channel->Disconnect(admission.status());
    return admission.status();
  }
  const HostId host = admission->host;
  channel->set_host(host);
  wire::HeadToWorker registered;
  wire::Registered* reply = registered.mutable_registered();
  reply->set_host(host.value());
  for (const DeviceInfo& device : admission->devices) {
    ToWire(device, reply->add_devices());
  }
  reply->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  Connection connection{host, hello.incarnation, channel, context};
  bool shut_down = false;
  {
    absl::MutexLock lock(&mu_);
    shut_down = shut_down_;
    if (!shut_down) workers_[host] = connection;
  }
  // The first message the worker reads; the head may call it after this.
  channel->Send(std::move(registered));
  *refused = shut_down ? absl::UnavailableError("the head is shutting down")
                       : membership_->ActivateWorker(host, channel);
  return connection;
}

void GrpcWorkerServer::Unlist(const Connection& connection) {
  absl::MutexLock lock(&mu_);
  workers_.erase(connection.host);
}

absl::Status GrpcWorkerServer::HandleNotice(const Connection& connection,
                                            NameDecoder& trace_names,
                                            const wire::WorkerToHead& notice) {
  const WireLimits& limits = options_.limits;
  switch (notice.notice_case()) {
    case wire::WorkerToHead::kReply:
      connection.channel->OnReply(notice.id(), notice.reply());
      return absl::OkStatus();
    case wire::WorkerToHead::kPong:
      connection.channel->OnPong(notice.pong());
      return absl::OkStatus();
    case wire::WorkerToHead::kTrace: {
      int64_t unnamed = 0;
      CW_ASSIGN_OR_RETURN(
          std::vector<trace::EventRecord> records,
          FromWire(notice.trace(), trace_names, limits,
                   FieldPath("WorkerToHead.trace"), &unnamed));
      if (unnamed > 0) {
        CW_LOG(WARNING) << connection.channel->name() << " (host "
                        << connection.host.value() << "): " << unnamed
                        << " trace event(s) left out: they use names the "
                           "worker never defined on its stream";
      }
      membership_->listener().OnTraceEvents(connection.host, std::move(records),
                                            connection.channel->clock_offset());
      return absl::OkStatus();
    }
    case wire::WorkerToHead::kOpDone: {
      const auto& done = notice.op_done().done();
      if (done.size() > limits.max_entries) {
        return FieldPath("WorkerToHead.op_done.done")
            .Invalid(absl::StrCat(done.size(), " entries (at most ",
                                  limits.max_entries, ")"));
      }
      std::vector<OpDone> notices;
      notices.reserve(done.size());
      const FieldPath root("WorkerToHead.op_done");
      for (int i = 0; i < done.size(); ++i) {
        CW_ASSIGN_OR_RETURN(OpDone one,
                            FromWire(done[i], connection.host, limits,
                                     root.Index("done", i)));
        notices.push_back(std::move(one));
      }
      for (const OpDone& one : notices) membership_->listener().OnOpDone(one);
      return absl::OkStatus();
    }
    case wire::WorkerToHead::kRegistration:
      return absl::InvalidArgumentError(
          "WorkerToHead.registration: this worker registered already");
    case wire::WorkerToHead::kPushFailed: {
      CW_ASSIGN_OR_RETURN(
          UndeliveredPiece piece,
          FromWire(notice.push_failed(), limits,
                   FieldPath("WorkerToHead.push_failed")));
      piece.source_host = connection.host;  // Never the message's word.
      membership_->listener().OnPushFailed(piece);
      return absl::OkStatus();
    }
    case wire::WorkerToHead::kKv:
      if (notice.kv().id() == 0) {
        return FieldPath("WorkerToHead.kv.id").Invalid("must be nonzero");
      }
      HandleKv(connection, notice.kv());
      return absl::OkStatus();
    case wire::WorkerToHead::NOTICE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("WorkerToHead: no notice");
}

void GrpcWorkerServer::HandleKv(const Connection& connection,
                                const wire::KvRequest& request) {
  const std::shared_ptr<GrpcControlChannel> channel = connection.channel;
  const uint64_t id = request.id();
  KeyValueStore* store = options_.key_value_store;
  if (store == nullptr) {
    return channel->SendKvReply(
        id, absl::UnimplementedError("this head serves no key-value store"));
  }
  const FieldPath root("WorkerToHead.kv");
  auto bounded = [&](const std::string& text, int64_t max_bytes,
                     const FieldPath& path) -> absl::Status {
    return StringFromWire(text, max_bytes, path).status();
  };
  // Answers once the store has, on whichever thread resolves the store's
  // future (the channel's writer takes it from there).
  auto reply = [channel, id](const auto& result) {
    channel->SendKvReply(id, result);
  };
  switch (request.op_case()) {
    case wire::KvRequest::kSet: {
      const FieldPath path = root.Field("set");
      absl::Status bad = bounded(request.set().key(), KeyValueStore::kMaxKeyBytes,
                                 path.Field("key"));
      if (bad.ok()) {
        bad = bounded(request.set().value(), KeyValueStore::kMaxValueBytes,
                      path.Field("value"));
      }
      if (!bad.ok()) return channel->SendKvReply(id, bad);
      store->Set(request.set().key(), request.set().value())
          .OnReady(InlineExecutor::Instance(),
                   [reply](const absl::Status& status) {
                     reply(status.ok() ? absl::StatusOr<std::string>("")
                                       : absl::StatusOr<std::string>(status));
                   });
      return;
    }
    case wire::KvRequest::kGet: {
      const FieldPath path = root.Field("get");
      absl::Status bad = bounded(request.get().key(), KeyValueStore::kMaxKeyBytes,
                                 path.Field("key"));
      if (bad.ok() && request.get().timeout_ms() < 0) {
        bad = path.Field("timeout_ms").Invalid("is negative");
      }
      if (!bad.ok()) return channel->SendKvReply(id, bad);
      const absl::Duration wait =
          std::min(absl::Milliseconds(request.get().timeout_ms()),
                   options_.max_kv_wait);
      store->Get(request.get().key(), absl::Now() + wait)
          .OnReady(InlineExecutor::Instance(),
                   [reply](const absl::StatusOr<std::string>& value) {
                     reply(value);
                   });
      return;
    }
    case wire::KvRequest::kDeletePrefix: {
      if (absl::Status bad = bounded(request.delete_prefix().prefix(),
                                     KeyValueStore::kMaxKeyBytes,
                                     root.Field("delete_prefix").Field("prefix"));
          !bad.ok()) {
        return channel->SendKvReply(id, bad);
      }
      store->DeletePrefix(request.delete_prefix().prefix())
          .OnReady(InlineExecutor::Instance(),
                   [reply](const absl::Status& status) {
                     reply(status.ok() ? absl::StatusOr<std::string>("")
                                       : absl::StatusOr<std::string>(status));
                   });
      return;
    }
    case wire::KvRequest::OP_NOT_SET:
      break;
  }
  channel->SendKvReply(id, root.Invalid("no operation"));
}

grpc::Status GrpcWorkerServer::PullShard(
    grpc::ServerContext* context, const wire::ShardRef* request,
    grpc::ServerWriter<wire::ShardData>* writer) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  absl::StatusOr<std::shared_ptr<GrpcControlChannel>> channel =
      FindChannel(request->host(), request->incarnation());
  if (!channel.ok()) return ToGrpcStatus(channel.status());
  absl::StatusOr<hlo::Literal> value =
      (*channel)->TakeUpload(request->command());
  if (!value.ok()) return ToGrpcStatus(value.status());
  wire::ShardData message;
  *message.mutable_header()->mutable_value() = ValueHeaderOf(*value);
  if (!WriteValueStream(*writer, message, *value)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the pull broke");
  }
  return grpc::Status::OK;
}

grpc::Status GrpcWorkerServer::PushShard(
    grpc::ServerContext* context, grpc::ServerReader<wire::ShardData>* reader,
    wire::PushShardResponse* response) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  wire::ShardData message;
  if (!reader->Read(&message) || !message.has_header()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "ShardData: the first message of a push must be the header"));
  }
  const wire::ShardHeader& header = message.header();
  absl::StatusOr<std::shared_ptr<GrpcControlChannel>> channel =
      FindChannel(header.host(), header.incarnation());
  if (!channel.ok()) return ToGrpcStatus(channel.status());
  const uint64_t command = header.command();
  if (!(*channel)->ExpectsFetch(command)) {
    return ToGrpcStatus(absl::NotFoundError(
        absl::StrCat("no fetch_buffer command ", command, " is waiting")));
  }
  absl::StatusOr<ValueAssembler> assembler = ValueAssembler::Create(
      header.value(), options_.limits, FieldPath("ShardData.header.value"));
  absl::Status status = assembler.status();
  while (status.ok() && reader->Read(&message)) {
    status = message.has_chunk()
                 ? assembler->Append(message.chunk().data())
                 : absl::InvalidArgumentError(
                       "ShardData: a header after the first message");
  }
  if (status.ok() && context->IsCancelled()) {
    status = absl::DataLossError("the push was cut off");
  }
  absl::StatusOr<hlo::Literal> value =
      status.ok() ? std::move(*assembler).Finish()
                  : absl::StatusOr<hlo::Literal>(status);
  status = value.status();
  (*channel)->DeliverFetch(command, std::move(value)).IgnoreError();
  return ToGrpcStatus(status);
}

}  // namespace causeway::transport
