#include "causeway/transport/grpc_worker_agent.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/grpc_reactor_writes.h"
#include "causeway/transport/tls_probe.h"

namespace causeway::transport {
namespace {

absl::Status WithContext(const absl::Status& status, const std::string& what) {
  return absl::Status(status.code(),
                      absl::StrCat(what, ": ", status.message()));
}

// Runs `call`, a blocking call under `context`, and cancels the context
// once `timeout` has passed or `stopped` says so (asked every 50 ms).
// Whether it was cancelled because of `stopped`.
bool CallUntilStopped(grpc::ClientContext& context, absl::Duration timeout,
                      const std::function<bool()>& stopped,
                      const std::function<void()>& call) {
  absl::Notification done;
  bool stop = false;
  std::thread watchdog([&] {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done.WaitForNotificationWithTimeout(
        std::min(absl::Milliseconds(50), deadline - absl::Now()))) {
      if (stopped && stopped()) {
        stop = true;
        context.TryCancel();
        return;
      }
      if (absl::Now() >= deadline) {
        context.TryCancel();
        return;
      }
    }
  });
  call();
  done.Notify();
  watchdog.join();
  return stop;
}

}  // namespace

// The stream to the head, on gRPC's callback API. Its first read is the
// registration's answer (Register waits for it); Serve then reads the
// commands, each handed to the agent on gRPC's thread that read it. Writes
// are the writer's, started by the thread that sends (ClientReactorWrites:
// the call stays open while one may start). OnDone keeps the call's status.
class GrpcWorkerAgent::Stream final
    : public grpc::ClientBidiReactor<wire::WorkerToHead, wire::HeadToWorker> {
 public:
  explicit Stream(GrpcWorkerAgent* agent) : agent_(agent), writes_(this) {}

  // Starts the call, and the read of the registration's answer.
  void Begin() {
    agent_->control_->async()->Worker(&agent_->context_, this);
    writes_.Hold();
    StartRead(&answer_);
    StartCall();
  }

  // The writer's `start`.
  bool Start(const wire::WorkerToHead& notice) { return writes_.Start(notice); }

  // Blocks until the registration's answer was read, or the stream ended
  // first (then answered() stays false).
  void AwaitFirstRead() { first_read_.WaitForNotification(); }
  bool answered() const { return answered_; }        // After the first read.
  const wire::HeadToWorker& answer() const { return answer_; }

  // From now on reads the commands, for `worker`. Once.
  void ReadCommands(WorkerService* worker) {
    worker_ = worker;
    StartRead(command_.get());
  }
  void AwaitReadsOver() { reads_over_.WaitForNotification(); }

  // Gives up on the call (a failed registration, a worker never served):
  // cancelled, and no write starts.
  void Abandon() {
    agent_->context_.TryCancel();
    writes_.Stop();
  }

  // The call's status, once it is done.
  const grpc::Status& AwaitDone() {
    done_.WaitForNotification();
    return status_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The stream ended: nothing more is written, and the call may end.
      agent_->writer_->Close(/*drain=*/false);
      writes_.Stop();
      if (!first_read_.HasBeenNotified()) first_read_.Notify();
      reads_over_.Notify();
      return;
    }
    if (worker_ == nullptr) {
      answered_ = true;
      first_read_.Notify();  // The next read starts with Serve.
      return;
    }
    agent_->OnCommand(worker_, std::move(command_));
    command_ = ArenaMessage<wire::HeadToWorker>();
    StartRead(command_.get());
  }

  void OnWriteDone(bool ok) override { agent_->writer_->WriteDone(ok); }

  void OnDone(const grpc::Status& status) override {
    status_ = status;
    done_.Notify();
  }

 private:
  GrpcWorkerAgent* const agent_;
  ClientReactorWrites<wire::WorkerToHead, wire::HeadToWorker> writes_;
  wire::HeadToWorker answer_;
  bool answered_ = false;  // Written before first_read_ is notified.
  absl::Notification first_read_;
  WorkerService* worker_ = nullptr;  // Set before the commands' first read.
  ArenaMessage<wire::HeadToWorker> command_;
  absl::Notification reads_over_;
  grpc::Status status_;  // Written before done_ is notified.
  absl::Notification done_;
};

GrpcWorkerAgent::GrpcWorkerAgent(GrpcWorkerAgentOptions options)
    : options_(std::move(options)), incarnation_(options_.incarnation != 0 ? options_.incarnation
                                            : RandomUint64() | 1) {}

absl::StatusOr<std::unique_ptr<GrpcWorkerAgent>> GrpcWorkerAgent::Register(
    GrpcWorkerAgentOptions options) {
  // As every client: no clear text to a head off loopback.
  CW_RETURN_IF_ERROR(
      RefuseClearTextToRemoteHead(options.head, options.security));
  CW_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                      MakeChannelCredentials(options.security));
  std::unique_ptr<GrpcWorkerAgent> agent(
      new GrpcWorkerAgent(std::move(options)));
  const GrpcWorkerAgentOptions& opts = agent->options_;
  const std::string where = absl::StrCat("registering with the head at ",
                                         opts.head);
  agent->control_ = wire::HeadWorkers::NewStub(grpc::CreateCustomChannel(
      opts.head, credentials, MakeChannelArguments(opts.keepalive, "control")));
  agent->bulk_ = wire::HeadWorkers::NewStub(grpc::CreateCustomChannel(
      opts.head, credentials, MakeChannelArguments(opts.keepalive, "bulk")));

  // A TLS mismatch is said at once, not after the whole connect timeout.
  if (absl::Status tls = ProbeHeadTls(opts.head, opts.security,
                                      opts.connect_timeout);
      !tls.ok()) {
    return WithContext(tls, where);
  }
  uint32_t version = 0;
  {
    grpc::ClientContext context;
    AddCredentials(opts.security, &context);
    context.set_wait_for_ready(true);
    context.set_deadline(GrpcDeadline(opts.connect_timeout));
    wire::VersionRequest request;
    request.set_min_version(kWorkerProtocol.min);
    request.set_max_version(kWorkerProtocol.max);
    wire::VersionResponse response;
    grpc::Status status;
    if (CallUntilStopped(context, opts.connect_timeout, opts.stopped, [&] {
          status = agent->control_->GetVersion(&context, request, &response);
        })) {
      return absl::CancelledError(
          absl::StrCat(where, ": stopped while waiting for the head"));
    }
    if (!status.ok()) {
      absl::Status error = FromGrpcStatus(status);
      if (error.code() == absl::StatusCode::kDeadlineExceeded) {
        error = absl::UnavailableError(absl::StrCat(
            "no head answered within ",
            absl::FormatDuration(opts.connect_timeout)));
      } else if (error.code() == absl::StatusCode::kCancelled) {
        // A head shutting down cancels the calls it has: it is going, so
        // unavailable (registering again waits for the next one), as a
        // cancelled registration stream is below.
        error = absl::UnavailableError(
            absl::StrCat("the head cancelled the call (", error.message(), ")"));
      }
      return WithContext(error, where);
    }
    version = response.version();
    if (!kWorkerProtocol.Contains(version)) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": the head chose protocol version ", version,
          ", which this worker does not speak"));
    }
  }

  AddCredentials(opts.security, &agent->context_);
  GrpcWorkerAgent* self = agent.get();
  agent->stream_ = std::make_unique<Stream>(self);
  StreamWriter<wire::WorkerToHead>::Options writer;
  writer.start = [stream = agent->stream_.get()](
                     const wire::WorkerToHead& notice) {
    return stream->Start(notice);
  };
  writer.merge = [](wire::WorkerToHead& into, wire::WorkerToHead& next) {
    if (!into.has_op_done() || !next.has_op_done()) return false;
    for (wire::OpDone& done : *next.mutable_op_done()->mutable_done()) {
      *into.mutable_op_done()->add_done() = std::move(done);
    }
    return true;
  };
  writer.max_queued_bytes = opts.max_queued_notice_bytes;
  // Runs on whichever thread sent (some under locks of their own): only
  // cancels; Serve names the bound when the stream has ended.
  writer.on_overflow = [self] { self->context_.TryCancel(); };
  agent->writer_ =
      std::make_unique<StreamWriter<wire::WorkerToHead>>(std::move(writer));

  wire::WorkerToHead hello;
  wire::Register* reg = hello.mutable_registration();
  reg->set_version(version);
  reg->set_island(opts.island.value());
  reg->set_num_devices(opts.spec.num_devices);
  reg->set_device_kind(opts.spec.kind);
  reg->set_memory_per_device(opts.spec.memory_per_device);
  reg->set_data_plane_address(opts.data_plane_address);
  reg->set_incarnation(agent->incarnation_);
  reg->set_name(opts.name);
  agent->stream_->Begin();
  agent->writer_->Send(std::move(hello));

  // The head answers promptly; one that does not is given up on (the
  // call cancelled, which ends the read).
  Stream& stream = *agent->stream_;
  const bool stopped = CallUntilStopped(agent->context_, opts.connect_timeout,
                                        opts.stopped,
                                        [&] { stream.AwaitFirstRead(); });
  const bool answered = stream.answered();
  if (!answered || !stream.answer().has_registered()) {
    stream.Abandon();
    const grpc::Status& status = stream.AwaitDone();
    absl::Status error =
        answered || status.ok()
            ? absl::UnavailableError("the head closed the stream "
                                     "without registering us")
            : FromGrpcStatus(status);
    if (stopped) {
      error = absl::CancelledError("stopped while waiting for the head");
    } else if (error.code() == absl::StatusCode::kCancelled) {
      error = absl::UnavailableError(
          absl::StrCat("the head did not answer within ",
                       absl::FormatDuration(opts.connect_timeout)));
    }
    return WithContext(error, where);
  }
  const wire::HeadToWorker& answer = stream.answer();
  const wire::Registered& registered = answer.registered();
  const FieldPath root("HeadToWorker.registered");
  if (registered.host() < 0) {
    return root.Field("host").Invalid("is negative");
  }
  agent->host_ = HostId(registered.host());
  for (int i = 0; i < registered.devices_size(); ++i) {
    CW_ASSIGN_OR_RETURN(DeviceInfo device,
                        FromWire(registered.devices(i), opts.limits,
                                 root.Index("devices", i)));
    agent->devices_.push_back(std::move(device));
  }
  if (static_cast<int64_t>(agent->devices_.size()) != opts.spec.num_devices) {
    return root.Field("devices").Invalid(
        absl::StrCat(agent->devices_.size(), " devices for the ",
                     opts.spec.num_devices, " offered"));
  }
  agent->heartbeat_interval_ =
      absl::Milliseconds(registered.heartbeat_interval_ms());

  agent->transfers_ = std::make_unique<ThreadPool>("cw-agent-xfer", 2);
  return agent;
}

GrpcWorkerAgent::~GrpcWorkerAgent() {
  Stop();
  CloseStore(absl::UnavailableError("the worker's agent stopped"));
  bool served = false;
  {
    absl::MutexLock lock(&mu_);
    served = serving_done_;
  }
  if (!served && stream_ != nullptr) {
    // Never served (or its registration failed): end the call.
    writer_->Close(/*drain=*/false);
    stream_->Abandon();
    stream_->AwaitDone();
  }
  transfers_.reset();  // Drains: the bulk calls were cancelled.
}

void GrpcWorkerAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (grpc::ClientContext* transfer : transfer_contexts_) {
      transfer->TryCancel();
    }
  }
  context_.TryCancel();
}

void GrpcWorkerAgent::Reply(uint64_t id, const absl::Status& status,
                            wire::Reply reply) {
  wire::WorkerToHead notice;
  notice.set_id(id);
  if (!status.ok()) ToWire(status, reply.mutable_status());
  *notice.mutable_reply() = std::move(reply);
  writer_->Send(std::move(notice));
}

void GrpcWorkerAgent::OnOpDone(const OpDone& done) {
  SendOpsDone(absl::MakeConstSpan(&done, 1));
}

void GrpcWorkerAgent::OnOpsDone(const std::vector<OpDone>& done) {
  SendOpsDone(done);
}

void GrpcWorkerAgent::SendOpsDone(absl::Span<const OpDone> done) {
  wire::WorkerToHead notice;
  for (const OpDone& one : done) {
    ToWire(one, notice.mutable_op_done()->add_done());
  }
  writer_->Send(std::move(notice));
}

void GrpcWorkerAgent::OnPushFailed(const UndeliveredPiece& piece) {
  wire::WorkerToHead notice;
  ToWire(piece, notice.mutable_push_failed());
  writer_->Send(std::move(notice));
}

void GrpcWorkerAgent::CallStore(wire::KvRequest request, KvPending pending) {
  absl::Status closed;
  {
    absl::MutexLock lock(&kv_mu_);
    closed = kv_closed_;
    if (closed.ok()) {
      request.set_id(next_kv_id_++);
      kv_pending_.emplace(request.id(), std::move(pending));
    }
  }
  if (!closed.ok()) return std::move(pending)(closed);
  const uint64_t id = request.id();
  wire::WorkerToHead notice;
  *notice.mutable_kv() = std::move(request);
  if (writer_->Send(std::move(notice))) return;
  // The writer is closed: the stream is ending, and CloseStore may already
  // have run without this call.
  KvPending lost;
  {
    absl::MutexLock lock(&kv_mu_);
    auto it = kv_pending_.find(id);
    if (it == kv_pending_.end()) return;
    lost = std::move(it->second);
    kv_pending_.erase(it);
  }
  std::move(lost)(absl::UnavailableError(
      "the head's key-value store: the stream to the head is closed"));
}

void GrpcWorkerAgent::OnKvReply(const wire::KvReply& reply) {
  KvPending pending;
  {
    absl::MutexLock lock(&kv_mu_);
    auto it = kv_pending_.find(reply.id());
    if (it == kv_pending_.end()) return;  // Failed already (closed).
    pending = std::move(it->second);
    kv_pending_.erase(it);
  }
  absl::Status status;
  if (reply.has_status()) {
    if (absl::Status bad = StatusFromWire(reply.status(), options_.limits,
                                          FieldPath("HeadToWorker.kv_reply"
                                                    ".status"),
                                          &status);
        !bad.ok()) {
      status = bad;
    }
  }
  if (!status.ok()) return std::move(pending)(status);
  std::move(pending)(reply.value());
}

void GrpcWorkerAgent::CloseStore(const absl::Status& why) {
  std::map<uint64_t, KvPending> pending;
  {
    absl::MutexLock lock(&kv_mu_);
    if (kv_closed_.ok()) kv_closed_ = why;
    pending.swap(kv_pending_);
  }
  for (auto& [id, call] : pending) std::move(call)(why);
}

Future<> GrpcWorkerAgent::HeadStore::Set(std::string key, std::string value) {
  wire::KvRequest request;
  request.mutable_set()->set_key(std::move(key));
  request.mutable_set()->set_value(std::move(value));
  auto [promise, future] = MakePromise<void>();
  agent_->CallStore(std::move(request),
                    [promise = std::move(promise)](
                        absl::StatusOr<std::string> result) mutable {
                      promise.Set(result.status());
                    });
  return std::move(future);
}

Future<std::string> GrpcWorkerAgent::HeadStore::Get(std::string key,
                                                    absl::Time deadline) {
  wire::KvRequest request;
  request.mutable_get()->set_key(std::move(key));
  // Clocks differ between processes: the deadline travels as a wait.
  const absl::Duration wait = std::max(deadline - absl::Now(),
                                       absl::ZeroDuration());
  request.mutable_get()->set_timeout_ms(
      wait == absl::InfiniteDuration()
          ? std::numeric_limits<int64_t>::max()
          : absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))));
  auto [promise, future] = MakePromise<std::string>();
  agent_->CallStore(std::move(request),
                    [promise = std::move(promise)](
                        absl::StatusOr<std::string> result) mutable {
                      promise.Set(std::move(result));
                    });
  return std::move(future);
}

Future<> GrpcWorkerAgent::HeadStore::DeletePrefix(std::string prefix) {
  wire::KvRequest request;
  request.mutable_delete_prefix()->set_prefix(std::move(prefix));
  auto [promise, future] = MakePromise<void>();
  agent_->CallStore(std::move(request),
                    [promise = std::move(promise)](
                        absl::StatusOr<std::string> result) mutable {
                      promise.Set(result.status());
                    });
  return std::move(future);
}

absl::Status GrpcWorkerAgent::Serve(WorkerService* worker,
                                    trace::EventBuffer* events,
                                    absl::Duration trace_interval) {
  // Commands apply in order on their own thread; the reader answers pings
  // and starts the pulls of put values at once, so that a big value being
  // pulled delays neither the heartbeats nor its own arrival.
  std::thread applier([this, worker] { ApplyCommands(worker); });
  std::thread tracer;
  if (events != nullptr) {
    tracer = std::thread(
        [this, events, trace_interval] { SendTraceEvents(events, trace_interval); });
  }
  stream_->ReadCommands(worker);
  stream_->AwaitReadsOver();
  {
    // The pulls still running were for this stream's head.
    absl::MutexLock lock(&mu_);
    commands_done_ = true;
    for (grpc::ClientContext* transfer : transfer_contexts_) {
      transfer->TryCancel();
    }
  }
  CloseStore(absl::UnavailableError(absl::StrCat(
      "the head's key-value store: the stream to the head at ", options_.head,
      " ended")));
  applier.join();
  if (tracer.joinable()) tracer.join();
  absl::Status ended;
  {
    absl::MutexLock lock(&mu_);
    ended = command_error_;
  }
  if (ended.ok() && writer_->overflowed()) {
    ended = absl::ResourceExhaustedError(absl::StrCat(
        "more than ", options_.max_queued_notice_bytes,
        " bytes of notices waited to be written to the head at ",
        options_.head,
        " (GrpcWorkerAgentOptions::max_queued_notice_bytes): the head is not "
        "reading them; the stream ends"));
  }
  writer_->Close(/*drain=*/false);
  const grpc::Status status = stream_->AwaitDone();
  // Bulk calls still running belong to this stream's head.
  {
    absl::MutexLock lock(&mu_);
    for (grpc::ClientContext* transfer : transfer_contexts_) {
      transfer->TryCancel();
    }
  }
  bool stopped = false;
  {
    absl::MutexLock lock(&mu_);
    serving_done_ = true;
    stopped = stopped_;
  }
  if (!ended.ok()) return ended;
  if (stopped) return absl::CancelledError("the worker stopped");
  if (status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the head at ", options_.head, " ended the stream"));
  }
  absl::Status error = FromGrpcStatus(status);
  return absl::Status(
      error.code() == absl::StatusCode::kCancelled
          ? absl::StatusCode::kUnavailable
          : error.code(),
      absl::StrCat("lost the head at ", options_.head, ": ",
                   error.message()));
}

void GrpcWorkerAgent::OnCommand(WorkerService* worker,
                                ArenaMessage<wire::HeadToWorker> command) {
  if (command->has_ping()) {
    Ping(worker, command->id(), command->ping().head_time_us());
    return;
  }
  if (command->has_kv_reply()) {
    OnKvReply(command->kv_reply());
    return;
  }
  std::optional<Future<hlo::Literal>> value;
  if (command->has_put_buffer()) value = StartPull(command->id());
  absl::MutexLock lock(&mu_);
  commands_.push_back(Queued{std::move(command), std::move(value)});
}

void GrpcWorkerAgent::SendTraceEvents(trace::EventBuffer* events,
                                      absl::Duration interval) {
  // This thread sends every trace notice, in order: it numbers their names.
  NameEncoder names;
  while (true) {
    bool done = false;
    {
      absl::MutexLock lock(&mu_);
      auto over = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return commands_done_;
      };
      done = mu_.AwaitWithTimeout(absl::Condition(&over), interval);
    }
    std::vector<trace::EventRecord> records = events->Take();
    if (!records.empty() && !done) {
      wire::WorkerToHead notice;
      ToWire(records, names, notice.mutable_trace());
      writer_->Send(std::move(notice));
    }
    if (done) return;
  }
}

void GrpcWorkerAgent::ApplyCommands(WorkerService* worker) {
  while (true) {
    std::optional<Queued> queued;  // Empty: no arena made for nothing.
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return commands_done_ || !commands_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      // The stream ended: what is left was for a head that is gone.
      if (commands_done_) return;
      queued.emplace(std::move(commands_.front()));
      commands_.pop_front();
    }
    absl::Status status = ApplyCommand(worker, *queued);
    if (!status.ok()) {
      CW_LOG(ERROR) << "ending the stream to the head: " << status;
      {
        absl::MutexLock lock(&mu_);
        command_error_ = status;
      }
      context_.TryCancel();
      return;
    }
  }
}

absl::Status GrpcWorkerAgent::ApplyCommand(WorkerService* worker,
                                           Queued& queued) {
  const wire::HeadToWorker& command = *queued.command;
  if (!command.has_put_buffer()) return HandleCommand(worker, command);
  const uint64_t id = command.id();
  const wire::PutBuffer& put = command.put_buffer();
  const FieldPath path("HeadToWorker.put_buffer");
  if (put.device() < 0) return path.Field("device").Invalid("is negative");
  CW_ASSIGN_OR_RETURN(BufferId buffer,
                      FromWire(put.buffer(), options_.limits,
                               path.Field("buffer")));
  // In order: later commands may name this buffer.
  absl::StatusOr<hlo::Literal> value = queued.value->Await();
  if (!value.ok()) {
    Reply(id, WithContext(value.status(), "pulling the value of a put"));
    return absl::OkStatus();
  }
  worker->PutBuffer({DeviceId(put.device()), buffer, *std::move(value)})
      .OnReady(InlineExecutor::Instance(),
               [this, id](const absl::Status& done) { Reply(id, done); });
  return absl::OkStatus();
}

void GrpcWorkerAgent::Ping(WorkerService* worker, uint64_t id,
                           int64_t head_time_us) {
  // After the worker's own check: a worker whose service is wedged stops
  // answering.
  worker->Heartbeat().OnReady(
      InlineExecutor::Instance(),
      [this, id, head_time_us](const absl::Status& alive) {
        if (!alive.ok()) return Reply(id, alive);
        wire::WorkerToHead pong;
        pong.mutable_pong()->set_seq(id);
        pong.mutable_pong()->set_head_time_us(head_time_us);
        pong.mutable_pong()->set_worker_time_us(
            absl::ToUnixMicros(absl::Now()));
        writer_->Send(std::move(pong));
      });
}

Future<hlo::Literal> GrpcWorkerAgent::StartPull(uint64_t id) {
  PromiseAndFuture<hlo::Literal> pair = MakePromise<hlo::Literal>();
  transfers_->Execute([this, id, promise = std::move(pair.promise)]() mutable {
    promise.Set(Pull(id));
  });
  return std::move(pair.future);
}

absl::Status GrpcWorkerAgent::HandleCommand(WorkerService* worker,
                                            const wire::HeadToWorker& command) {
  const uint64_t id = command.id();
  const WireLimits& limits = options_.limits;
  const FieldPath root("HeadToWorker");
  // Answers `id` when `future` (a Future<>) resolves.
  auto answer = [this, id](const Future<>& future) {
    future.OnReady(InlineExecutor::Instance(),
                   [this, id](const absl::Status& status) { Reply(id, status); });
  };
  switch (command.command_case()) {
    case wire::HeadToWorker::kLoadProgram: {
      absl::StatusOr<LoadProgramRequest> request = FromWire(
          command.load_program(), limits, root.Field("load_program"));
      if (!request.ok()) {
        Reply(id, request.status());
        return absl::OkStatus();
      }
      answer(worker->LoadProgram(*std::move(request)));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kUnloadProgram:
      worker->UnloadProgram(ProgramId(command.unload_program().program()));
      return absl::OkStatus();
    case wire::HeadToWorker::kDispatch: {
      CW_ASSIGN_OR_RETURN(WorkerBatch batch,
                          FromWire(command.dispatch(), command_names_, limits,
                                   root.Field("dispatch")));
      worker->Dispatch(std::move(batch));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kAwaitBuffers: {
      std::vector<DeviceBuffer> buffers;
      const auto& list = command.await_buffers().buffers();
      if (list.size() > limits.max_entries) {
        return root.Field("await_buffers").Invalid("too many buffers");
      }
      for (int i = 0; i < list.size(); ++i) {
        CW_ASSIGN_OR_RETURN(
            DeviceBuffer buffer,
            FromWire(list[i], limits,
                     root.Field("await_buffers").Index("buffers", i)));
        buffers.push_back(buffer);
      }
      answer(worker->AwaitBuffers(std::move(buffers)));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kFetchBuffer: {
      CW_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                          FromWire(command.fetch_buffer(), limits,
                                   root.Field("fetch_buffer")));
      worker->FetchBuffer(buffer).OnReady(
          *transfers_,
          [this, id](const absl::StatusOr<hlo::Literal>& value) {
            if (!value.ok()) return Reply(id, value.status());
            Push(id, *value);
          });
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kFailBuffers: {
      const auto& pieces = command.fail_buffers().pieces();
      const FieldPath path = root.Field("fail_buffers");
      if (pieces.size() > limits.max_entries) {
        return path.Field("pieces").Invalid(absl::StrCat(
            pieces.size(), " entries (at most ", limits.max_entries, ")"));
      }
      std::vector<UndeliveredPiece> failed;
      failed.reserve(pieces.size());
      for (int i = 0; i < pieces.size(); ++i) {
        CW_ASSIGN_OR_RETURN(UndeliveredPiece piece,
                            FromWire(pieces[i], limits,
                                     path.Index("pieces", i)));
        failed.push_back(std::move(piece));
      }
      worker->FailBuffers(std::move(failed));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kPeerLost: {
      const wire::PeerLost& lost = command.peer_lost();
      if (lost.host() < 0) {
        return root.Field("peer_lost").Field("host").Invalid("is negative");
      }
      absl::Status status;
      CW_RETURN_IF_ERROR(StatusFromWire(lost.status(), limits,
                                        root.Field("peer_lost").Field("status"),
                                        &status));
      if (status.ok()) status = absl::DataLossError("a peer host was lost");
      worker->PeerLost(HostId(lost.host()), std::move(status));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kCancelSession: {
      const wire::CancelSession& cancel = command.cancel_session();
      if (cancel.session() < 0) {
        return root.Field("cancel_session").Field("session").Invalid(
            "is negative");
      }
      absl::Status status;
      CW_RETURN_IF_ERROR(StatusFromWire(
          cancel.status(), limits, root.Field("cancel_session").Field("status"),
          &status));
      if (status.ok()) status = absl::CancelledError("the session ended");
      worker->CancelSession(SessionId(cancel.session()), std::move(status));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kGetStatus:
      worker->GetStatus().OnReady(
          InlineExecutor::Instance(),
          [this, id](const absl::StatusOr<WorkerStatus>& status) {
            wire::Reply reply;
            if (status.ok()) ToWire(*status, reply.mutable_worker_status());
            Reply(id, status.status(), std::move(reply));
          });
      return absl::OkStatus();
    case wire::HeadToWorker::kMembership: {
      CW_ASSIGN_OR_RETURN(MembershipUpdate update,
                          FromWire(command.membership(), limits,
                                   root.Field("membership")));
      worker->UpdateMembership(std::move(update));
      return absl::OkStatus();
    }
    case wire::HeadToWorker::kPutBuffer:  // Applied by ApplyCommand.
    case wire::HeadToWorker::kPing:       // Answered by the reader.
      return absl::InternalError("a put or a ping reached HandleCommand");
    case wire::HeadToWorker::kRegistered:
      return absl::InvalidArgumentError(
          "HeadToWorker.registered: this worker is registered already");
    case wire::HeadToWorker::kKvReply:  // Taken by the reader.
      return absl::InternalError("a kv_reply reached HandleCommand");
    case wire::HeadToWorker::COMMAND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("HeadToWorker: no command");
}

absl::StatusOr<hlo::Literal> GrpcWorkerAgent::Pull(uint64_t id) {
  grpc::ClientContext context;
  AddCredentials(options_.security, &context);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::CancelledError("the worker stopped");
    transfer_contexts_.insert(&context);
  }
  wire::ShardRef ref;
  ref.set_host(host_.value());
  ref.set_incarnation(incarnation_);
  ref.set_command(id);
  std::unique_ptr<grpc::ClientReader<wire::ShardData>> reader =
      bulk_->PullShard(&context, ref);
  wire::ShardData message;
  absl::StatusOr<ValueAssembler> assembler =
      absl::DataLossError("the pull ended before its header");
  absl::Status status;
  bool have_header = false;
  while (reader->Read(&message)) {
    if (!have_header) {
      have_header = true;
      assembler = message.has_header()
                      ? ValueAssembler::Create(message.header().value(),
                                               options_.limits,
                                               FieldPath("ShardData.header"))
                      : absl::DataLossError("the pull did not start with a "
                                            "header");
      if (!assembler.ok()) break;
      continue;
    }
    status = message.has_chunk()
                 ? assembler->Append(message.chunk().data())
                 : absl::DataLossError("the pull sent a second header");
    if (!status.ok()) break;
  }
  if (!status.ok() || !assembler.ok()) context.TryCancel();
  grpc::Status finished = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    transfer_contexts_.erase(&context);
  }
  if (status.ok()) status = assembler.status();
  if (status.ok()) status = FromGrpcStatus(finished);
  if (!status.ok()) return status;
  return std::move(*assembler).Finish();
}

void GrpcWorkerAgent::Push(uint64_t id, const hlo::Literal& value) {
  if (!value.shape().IsArray()) {
    Reply(id, absl::InternalError(absl::StrCat(
                  "a fetched buffer holds ", value.shape().ToString(),
                  ", not an array")));
    return;
  }
  if (TravelsInline(value)) {
    wire::Reply reply;
    ToWire(value, reply.mutable_value());
    Reply(id, absl::OkStatus(), std::move(reply));
    return;
  }
  grpc::ClientContext context;
  AddCredentials(options_.security, &context);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    transfer_contexts_.insert(&context);
  }
  wire::PushShardResponse response;
  std::unique_ptr<grpc::ClientWriter<wire::ShardData>> writer =
      bulk_->PushShard(&context, &response);
  wire::ShardData message;
  wire::ShardHeader* header = message.mutable_header();
  header->set_host(host_.value());
  header->set_incarnation(incarnation_);
  header->set_command(id);
  *header->mutable_value() = ValueHeaderOf(value);
  if (WriteValueStream(*writer, message, value)) writer->WritesDone();
  grpc::Status status = writer->Finish();
  {
    absl::MutexLock lock(&mu_);
    transfer_contexts_.erase(&context);
  }
  if (!status.ok()) {
    Reply(id, WithContext(FromGrpcStatus(status),
                          "pushing a fetched value to the head"));
  }
}

}  // namespace causeway::transport
