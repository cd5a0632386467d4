#include "causeway/transport/grpc_session_channel.h"

#include <grpcpp/alarm.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/grpc_reactor_writes.h"
#include "causeway/transport/tls_probe.h"

namespace causeway::transport {
namespace {

// The error an answer carries, if any (a malformed one is an error too).
absl::Status AnswerStatus(const wire::SessionResponse& response,
                          const WireLimits& limits) {
  if (!response.has_status()) return absl::OkStatus();
  absl::Status status;
  absl::Status malformed = StatusFromWire(
      response.status(), limits, FieldPath("SessionResponse.status"), &status);
  return malformed.ok() ? status : malformed;
}

}  // namespace

// --- GrpcHeadConnection. ---

absl::StatusOr<std::shared_ptr<GrpcHeadConnection>> GrpcHeadConnection::Connect(
    const std::string& target, GrpcClientOptions options) {
  CW_RETURN_IF_ERROR(RefuseClearTextToRemoteHead(target, options.security));
  CW_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                      MakeChannelCredentials(options.security));
  std::shared_ptr<GrpcHeadConnection> connection(
      new GrpcHeadConnection(target, std::move(options)));
  const GrpcClientOptions& opts = connection->options_;
  connection->control_ = wire::HeadSessions::NewStub(grpc::CreateCustomChannel(
      target, credentials, MakeChannelArguments(opts.keepalive, "control")));
  connection->bulk_ = wire::HeadSessions::NewStub(grpc::CreateCustomChannel(
      target, credentials, MakeChannelArguments(opts.keepalive, "bulk")));

  // A TLS mismatch is said at once, not after the whole connect timeout.
  CW_RETURN_IF_ERROR(ProbeHeadTls(target, opts.security, opts.connect_timeout));
  grpc::ClientContext context;
  AddCredentials(opts.security, &context);
  context.set_wait_for_ready(true);
  context.set_deadline(GrpcDeadline(opts.connect_timeout));
  wire::VersionRequest request;
  request.set_min_version(kSessionProtocol.min);
  request.set_max_version(kSessionProtocol.max);
  wire::VersionResponse response;
  grpc::Status status = connection->control_->GetVersion(&context, request,
                                                         &response);
  if (!status.ok()) {
    absl::Status error = FromGrpcStatus(status);
    if (error.code() == absl::StatusCode::kDeadlineExceeded) {
      error = absl::UnavailableError(absl::StrCat(
          "no head answered at ", target, " within ",
          absl::FormatDuration(opts.connect_timeout)));
    }
    return absl::Status(error.code(),
                        absl::StrCat("connecting to the head at ", target,
                                     ": ", error.message()));
  }
  if (!kSessionProtocol.Contains(response.version())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the head at ", target, " chose protocol version ",
        response.version(), ", which this client does not speak (",
        kSessionProtocol.min, "..", kSessionProtocol.max, ")"));
  }
  connection->version_ = response.version();
  return connection;
}

absl::StatusOr<GrpcHeadConnection::ClusterStatus>
GrpcHeadConnection::GetClusterStatus(absl::Duration timeout,
                                     bool include_trace) {
  grpc::ClientContext context;
  AddCredentials(options_.security, &context);
  context.set_deadline(GrpcDeadline(timeout));
  wire::ClusterStatusRequest request;
  request.set_include_trace(include_trace);
  wire::ClusterStatusResponse response;
  grpc::Status status =
      control_->GetClusterStatus(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  ClusterStatus out;
  const FieldPath root("ClusterStatusResponse");
  CW_ASSIGN_OR_RETURN(out.report, FromWire(response.report(), options_.limits,
                                           root.Field("report")));
  if (response.has_topology()) {
    CW_ASSIGN_OR_RETURN(Topology topology,
                        FromWire(response.topology(), options_.limits,
                                 root.Field("topology")));
    out.topology = std::make_shared<const Topology>(std::move(topology));
  }
  CW_ASSIGN_OR_RETURN(out.trace,
                      StringFromWire(response.trace().json(),
                                     options_.limits.max_string_bytes,
                                     root.Field("trace").Field("json")));
  return out;
}

// --- GrpcSessionChannel. ---

// The session's stream. Reads answers one at a time on gRPC's threads;
// writes are started by the writer (Start), on the thread that sends or in
// the previous write's OnWriteDone. A hold keeps the call from being done
// while a write may still start: it goes once the reads are over (the
// stream ended) and no Start is in progress, after which none starts.
// OnDone tells the channel how the call ended.
class GrpcSessionChannel::Stream final
    : public grpc::ClientBidiReactor<wire::SessionRequest,
                                     wire::SessionResponse> {
 public:
  explicit Stream(GrpcSessionChannel* channel)
      : channel_(channel), writes_(this) {}

  // Starts the call on the channel's context; reading starts with it.
  void Begin() {
    channel_->connection_->control().async()->Session(&channel_->context_,
                                                      this);
    writes_.Hold();
    StartRead(&response_);
    StartCall();
  }

  // The writer's `start`: false once writes stopped.
  bool Start(const wire::SessionRequest& request) {
    return writes_.Start(request);
  }

  // Blocks until the call is done (OnDone returned).
  void AwaitDone() { done_.WaitForNotification(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The stream ended: nothing more is written, and the call may end.
      channel_->writer_->Close(/*drain=*/false);
      writes_.Stop();
      return;
    }
    channel_->Answered(std::move(response_));
    response_ = wire::SessionResponse();
    StartRead(&response_);
  }

  void OnWriteDone(bool ok) override { channel_->writer_->WriteDone(ok); }

  void OnDone(const grpc::Status& status) override {
    channel_->StreamDone(status);
    done_.Notify();
  }

 private:
  GrpcSessionChannel* const channel_;
  ClientReactorWrites<wire::SessionRequest, wire::SessionResponse> writes_;
  wire::SessionResponse response_;
  absl::Notification done_;
};

// Sends `send()` every `interval` on a gRPC alarm (its callback runs on
// gRPC's executor threads; no thread of ours waits). Stop waits for the
// alarm's last callback.
class GrpcSessionChannel::KeepAlive {
 public:
  KeepAlive(absl::Duration interval, std::function<void()> send)
      : interval_(interval), send_(std::move(send)) {
    absl::MutexLock lock(&mu_);
    ArmLocked();
  }
  ~KeepAlive() { Stop(); }

  void Stop() {
    grpc::Alarm* alarm = nullptr;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      alarm = armed_ ? alarm_.get() : nullptr;
    }
    // Stable now: a stopped keepalive arms no new alarm. Its callback runs
    // (not fired) if it had not yet.
    if (alarm != nullptr) alarm->Cancel();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* armed) { return !*armed; }, &armed_));
  }

 private:
  void ArmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    armed_ = true;
    // A fresh alarm each time (the one whose callback this may be is let
    // go here; gRPC keeps it until its callback returns).
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_->Set(absl::ToChronoTime(absl::Now() + interval_),
                [this](bool fired) { Fired(fired); });
  }

  void Fired(bool fired) {
    bool send = false;
    {
      absl::MutexLock lock(&mu_);
      send = fired && !stopped_;
    }
    if (send) send_();
    absl::MutexLock lock(&mu_);
    if (fired && !stopped_) {
      ArmLocked();
      return;
    }
    armed_ = false;
  }

  const absl::Duration interval_;
  const std::function<void()> send_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // An alarm is set and its callback has not returned (or re-armed).
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
};

GrpcSessionChannel::GrpcSessionChannel(
    std::shared_ptr<GrpcHeadConnection> connection)
    : connection_(std::move(connection)),
      callbacks_(std::make_unique<ThreadPool>("cw-session-cb", 1)),
      transfers_(std::make_unique<ThreadPool>("cw-session-xfer", 2)) {}

GrpcSessionChannel::~GrpcSessionChannel() {
  bool open = false;
  {
    absl::MutexLock lock(&mu_);
    open = state_ == State::kOpen;
  }
  if (open) {
    absl::Status closed = CloseSession().AwaitFor(absl::Seconds(5));
    if (!closed.ok()) {
      CW_LOG(WARNING) << "closing the session: " << closed;
    }
  }
  context_.TryCancel();
  {
    absl::MutexLock lock(&mu_);
    for (grpc::ClientContext* transfer : transfer_contexts_) {
      transfer->TryCancel();
    }
  }
  if (stream_ != nullptr) stream_->AwaitDone();
  transfers_.reset();  // Drains: uploads and downloads end (cancelled).
  callbacks_.reset();  // Drains: every future is resolved by now.
  // Last: the answer to `open`, which starts it, has run (on callbacks_).
  keep_alive_.reset();  // Waits for its alarm's last callback.
}

absl::Status GrpcSessionChannel::UnusableLocked() const {
  switch (state_) {
    case State::kNew:
      return absl::FailedPreconditionError(
          "this channel has no open session: call OpenSession first");
    case State::kOpen:
      return absl::OkStatus();
    case State::kClosed:
      return absl::FailedPreconditionError("this channel's session is closed");
    case State::kEnded:
      return end_status_;
  }
  return absl::InternalError("unknown channel state");
}

absl::Status GrpcSessionChannel::Send(wire::SessionRequest request,
                                      Pending pending) {
  absl::MutexLock in_order(&send_mu_);
  uint64_t op_id = 0;
  {
    absl::MutexLock lock(&mu_);
    CW_RETURN_IF_ERROR(UnusableLocked());
    op_id = next_op_id_++;
    if (pending) pending_.emplace(op_id, std::move(pending));
  }
  request.set_op_id(op_id);
  // Not under mu_: the write may start here, and its completion's reaction
  // run before StartWrite returns.
  if (writer_->Send(std::move(request))) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    pending_.erase(op_id);
  }
  if (!writer_->overflowed()) {
    // The stream broke under the writer; the reader ends it shortly.
    return absl::UnavailableError(absl::StrCat(
        "the session's stream to the head at ", connection_->target(),
        " is broken"));
  }
  // The head has not taken our requests for a while: the session ends (the
  // writer may be stuck in a write the head never takes), and every op
  // waiting on it fails with this.
  absl::Status why = absl::ResourceExhaustedError(absl::StrCat(
      "more than ", connection_->options().max_queued_request_bytes,
      " bytes of this session's requests wait to be written to the head at ",
      connection_->target(),
      " (GrpcClientOptions::max_queued_request_bytes): the head is not "
      "reading them; the session ends"));
  return AbortSession(why);
}

template <typename T, typename Extract>
Future<T> GrpcSessionChannel::Call(wire::SessionRequest request,
                                   Extract extract) {
  PromiseAndFuture<T> pair = MakePromise<T>();
  const WireLimits& limits = connection_->options().limits;
  absl::Status sent = Send(
      std::move(request),
      [promise = std::move(pair.promise), extract = std::move(extract),
       &limits](const absl::StatusOr<wire::SessionResponse>& answer) mutable {
        if (!answer.ok()) return promise.Set(answer.status());
        absl::Status status = AnswerStatus(*answer, limits);
        if (!status.ok()) return promise.Set(status);
        promise.Set(extract(*answer));
      });
  if (!sent.ok()) return MakeErrorFuture<T>(sent);
  return std::move(pair.future);
}

Future<SessionId> GrpcSessionChannel::OpenSession(OpenSessionRequest request) {
  absl::MutexLock in_order(&send_mu_);
  absl::ReleasableMutexLock lock(&mu_);
  if (state_ != State::kNew) {
    return MakeErrorFuture<SessionId>(absl::FailedPreconditionError(
        "this channel already had a session; open another channel for "
        "another session"));
  }
  AddCredentials(connection_->options().security, &context_);
  stream_ = std::make_unique<Stream>(this);
  StreamWriter<wire::SessionRequest>::Options writer;
  writer.start = [stream = stream_.get()](const wire::SessionRequest& r) {
    return stream->Start(r);
  };
  // Deletes queued one behind the other go as one request (a chain of
  // programs drops an array per program).
  writer.merge = [](wire::SessionRequest& into, wire::SessionRequest& next) {
    if (!into.has_delete_arrays() || !next.has_delete_arrays()) return false;
    into.mutable_delete_arrays()->mutable_arrays()->Add(
        next.delete_arrays().arrays().begin(),
        next.delete_arrays().arrays().end());
    return true;
  };
  writer.max_queued_bytes = connection_->options().max_queued_request_bytes;
  writer_ = std::make_shared<StreamWriter<wire::SessionRequest>>(
      std::move(writer));

  wire::SessionRequest open;
  const uint64_t op_id = next_op_id_++;
  open.set_op_id(op_id);
  ToWire(request, open.mutable_open());
  open.mutable_open()->set_version(connection_->version());
  PromiseAndFuture<SessionId> pair = MakePromise<SessionId>();
  const WireLimits& limits = connection_->options().limits;
  pending_.emplace(
      op_id, [this, promise = std::move(pair.promise), &limits](
                 const absl::StatusOr<wire::SessionResponse>& answer) mutable {
        if (!answer.ok()) return promise.Set(answer.status());
        absl::Status status = AnswerStatus(*answer, limits);
        if (status.ok() && !answer->has_opened()) {
          status = absl::InternalError(
              "the head answered `open` without a session");
        }
        if (!status.ok()) return promise.Set(status);
        const wire::SessionOpened& opened = answer->opened();
        {
          absl::MutexLock lock(&mu_);
          session_ = SessionId(opened.session());
          key_ = opened.key();
        }
        // Keepalives well within the lease (op id 0: outside the order).
        keep_alive_ = std::make_unique<KeepAlive>(
            std::max(absl::Milliseconds(opened.lease_ms()) / 4,
                     absl::Milliseconds(50)),
            [writer = writer_] {
              wire::SessionRequest keep_alive;
              keep_alive.mutable_keep_alive();
              writer->Send(std::move(keep_alive));
            });
        promise.Set(SessionId(opened.session()));
      });
  state_ = State::kOpen;
  // Not under mu_: a reaction (a failed read, the call's end) may run
  // inside StartCall or StartWrite. send_mu_ keeps `open` first.
  lock.Release();
  // The call starts at once (gRPC connects meanwhile); `open` is its first
  // write.
  stream_->Begin();
  writer_->Send(std::move(open));
  return std::move(pair.future);
}

void GrpcSessionChannel::Answered(wire::SessionResponse response) {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(response.op_id());
    if (it != pending_.end()) {
      pending = std::move(it->second);
      pending_.erase(it);
    }
  }
  if (!pending) {
    AbortSession(absl::InternalError(absl::StrCat(
        "the head answered op ", response.op_id(),
        ", which nothing is waiting for")))
        .IgnoreError();  // The stream's end tells every pending op.
    return;
  }
  callbacks_->Execute([pending = std::move(pending),
                       response = std::move(response)]() mutable {
    pending(response);
  });
}

void GrpcSessionChannel::StreamDone(const grpc::Status& status) {
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    why = abort_status_;
  }
  if (why.ok()) {
    if (status.ok()) {
      why = absl::FailedPreconditionError("this channel's session is closed");
    } else {
      absl::Status error = FromGrpcStatus(status);
      why = absl::Status(
          error.code() == absl::StatusCode::kCancelled
              ? absl::StatusCode::kUnavailable
              : error.code(),
          absl::StrCat("the session's stream to the head at ",
                       connection_->target(), " ended: ", error.message()));
    }
  }
  EndStream(why);
}

void GrpcSessionChannel::EndStream(const absl::Status& why) {
  std::map<uint64_t, Pending> pending;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kClosed) state_ = State::kEnded;
    end_status_ = why;
    pending.swap(pending_);
  }
  for (auto& [op_id, callback] : pending) {
    callbacks_->Execute([callback = std::move(callback), why]() mutable {
      callback(why);
    });
  }
}

absl::Status GrpcSessionChannel::AbortSession(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (!abort_status_.ok()) return abort_status_;
    abort_status_ = why;
  }
  CW_LOG(WARNING) << "ending the session: " << why;
  // Not under mu_: the cancelled read's reaction, and the call's end
  // (StreamDone, which takes mu_), may run inside TryCancel.
  context_.TryCancel();
  return why;
}

Future<> GrpcSessionChannel::CloseSession() {
  wire::SessionRequest request;
  request.mutable_close();
  Future<> closed = Call<void>(
      std::move(request),
      [](const wire::SessionResponse&) { return absl::OkStatus(); });
  absl::MutexLock lock(&mu_);
  if (state_ == State::kOpen) state_ = State::kClosed;
  return closed;
}

Future<SliceInfo> GrpcSessionChannel::RequestSlice(SliceRequest request) {
  wire::SessionRequest message;
  ToWire(request, message.mutable_request_slice());
  const WireLimits& limits = connection_->options().limits;
  return Call<SliceInfo>(std::move(message),
                         [&limits](const wire::SessionResponse& r) {
                           return FromWire(r.slice(), limits,
                                           FieldPath("SessionResponse.slice"));
                         });
}

Future<SliceInfo> GrpcSessionChannel::GetSlice(SliceHandle slice) {
  wire::SessionRequest message;
  message.mutable_get_slice()->set_handle(slice.value());
  const WireLimits& limits = connection_->options().limits;
  return Call<SliceInfo>(std::move(message),
                         [&limits](const wire::SessionResponse& r) {
                           return FromWire(r.slice(), limits,
                                           FieldPath("SessionResponse.slice"));
                         });
}

Future<> GrpcSessionChannel::ReleaseSlice(SliceHandle slice) {
  wire::SessionRequest message;
  message.mutable_release_slice()->set_handle(slice.value());
  return Call<void>(std::move(message), [](const wire::SessionResponse&) {
    return absl::OkStatus();
  });
}

Future<CompileInfo> GrpcSessionChannel::Compile(CompileRequest request) {
  wire::SessionRequest message;
  ToWire(request, message.mutable_compile());
  const WireLimits& limits = connection_->options().limits;
  return Call<CompileInfo>(
      std::move(message), [&limits](const wire::SessionResponse& r) {
        return FromWire(r.compiled(), limits,
                        FieldPath("SessionResponse.compiled"));
      });
}

Future<> GrpcSessionChannel::PutArray(ArraySpec spec, hlo::Literal global) {
  if (!global.shape().IsArray()) {
    return MakeErrorFuture(absl::InvalidArgumentError(absl::StrCat(
        "PutArray takes an array value, not ", global.shape().ToString())));
  }
  uint64_t host_buffer = 0;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status unusable = UnusableLocked(); !unusable.ok()) {
      return MakeErrorFuture(unusable);
    }
    host_buffer = next_host_buffer_++;
  }
  // The bytes go first, on their own call; the request follows at once.
  transfers_->Execute([this, host_buffer, global = std::move(global)]() mutable {
    Upload(host_buffer, std::move(global));
  });
  wire::SessionRequest message;
  ToWire(spec, message.mutable_put_array()->mutable_spec());
  message.mutable_put_array()->set_host_buffer(host_buffer);
  return Call<void>(std::move(message), [](const wire::SessionResponse&) {
    return absl::OkStatus();
  });
}

absl::StatusOr<uint64_t> GrpcSessionChannel::ReserveHostBuffers(uint64_t n) {
  absl::MutexLock lock(&mu_);
  if (absl::Status unusable = UnusableLocked(); !unusable.ok()) return unusable;
  const uint64_t first = next_host_buffer_;
  next_host_buffer_ += n;
  return first;
}

Future<> GrpcSessionChannel::PutShards(ArraySpec spec,
                                       std::vector<hlo::Literal> shards) {
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!shards[i].shape().IsArray()) {
      return MakeErrorFuture(absl::InvalidArgumentError(
          absl::StrCat("PutShards takes array values; shard ", i, " is ",
                       shards[i].shape().ToString())));
    }
  }
  absl::StatusOr<uint64_t> first = ReserveHostBuffers(shards.size());
  if (!first.ok()) return MakeErrorFuture(first.status());
  wire::SessionRequest message;
  ToWire(spec, message.mutable_put_shards()->mutable_spec());
  // The bytes go first, each on its own call; the request follows at once.
  for (size_t i = 0; i < shards.size(); ++i) {
    const uint64_t host_buffer = *first + i;
    message.mutable_put_shards()->add_host_buffers(host_buffer);
    transfers_->Execute(
        [this, host_buffer, value = std::move(shards[i])]() mutable {
          Upload(host_buffer, std::move(value));
        });
  }
  return Call<void>(std::move(message), [](const wire::SessionResponse&) {
    return absl::OkStatus();
  });
}

void GrpcSessionChannel::Upload(uint64_t host_buffer, hlo::Literal value) {
  grpc::ClientContext context;
  AddCredentials(connection_->options().security, &context);
  wire::HostBufferPut message;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kOpen && state_ != State::kClosed) return;
    transfer_contexts_.insert(&context);
    wire::HostBufferPutHeader* header = message.mutable_header();
    header->set_session(session_.value());
    header->set_key(key_);
    header->set_host_buffer(host_buffer);
    *header->mutable_value() = ValueHeaderOf(value);
  }
  wire::HostBufferPutResponse response;
  std::unique_ptr<grpc::ClientWriter<wire::HostBufferPut>> writer =
      connection_->bulk().PutHostBuffer(&context, &response);
  if (WriteValueStream(*writer, message, value)) writer->WritesDone();
  grpc::Status status = writer->Finish();
  {
    absl::MutexLock lock(&mu_);
    transfer_contexts_.erase(&context);
  }
  if (!status.ok()) {
    AbortSession(TransferError(
        status, absl::StrCat("the upload of host buffer ", host_buffer,
                             " failed"),
        "; a failed upload ends the session"))
        .IgnoreError();  // The stream's end tells every pending op.
  }
}

absl::Status GrpcSessionChannel::TransferError(const grpc::Status& status,
                                               absl::string_view what,
                                               absl::string_view then) const {
  // A head that is gone or unreachable is UNAVAILABLE naming it (an
  // elastic loop reads DATA_LOSS as a lost slice and waits for a remap
  // that cannot come); a refusal keeps the head's own code.
  absl::Status error = FromGrpcStatus(status);
  const bool unreachable = error.code() == absl::StatusCode::kUnavailable ||
                           error.code() == absl::StatusCode::kCancelled ||
                           error.code() == absl::StatusCode::kDeadlineExceeded ||
                           error.code() == absl::StatusCode::kUnknown;
  const std::string text = absl::StrCat(what, ": ", error.message(), then);
  if (!unreachable) return absl::Status(error.code(), text);
  return absl::UnavailableError(absl::StrCat(
      "the head at ", connection_->target(), " is unreachable (", text, ")"));
}

void GrpcSessionChannel::Execute(ExecuteOp op) {
  wire::SessionRequest message;
  ToWire(op, message.mutable_execute());
  Send(std::move(message), nullptr).IgnoreError();
}

void GrpcSessionChannel::Copy(CopyOp op) {
  wire::SessionRequest message;
  ToWire(op, message.mutable_copy());
  Send(std::move(message), nullptr).IgnoreError();
}

void GrpcSessionChannel::Submit(ProgramGraph graph) {
  wire::SessionRequest message;
  ToWire(graph, message.mutable_submit());
  Send(std::move(message), nullptr).IgnoreError();
}

Future<> GrpcSessionChannel::ArrayReady(ArrayHandle array) {
  wire::SessionRequest message;
  message.mutable_array_ready()->set_array(array.value());
  return Call<void>(std::move(message), [](const wire::SessionResponse&) {
    return absl::OkStatus();
  });
}

Future<hlo::Literal> GrpcSessionChannel::Fetch(ArrayHandle array) {
  uint64_t host_buffer = 0;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status unusable = UnusableLocked(); !unusable.ok()) {
      return MakeErrorFuture<hlo::Literal>(unusable);
    }
    host_buffer = next_host_buffer_++;
  }
  PromiseAndFuture<hlo::Literal> pair = MakePromise<hlo::Literal>();
  wire::SessionRequest message;
  message.mutable_fetch()->set_array(array.value());
  message.mutable_fetch()->set_host_buffer(host_buffer);
  const WireLimits& limits = connection_->options().limits;
  absl::Status sent = Send(
      std::move(message),
      [this, host_buffer, promise = std::move(pair.promise), &limits](
          const absl::StatusOr<wire::SessionResponse>& answer) mutable {
        if (!answer.ok()) return promise.Set(answer.status());
        absl::Status status = AnswerStatus(*answer, limits);
        if (!status.ok()) return promise.Set(status);
        if (answer->fetched().has_value()) {
          return promise.Set(FromWire(
              answer->fetched().value(), limits,
              FieldPath("SessionResponse").Field("fetched").Field("value")));
        }
        transfers_->Execute(
            [this, host_buffer, promise = std::move(promise)]() mutable {
              Download(host_buffer, std::move(promise));
            });
      });
  if (!sent.ok()) return MakeErrorFuture<hlo::Literal>(sent);
  return std::move(pair.future);
}

Future<std::vector<hlo::Literal>> GrpcSessionChannel::FetchShards(
    ArrayHandle array) {
  using Shards = std::vector<hlo::Literal>;
  // As many ids as a slice can have devices: ids are only counters.
  constexpr uint64_t kMaxShards = 1 << 16;
  absl::StatusOr<uint64_t> first = ReserveHostBuffers(kMaxShards);
  if (!first.ok()) return MakeErrorFuture<Shards>(first.status());
  PromiseAndFuture<Shards> pair = MakePromise<Shards>();
  wire::SessionRequest message;
  message.mutable_fetch_shards()->set_array(array.value());
  message.mutable_fetch_shards()->set_first_host_buffer(*first);
  message.mutable_fetch_shards()->set_max_shards(kMaxShards);
  const WireLimits& limits = connection_->options().limits;
  absl::Status sent = Send(
      std::move(message),
      [this, first = *first, promise = std::move(pair.promise), &limits](
          const absl::StatusOr<wire::SessionResponse>& answer) mutable {
        if (!answer.ok()) return promise.Set(answer.status());
        absl::Status status = AnswerStatus(*answer, limits);
        if (!status.ok()) return promise.Set(status);
        const auto& ready = answer->fetched_shards().shards();
        if (static_cast<uint64_t>(ready.size()) > kMaxShards) {
          return promise.Set(absl::DataLossError(absl::StrCat(
              "SessionResponse.fetched_shards: ", ready.size(),
              " shards, more than the ", kMaxShards, " reserved")));
        }
        std::vector<Future<hlo::Literal>> shards;
        for (int i = 0; i < ready.size(); ++i) {
          const uint64_t host_buffer = ready[i].host_buffer();
          if (host_buffer != first + static_cast<uint64_t>(i)) {
            return promise.Set(absl::DataLossError(absl::StrCat(
                "SessionResponse.fetched_shards.shards[", i,
                "]: host buffer ", host_buffer, " was not reserved for it")));
          }
          PromiseAndFuture<hlo::Literal> shard = MakePromise<hlo::Literal>();
          shards.push_back(std::move(shard.future));
          transfers_->Execute([this, host_buffer,
                               promise = std::move(shard.promise)]() mutable {
            Download(host_buffer, std::move(promise));
          });
        }
        JoinFutures(std::move(shards))
            .OnReady(InlineExecutor::Instance(),
                     [promise = std::move(promise)](
                         const absl::StatusOr<Shards>& values) mutable {
                       promise.Set(values);
                     });
      });
  if (!sent.ok()) return MakeErrorFuture<Shards>(sent);
  return std::move(pair.future);
}

void GrpcSessionChannel::Download(uint64_t host_buffer,
                                  Promise<hlo::Literal> promise) {
  grpc::ClientContext context;
  AddCredentials(connection_->options().security, &context);
  wire::HostBufferGet request;
  {
    absl::MutexLock lock(&mu_);
    transfer_contexts_.insert(&context);
    request.set_session(session_.value());
    request.set_key(key_);
    request.set_host_buffer(host_buffer);
  }
  std::unique_ptr<grpc::ClientReader<wire::HostBufferData>> reader =
      connection_->bulk().GetHostBuffer(&context, request);
  const WireLimits& limits = connection_->options().limits;
  wire::HostBufferData message;
  absl::StatusOr<ValueAssembler> assembler =
      absl::DataLossError("the download ended before its header");
  bool have_header = false;
  absl::Status status;
  while (reader->Read(&message)) {
    if (!have_header) {
      if (!message.has_header()) {
        status = absl::DataLossError("the download did not start with a header");
        break;
      }
      assembler = ValueAssembler::Create(message.header(), limits,
                                         FieldPath("HostBufferData.header"));
      have_header = true;
      if (!assembler.ok()) break;
      continue;
    }
    status = message.has_chunk() ? assembler->Append(message.chunk().data())
                                 : absl::DataLossError(
                                       "the download sent a second header");
    if (!status.ok()) break;
  }
  if (!status.ok() || !assembler.ok()) context.TryCancel();
  grpc::Status finished = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    transfer_contexts_.erase(&context);
  }
  const std::string what = absl::StrCat("downloading host buffer ",
                                         host_buffer);
  // The call's own failure first: a head lost before the header is not a
  // download that "ended before its header".
  if (status.ok() && !finished.ok()) {
    return promise.Set(TransferError(finished, what, ""));
  }
  if (status.ok() && !assembler.ok()) status = assembler.status();
  if (!status.ok()) {
    promise.Set(absl::Status(status.code(),
                             absl::StrCat(what, ": ", status.message())));
    return;
  }
  promise.Set(std::move(*assembler).Finish());
}

void GrpcSessionChannel::Delete(std::vector<ArrayHandle> arrays) {
  wire::SessionRequest message;
  for (ArrayHandle array : arrays) {
    message.mutable_delete_arrays()->add_arrays(array.value());
  }
  Send(std::move(message), nullptr).IgnoreError();
}

Future<StatusReport> GrpcSessionChannel::GetStatus() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kNew) {
      // No session: ask the head directly.
      PromiseAndFuture<StatusReport> pair = MakePromise<StatusReport>();
      transfers_->Execute([this, promise = std::move(pair.promise)]() mutable {
        absl::StatusOr<GrpcHeadConnection::ClusterStatus> status =
            connection_->GetClusterStatus(absl::Seconds(30));
        if (!status.ok()) return promise.Set(status.status());
        promise.Set(std::move(status->report));
      });
      return std::move(pair.future);
    }
  }
  wire::SessionRequest message;
  message.mutable_get_status();
  const WireLimits& limits = connection_->options().limits;
  return Call<StatusReport>(
      std::move(message), [&limits](const wire::SessionResponse& r) {
        return FromWire(r.status_report(), limits,
                        FieldPath("SessionResponse.status_report"));
      });
}

Future<std::string> GrpcSessionChannel::GetTrace() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kNew) {
      PromiseAndFuture<std::string> pair = MakePromise<std::string>();
      transfers_->Execute([this, promise = std::move(pair.promise)]() mutable {
        absl::StatusOr<GrpcHeadConnection::ClusterStatus> status =
            connection_->GetClusterStatus(absl::Seconds(30),
                                          /*include_trace=*/true);
        if (!status.ok()) return promise.Set(status.status());
        promise.Set(std::move(status->trace));
      });
      return std::move(pair.future);
    }
  }
  wire::SessionRequest message;
  message.mutable_get_trace();
  const WireLimits& limits = connection_->options().limits;
  return Call<std::string>(
      std::move(message), [&limits](const wire::SessionResponse& r) {
        return StringFromWire(r.trace().json(), limits.max_string_bytes,
                              FieldPath("SessionResponse.trace.json"));
      });
}

}  // namespace causeway::transport
