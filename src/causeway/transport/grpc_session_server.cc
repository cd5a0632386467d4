#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_session_server.h"

#include <grpcpp/alarm.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/grpc_reactor_writes.h"
#include "causeway/transport/grpc_stream_writer.h"

namespace causeway::transport {

// The bytes of host buffers all sessions hold together, bounded: many
// sessions, each within its own budget, cannot exhaust the head for the
// others. Thread-safe.
class GrpcSessionServer::HostBufferBudget {
 public:
  explicit HostBufferBudget(int64_t limit) : limit_(limit) {}

  // Takes `bytes` for `what` if they fit; ResourceExhausted naming the
  // limit if not.
  absl::Status Take(int64_t bytes, const std::string& what) {
    absl::MutexLock lock(&mu_);
    if (bytes > limit_ - used_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " (", bytes, " bytes) does not fit: the head holds ", used_,
          " bytes of host buffers for all its sessions, of at most ", limit_,
          " (--max-host-buffer-bytes); try again when others' uploads and "
          "downloads are done"));
    }
    used_ += bytes;
    return absl::OkStatus();
  }
  void Give(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    used_ -= bytes;
  }

 private:
  const int64_t limit_;
  absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

// The host buffers of one session: uploads on their way to the head (a
// `put_array` takes each once its bytes have come) and downloads waiting to
// be fetched. Bounded in bytes, per session and (`head_wide`) for all
// sessions together. Thread-safe; promises are set outside the lock (their
// callbacks may run inline).
class GrpcSessionServer::HostBuffers {
 public:
  HostBuffers(int64_t budget, std::shared_ptr<HostBufferBudget> head_wide)
      : budget_(budget), head_wide_(std::move(head_wide)) {}

  // An upload of `bytes` bytes into `id` starts.
  absl::Status BeginUpload(uint64_t id, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("the session ended");
    Upload& upload = UploadLocked(id);
    if (upload.begun) {
      return absl::InvalidArgumentError(
          absl::StrCat("host buffer ", id, " is uploaded twice"));
    }
    if (bytes > budget_ - used_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "host buffer ", id, " (", bytes, " bytes) does not fit: the "
          "session holds ", used_, " bytes of host buffers of at most ",
          budget_, " (--max-host-buffer-bytes-per-session)"));
    }
    CW_RETURN_IF_ERROR(
        head_wide_->Take(bytes, absl::StrCat("host buffer ", id)));
    upload.begun = true;
    upload.bytes = bytes;
    used_ += bytes;
    return absl::OkStatus();
  }

  // The upload into `id` ended with `value` (or its error).
  void EndUpload(uint64_t id, absl::StatusOr<hlo::Literal> value) {
    std::optional<Promise<hlo::Literal>> promise;
    {
      absl::MutexLock lock(&mu_);
      auto it = uploads_.find(id);
      if (closed_ || it == uploads_.end() || !it->second.promise) return;
      promise = std::move(it->second.promise);
      it->second.promise.reset();
      if (it->second.taken) EraseLocked(it);
    }
    promise->Set(std::move(value));
  }

  // The value of upload `id`, once its bytes have come. Each id is taken
  // once.
  Future<hlo::Literal> TakeUpload(uint64_t id) {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return MakeErrorFuture<hlo::Literal>(
          absl::FailedPreconditionError("the session ended"));
    }
    Upload& upload = UploadLocked(id);
    if (upload.taken) {
      return MakeErrorFuture<hlo::Literal>(absl::InvalidArgumentError(
          absl::StrCat("host buffer ", id, " is named by two put_arrays")));
    }
    upload.taken = true;
    Future<hlo::Literal> future = upload.future;
    if (!upload.promise) EraseLocked(uploads_.find(id));
    return future;
  }

  absl::Status StoreDownload(uint64_t id, hlo::Literal value) {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("the session ended");
    if (downloads_.contains(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("host buffer ", id, " already holds a fetched value"));
    }
    const int64_t bytes = value.size_bytes();
    if (bytes > budget_ - used_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the fetched value (", bytes, " bytes) does not fit: the session "
          "holds ", used_, " bytes of host buffers of at most ", budget_,
          " (--max-host-buffer-bytes-per-session); download what was "
          "fetched first"));
    }
    CW_RETURN_IF_ERROR(head_wide_->Take(bytes, "the fetched value"));
    used_ += bytes;
    downloads_.emplace(id, std::move(value));
    return absl::OkStatus();
  }

  absl::StatusOr<hlo::Literal> TakeDownload(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = downloads_.find(id);
    if (it == downloads_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "host buffer ", id, " holds no fetched value (fetch it first; each "
          "is downloaded once)"));
    }
    hlo::Literal value = std::move(it->second);
    downloads_.erase(it);
    used_ -= value.size_bytes();
    head_wide_->Give(value.size_bytes());
    return value;
  }

  // Fails every upload still coming with `why`; drops everything.
  void Close(const absl::Status& why) {
    std::vector<Promise<hlo::Literal>> waiting;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      for (auto& [id, upload] : uploads_) {
        if (upload.promise) waiting.push_back(std::move(*upload.promise));
      }
      uploads_.clear();
      downloads_.clear();
      head_wide_->Give(used_);
      used_ = 0;
    }
    for (Promise<hlo::Literal>& promise : waiting) promise.Set(why);
  }

 private:
  struct Upload {
    std::optional<Promise<hlo::Literal>> promise;  // Until the bytes came.
    Future<hlo::Literal> future;
    bool begun = false;
    bool taken = false;
    int64_t bytes = 0;
  };

  Upload& UploadLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto [it, inserted] = uploads_.try_emplace(id);
    if (inserted) {
      PromiseAndFuture<hlo::Literal> pair = MakePromise<hlo::Literal>();
      it->second.promise.emplace(std::move(pair.promise));
      it->second.future = std::move(pair.future);
    }
    return it->second;
  }
  void EraseLocked(std::map<uint64_t, Upload>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    used_ -= it->second.bytes;
    head_wide_->Give(it->second.bytes);
    uploads_.erase(it);
  }

  const int64_t budget_;
  const std::shared_ptr<HostBufferBudget> head_wide_;
  absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Upload> uploads_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, hlo::Literal> downloads_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

struct GrpcSessionServer::SessionState {
  SessionState(SessionId id, std::string key,
               grpc::CallbackServerContext* context,
               int64_t budget, std::shared_ptr<HostBufferBudget> head_wide,
               double request_rate, double request_burst)
      : id(id),
        key(std::move(key)),
        context(context),
        buffers(budget, std::move(head_wide)),
        requests(request_rate, request_burst) {}

  // Queues an answer (dropped once the session's stream is done).
  void Answer(uint64_t op_id, const absl::Status& status,
              wire::SessionResponse response = {}) {
    response.set_op_id(op_id);
    if (!status.ok()) {
      response.clear_response();
      ToWire(status, response.mutable_status());
    }
    writer->Send(std::move(response));
  }

  // Answers `op_id` when `future` resolves: `fill(value, &response)` on
  // success (nothing to fill for a Future<>), the error otherwise.
  template <typename T, typename Fill>
  void AnswerWhenReady(uint64_t op_id, const Future<T>& future, Fill fill,
                       const std::shared_ptr<SessionState>& self) {
    future.OnReady(InlineExecutor::Instance(),
                   [self, op_id, fill = std::move(fill)](
                       const internal::FutureResult<T>& result) mutable {
                     wire::SessionResponse response;
                     const absl::Status& status = internal::StatusOf(result);
                     if (status.ok()) {
                       if constexpr (std::is_void_v<T>) {
                         fill(&response);
                       } else {
                         fill(*result, &response);
                       }
                     }
                     self->Answer(op_id, status, std::move(response));
                   });
  }

  const SessionId id;
  const std::string key;
  grpc::CallbackServerContext* const context;  // Alive while in sessions_.
  HostBuffers buffers;
  // The bound on this session's requests. It and last_op_id are touched
  // by one request at a time: the next is read once this one was handed
  // over.
  RateLimiter requests;
  std::shared_ptr<StreamWriter<wire::SessionResponse>> writer;
  uint64_t last_op_id = 0;
};

namespace {

void Done(wire::SessionResponse* response) { response->mutable_done(); }

// Calls `then` once, on `executor`: with `future`'s result when it
// resolves, or with DeadlineExceeded (naming `what`) once `timeout` passed
// first. No thread waits: the timeout is a gRPC alarm.
template <typename T>
void OnReadyWithin(const Future<T>& future, absl::Duration timeout,
                   const std::string& what, Executor& executor,
                   absl::AnyInvocable<void(absl::StatusOr<T>)> then) {
  struct Race {
    std::atomic<bool> decided{false};
    absl::AnyInvocable<void(absl::StatusOr<T>)> then;
    grpc::Alarm alarm;
  };
  auto race = std::make_shared<Race>();
  race->then = std::move(then);
  // The alarm's callback holds the race weakly: it never keeps it (and so
  // itself) alive.
  race->alarm.Set(absl::ToChronoTime(absl::Now() + timeout),
                  [weak = std::weak_ptr<Race>(race), timeout, what,
                   &executor](bool fired) {
                    std::shared_ptr<Race> race = weak.lock();
                    if (!fired || race == nullptr ||
                        race->decided.exchange(true)) {
                      return;
                    }
                    executor.Execute([race, timeout, what] {
                      race->then(absl::DeadlineExceededError(absl::StrCat(
                          what, " did not come within ",
                          absl::FormatDuration(timeout))));
                    });
                  });
  future.OnReady(executor, [race](const absl::StatusOr<T>& result) {
    if (race->decided.exchange(true)) return;
    race->alarm.Cancel();
    race->then(result);
  });
}

std::string NewSessionKey() {
  std::string key(16, '\0');
  for (int i = 0; i < 2; ++i) {
    const uint64_t bits = RandomUint64();
    std::memcpy(key.data() + 8 * i, &bits, 8);
  }
  return key;
}

}  // namespace

GrpcSessionServer::GrpcSessionServer(SessionService* service,
                                     const TokenCheck* auth,
                                     GrpcSessionServerOptions options)
    : service_(service),
      auth_(auth),
      options_(std::move(options)),
      host_buffer_budget_(std::make_shared<HostBufferBudget>(
          options_.max_host_buffer_bytes)),
      session_opens_(options_.max_session_opens_per_second,
                     options_.session_open_burst),
      slow_("head-sessions", 2) {}

GrpcSessionServer::~GrpcSessionServer() { Shutdown(); }

void GrpcSessionServer::Shutdown() {
  std::vector<std::shared_ptr<SessionState>> sessions;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, session] : sessions_) {
      sessions.push_back(session);
      // Under the lock: a handler erases its session under it before it
      // returns and its context dies, so this context is alive. TryCancel
      // only marks the call; it runs nothing of ours.
      session->context->TryCancel();
    }
  }
  for (const std::shared_ptr<SessionState>& session : sessions) {
    session->buffers.Close(absl::UnavailableError("the head is shutting down"));
  }
}

int64_t GrpcSessionServer::num_sessions() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(sessions_.size());
}

void GrpcSessionServer::EndUnreadSession(SessionId id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id.value());
  if (it == sessions_.end()) return;
  // Under the lock, as in Shutdown: the context is alive. The handler's
  // Read then fails, and it ends the session saying why.
  it->second->context->TryCancel();
}

absl::StatusOr<std::shared_ptr<GrpcSessionServer::SessionState>>
GrpcSessionServer::FindSession(int64_t id, const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->key != key) {
    // A session ended by the shutdown is gone because the head is: its
    // client's transfer in flight must read as that (UNAVAILABLE), not as
    // a session it got wrong.
    if (shut_down_) {
      return absl::UnavailableError(absl::StrCat(
          "the head is shutting down (session ", id, " is closed)"));
    }
    return absl::NotFoundError(absl::StrCat("no open session ", id));
  }
  return it->second;
}

grpc::Status GrpcSessionServer::GetVersion(grpc::ServerContext* context,
                                           const wire::VersionRequest* request,
                                           wire::VersionResponse* response) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  absl::StatusOr<uint32_t> version =
      ChooseProtocolVersion(kSessionProtocol, request->min_version(),
                            request->max_version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  response->set_version(*version);
  return grpc::Status::OK;
}

// One client's Session stream. Its reactions run on gRPC's threads and
// never block there; OnDone runs last and deletes it. The first read is
// `open`; then requests are read one at a time and handed over
// (HandleRequest), the next read starting once the head has the last. The
// session's end (closing it on the head, which may take a while) runs on
// the server's `slow_` threads; the call finishes once what must still be
// written was (the answer to `close`, or the queue before an error).
class GrpcSessionServer::SessionStream final
    : public grpc::ServerBidiReactor<wire::SessionRequest,
                                     wire::SessionResponse> {
 public:
  SessionStream(GrpcSessionServer* server, grpc::CallbackServerContext* context)
      : server_(server),
        context_(context),
        writes_(std::make_shared<Writes>(this)) {
    if (grpc::Status denied = server_->auth_->Check(*context); !denied.ok()) {
      FinishWith(denied);
      return;
    }
    ReadNext();
  }

  void OnReadDone(bool ok) override {
    if (session_ == nullptr) {
      if (ok) {
        Open();
      } else {
        FinishWith(grpc::Status::OK);  // Gone before `open`.
      }
      return;
    }
    if (!ok) {
      // Broken, cancelled, or half-closed without `close`.
      End(/*closed_by_client=*/false, absl::OkStatus());
      return;
    }
    server_->HandleRequest(session_, *request_,
                           [this](bool go_on, absl::Status error) {
                             if (go_on) {
                               ReadNext();
                             } else {
                               const bool closed = error.ok();
                               End(closed, std::move(error));
                             }
                           });
  }

  void OnWriteDone(bool ok) override {
    if (std::optional<grpc::Status> finish = writes_->WriteDone(ok)) {
      Finish(*std::move(finish));
    }
  }

  void OnDone() override { delete this; }

 private:
  using Writer = StreamWriter<wire::SessionResponse>;
  using Writes =
      ReactorWrites<wire::SessionRequest, wire::SessionResponse, Writer>;

  void ReadNext() {
    request_ = requests_.Next();
    StartRead(request_);
  }

  // The first request: opens the session, answers `opened`, reads on.
  void Open() {
    const wire::SessionRequest& first = *request_;
    if (first.request_case() != wire::SessionRequest::kOpen) {
      FinishWith(ToGrpcStatus(absl::InvalidArgumentError(
          "SessionRequest: the first request of a session must be `open`")));
      return;
    }
    const uint32_t version = first.open().version();
    if (!kSessionProtocol.Contains(version)) {
      FinishWith(ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          "SessionRequest.open.version: ", version, " is not one this head "
          "speaks (", kSessionProtocol.min, "..", kSessionProtocol.max,
          "): call GetVersion first"))));
      return;
    }
    absl::StatusOr<OpenSessionRequest> open =
        FromWire(first.open(), server_->options_.limits,
                 FieldPath("SessionRequest.open"));
    if (!open.ok()) {
      FinishWith(ToGrpcStatus(open.status()));
      return;
    }
    {
      absl::MutexLock lock(&server_->mu_);
      if (server_->shut_down_) {
        FinishWith(ToGrpcStatus(
            absl::UnavailableError("the head is shutting down")));
        return;
      }
    }
    if (!server_->session_opens_.TryAcquire()) {
      FinishWith(ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
          "SessionRequest.open: the head opens at most ",
          server_->session_opens_.rate(), " sessions a second for all its "
          "clients (--max-session-opens-per-second), and more came: try "
          "again shortly"))));
      return;
    }
    // Leased: a client that goes silent (killed, cut off) loses it.
    absl::StatusOr<SessionId> id =
        server_->service_->OpenSession(*open, SessionLease::kLeased);
    if (!id.ok()) {
      FinishWith(ToGrpcStatus(id.status()));
      return;
    }
    const GrpcSessionServerOptions& options = server_->options_;
    auto session = std::make_shared<SessionState>(
        *id, NewSessionKey(), context_,
        options.max_host_buffer_bytes_per_session, server_->host_buffer_budget_,
        options.max_requests_per_second_per_session,
        options.session_request_burst);
    session->last_op_id = first.op_id();
    Writer::Options writer;
    writer.start = [writes = writes_](const wire::SessionResponse& response) {
      return writes->Start(response);
    };
    // A client that sends requests and never reads their answers: its
    // answers pile up only so far, then its session ends (it reads
    // nothing, so the head's log says why).
    writer.max_queued_bytes = options.max_answer_bytes_per_session;
    writer.on_overflow = [server = server_, id = *id] {
      server->EndUnreadSession(id);
    };
    session->writer = std::make_shared<Writer>(std::move(writer));
    writes_->set_writer(session->writer);
    bool shut_down = false;
    {
      absl::MutexLock lock(&server_->mu_);
      shut_down = server_->shut_down_;
      if (!shut_down) server_->sessions_[id->value()] = session;
    }
    if (shut_down) {
      server_->service_->CloseSession(*id);
      session->writer->Close(/*drain=*/false);
      FinishWith(
          ToGrpcStatus(absl::UnavailableError("the head is shutting down")));
      return;
    }
    session_ = std::move(session);

    wire::SessionResponse opened;
    opened.mutable_opened()->set_session(id->value());
    opened.mutable_opened()->set_key(session_->key);
    opened.mutable_opened()->set_lease_ms(
        absl::ToInt64Milliseconds(options.lease));
    session_->Answer(first.op_id(), absl::OkStatus(), std::move(opened));
    ReadNext();
  }

  // No more requests are read: the session ends, on `slow_`.
  void End(bool closed_by_client, absl::Status session_error) {
    server_->slow_.Execute([this, closed_by_client,
                            session_error = std::move(session_error)]() mutable {
      EndNow(closed_by_client, std::move(session_error));
    });
  }

  void EndNow(bool closed_by_client, absl::Status session_error) {
    const SessionId id = session_->id;
    {
      absl::MutexLock lock(&server_->mu_);
      server_->sessions_.erase(id.value());
    }
    session_->buffers.Close(
        absl::CancelledError(absl::StrCat("session ", id.value(), " ended")));
    Writer& writer = *session_->writer;
    if (closed_by_client) {
      // The answer to `close` is queued: send it, then end the stream.
      FinishOnceWritten(grpc::Status::OK);
      return;
    }
    // Broken, cancelled, half-closed without `close`, or ended by a bad
    // request: the session goes now (its lease would end it anyway).
    server_->service_->CloseSession(id);
    const int64_t max_answer_bytes =
        server_->options_.max_answer_bytes_per_session;
    if (session_error.ok() && writer.overflowed()) {
      session_error = absl::ResourceExhaustedError(absl::StrCat(
          "session ", id.value(), ": more than ", max_answer_bytes,
          " bytes of its answers waited to be written "
          "(--max-answer-bytes-per-session): its client does not read them"));
    }
    if (session_error.ok() && !context_->IsCancelled()) {
      // Read fails alike for a client that half-closed without `close` and
      // for a message that does not parse: either way not the protocol.
      session_error = absl::InvalidArgumentError(absl::StrCat(
          "session ", id.value(),
          "'s stream ended without `close`, or with a message that does not "
          "parse"));
    }
    if (!session_error.ok()) {
      CW_LOG(WARNING) << "session " << id.value()
                      << " ended: " << session_error;
      FinishOnceWritten(ToGrpcStatus(session_error));
      return;
    }
    writer.Close(/*drain=*/false);
    FinishWith(ToGrpcStatus(absl::CancelledError(absl::StrCat(
        "session ", id.value(), " was cancelled by its client"))));
  }

  // Finishes with `status` once every answer queued now was written.
  void FinishOnceWritten(grpc::Status status) {
    Writer& writer = *session_->writer;
    writer.Close(/*drain=*/true);
    writer.WhenDrained(
        [this, status = std::move(status)] { FinishWith(status); });
  }

  // Finishes the call with `status`, once no write is in progress.
  void FinishWith(const grpc::Status& status) {
    if (writes_->FinishWhenIdle(status)) Finish(status);
  }

  GrpcSessionServer* const server_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Writes> writes_;
  // Set by Open; the stream's reactions and EndNow use it one at a time.
  std::shared_ptr<SessionState> session_;
  ReusedArenaMessage<wire::SessionRequest> requests_;
  wire::SessionRequest* request_ = nullptr;  // In requests_.
};

grpc::ServerBidiReactor<wire::SessionRequest, wire::SessionResponse>*
GrpcSessionServer::Session(grpc::CallbackServerContext* context) {
  return new SessionStream(this, context);
}

void GrpcSessionServer::HandleRequest(
    const std::shared_ptr<SessionState>& session,
    const wire::SessionRequest& request, Then then) {
  const uint64_t op_id = request.op_id();
  if (request.request_case() == wire::SessionRequest::kKeepAlive &&
      op_id == 0) {
    service_->Touch(session->id);
    then(true, absl::OkStatus());
    return;
  }
  if (op_id <= session->last_op_id) {
    then(false, absl::InvalidArgumentError(absl::StrCat(
                    "SessionRequest.op_id: ", op_id, " does not follow ",
                    session->last_op_id, " (op ids strictly increase)")));
    return;
  }
  session->last_op_id = op_id;
  const SessionId id = session->id;
  if (!session->requests.TryAcquire()) {
    then(false,
         absl::ResourceExhaustedError(absl::StrCat(
             "session ", id.value(), " sent more than ",
             session->requests.rate(), " requests a second (in bursts of ",
             session->requests.burst(),
             "; head flag --max-requests-per-second-per-session): the "
             "session ends, other sessions go on")));
    return;
  }
  switch (request.request_case()) {
    case wire::SessionRequest::kClose:
      // Closing releases everything the session holds: on slow_.
      slow_.Execute([this, session, op_id, then = std::move(then)]() mutable {
        service_->CloseSession(session->id)
            .OnReady(InlineExecutor::Instance(),
                     [session, op_id, then = std::move(then)](
                         const absl::Status& status) mutable {
                       wire::SessionResponse done;
                       done.mutable_done();
                       session->Answer(op_id, status, std::move(done));
                       then(false, absl::OkStatus());
                     });
      });
      return;
    case wire::SessionRequest::kCompile: {
      absl::StatusOr<CompileRequest> compile = FromWire(
          request.compile(), options_.limits,
          FieldPath("SessionRequest").Field("compile"));
      if (!compile.ok()) {
        session->Answer(op_id, compile.status());
        then(true, absl::OkStatus());
        return;
      }
      // The head parses and checks the program as it takes it: on slow_.
      slow_.Execute([this, session, op_id, compile = *std::move(compile),
                     then = std::move(then)]() mutable {
        session->AnswerWhenReady(
            op_id, service_->Compile(session->id, std::move(compile)),
            [](const CompileInfo& info, wire::SessionResponse* r) {
              ToWire(info, r->mutable_compiled());
            },
            session);
        then(true, absl::OkStatus());
      });
      return;
    }
    case wire::SessionRequest::kPutArray:
      HandlePutArray(session, op_id, request.put_array(), std::move(then));
      return;
    case wire::SessionRequest::kPutShards:
      HandlePutShards(session, op_id, request.put_shards(), std::move(then));
      return;
    default: {
      absl::Status error;
      const bool go_on = HandleAtOnce(session, request, &error);
      then(go_on, std::move(error));
    }
  }
}

bool GrpcSessionServer::HandleAtOnce(
    const std::shared_ptr<SessionState>& session,
    const wire::SessionRequest& request, absl::Status* session_error) {
  const uint64_t op_id = request.op_id();
  const SessionId id = session->id;
  const WireLimits& limits = options_.limits;
  const FieldPath root("SessionRequest");
  // A malformed fire-and-forget request has no answer to carry its error:
  // it ends the session with that error instead.
  auto fail_session = [&](absl::Status status) {
    *session_error = std::move(status);
    return false;
  };
  switch (request.request_case()) {
    case wire::SessionRequest::kOpen:
      return fail_session(absl::FailedPreconditionError(
          "SessionRequest.open: this stream's session is open already; "
          "open another stream for another session"));
    case wire::SessionRequest::kKeepAlive:
      service_->Touch(id);
      return true;
    case wire::SessionRequest::kRequestSlice: {
      absl::StatusOr<SliceRequest> slice = FromWire(
          request.request_slice(), limits, root.Field("request_slice"));
      if (!slice.ok()) {
        session->Answer(op_id, slice.status());
        return true;
      }
      session->AnswerWhenReady(
          op_id, service_->RequestSlice(id, *std::move(slice)),
          [](const SliceInfo& info, wire::SessionResponse* r) {
            ToWire(info, r->mutable_slice());
          },
          session);
      return true;
    }
    case wire::SessionRequest::kGetSlice:
      session->AnswerWhenReady(
          op_id,
          service_->GetSlice(id, SliceHandle(request.get_slice().handle())),
          [](const SliceInfo& info, wire::SessionResponse* r) {
            ToWire(info, r->mutable_slice());
          },
          session);
      return true;
    case wire::SessionRequest::kReleaseSlice:
      session->AnswerWhenReady(
          op_id,
          service_->ReleaseSlice(id,
                                 SliceHandle(request.release_slice().handle())),
          Done, session);
      return true;
    case wire::SessionRequest::kClose:
    case wire::SessionRequest::kCompile:
    case wire::SessionRequest::kPutArray:
    case wire::SessionRequest::kPutShards:
      break;  // HandleRequest hands these over itself: never here.
    case wire::SessionRequest::kExecute: {
      absl::StatusOr<ExecuteOp> op =
          FromWire(request.execute(), limits, root.Field("execute"));
      if (!op.ok()) return fail_session(op.status());
      service_->Execute(id, *std::move(op));
      return true;
    }
    case wire::SessionRequest::kCopy: {
      absl::StatusOr<CopyOp> op =
          FromWire(request.copy(), limits, root.Field("copy"));
      if (!op.ok()) return fail_session(op.status());
      service_->Copy(id, *std::move(op));
      return true;
    }
    case wire::SessionRequest::kSubmit: {
      absl::StatusOr<ProgramGraph> graph =
          FromWire(request.submit(), limits, root.Field("submit"));
      if (!graph.ok()) return fail_session(graph.status());
      service_->Submit(id, *std::move(graph));
      return true;
    }
    case wire::SessionRequest::kDeleteArrays: {
      const auto& handles = request.delete_arrays().arrays();
      if (handles.size() > limits.max_entries) {
        return fail_session(
            root.Field("delete_arrays")
                .Field("arrays")
                .Invalid(absl::StrCat(handles.size(), " entries (at most ",
                                      limits.max_entries, ")")));
      }
      std::vector<ArrayHandle> arrays;
      arrays.reserve(handles.size());
      for (uint64_t handle : handles) arrays.push_back(ArrayHandle(handle));
      service_->Delete(id, std::move(arrays));
      return true;
    }
    case wire::SessionRequest::kArrayReady:
      session->AnswerWhenReady(
          op_id,
          service_->ArrayReady(id, ArrayHandle(request.array_ready().array())),
          Done, session);
      return true;
    case wire::SessionRequest::kFetch: {
      const uint64_t host_buffer = request.fetch().host_buffer();
      service_->Fetch(id, ArrayHandle(request.fetch().array()))
          .OnReady(InlineExecutor::Instance(),
                   [session, op_id, host_buffer](
                       const absl::StatusOr<hlo::Literal>& value) {
                     if (!value.ok()) {
                       session->Answer(op_id, value.status());
                       return;
                     }
                     wire::SessionResponse response;
                     response.mutable_fetched()->set_host_buffer(host_buffer);
                     response.mutable_fetched()->set_byte_size(value->size_bytes());
                     absl::Status stored;
                     if (TravelsInline(*value)) {
                       ToWire(*value, response.mutable_fetched()->mutable_value());
                     } else {
                       stored = session->buffers.StoreDownload(host_buffer, *value);
                     }
                     session->Answer(op_id, stored, std::move(response));
                   });
      return true;
    }
    case wire::SessionRequest::kFetchShards: {
      const wire::FetchShardsRequest& fetch = request.fetch_shards();
      const uint64_t first = fetch.first_host_buffer();
      const uint64_t max_shards = fetch.max_shards();
      service_->FetchShards(id, ArrayHandle(fetch.array()))
          .OnReady(InlineExecutor::Instance(),
                   [session, op_id, first, max_shards](
                       const absl::StatusOr<std::vector<hlo::Literal>>& values) {
                     if (!values.ok()) {
                       session->Answer(op_id, values.status());
                       return;
                     }
                     if (values->size() > max_shards) {
                       session->Answer(
                           op_id, absl::InvalidArgumentError(absl::StrCat(
                                      "fetch_shards: the array has ",
                                      values->size(), " shards but max_shards "
                                      "is ", max_shards)));
                       return;
                     }
                     wire::SessionResponse response;
                     absl::Status stored;
                     for (size_t i = 0; i < values->size() && stored.ok();
                          ++i) {
                       stored = session->buffers.StoreDownload(first + i,
                                                               (*values)[i]);
                       wire::FetchReady* ready =
                           response.mutable_fetched_shards()->add_shards();
                       ready->set_host_buffer(first + i);
                       ready->set_byte_size((*values)[i].size_bytes());
                     }
                     session->Answer(op_id, stored, std::move(response));
                   });
      return true;
    }
    case wire::SessionRequest::kGetStatus:
      session->AnswerWhenReady(
          op_id, service_->GetStatus(),
          [](const StatusReport& report, wire::SessionResponse* r) {
            ToWire(report, r->mutable_status_report());
          },
          session);
      return true;
    case wire::SessionRequest::kGetTrace:
      session->AnswerWhenReady(
          op_id, service_->GetTrace(),
          [](const std::string& json, wire::SessionResponse* r) {
            r->mutable_trace()->set_json(json);
          },
          session);
      return true;
    case wire::SessionRequest::REQUEST_NOT_SET:
      break;
  }
  return fail_session(absl::InvalidArgumentError(absl::StrCat(
      "SessionRequest (op_id ", op_id, "): no request, or one this head "
      "does not know")));
}

namespace {

// Why a session ends when the upload of `what` failed with `error`: a
// missing upload stays DEADLINE_EXCEEDED, anything else is DATA_LOSS.
absl::Status FailedUpload(const absl::Status& error, const std::string& what) {
  return absl::Status(
      error.code() == absl::StatusCode::kDeadlineExceeded
          ? absl::StatusCode::kDeadlineExceeded
          : absl::StatusCode::kDataLoss,
      absl::StrCat("the upload of ", what, " failed: ", error.message(),
                   "; a failed upload ends the session"));
}

}  // namespace

void GrpcSessionServer::HandlePutArray(
    const std::shared_ptr<SessionState>& session, uint64_t op_id,
    const wire::PutArray& request, Then then) {
  const uint64_t host_buffer = request.host_buffer();
  // The bytes are taken whatever happens, so that they do not linger.
  Future<hlo::Literal> upload = session->buffers.TakeUpload(host_buffer);
  absl::StatusOr<ArraySpec> spec =
      FromWire(request.spec(), options_.limits,
               FieldPath("SessionRequest.put_array.spec"));
  if (!spec.ok()) {
    session->Answer(op_id, spec.status());
    then(true, absl::OkStatus());
    return;
  }
  // In stream order: the head sees the array before any later request
  // that names it (the next read waits for `then`).
  const std::string what = absl::StrCat("array ", spec->handle.value(),
                                        " (host buffer ", host_buffer, ")");
  OnReadyWithin<hlo::Literal>(
      upload, options_.upload_timeout, absl::StrCat("the bytes of ", what),
      slow_,
      [this, session, op_id, what, spec = *std::move(spec),
       then = std::move(then)](absl::StatusOr<hlo::Literal> value) mutable {
        if (!value.ok()) {
          then(false, FailedUpload(value.status(), what));
          return;
        }
        session->AnswerWhenReady(
            op_id,
            service_->PutArray(session->id, std::move(spec), *std::move(value)),
            Done, session);
        then(true, absl::OkStatus());
      });
}

void GrpcSessionServer::HandlePutShards(
    const std::shared_ptr<SessionState>& session, uint64_t op_id,
    const wire::PutShards& request, Then then) {
  const FieldPath path("SessionRequest.put_shards");
  if (request.host_buffers_size() > options_.limits.max_entries) {
    then(false, path.Field("host_buffers")
                    .Invalid(absl::StrCat(request.host_buffers_size(),
                                          " entries (at most ",
                                          options_.limits.max_entries, ")")));
    return;
  }
  // The bytes are taken whatever happens, so that they do not linger.
  std::vector<Future<hlo::Literal>> uploads;
  for (uint64_t host_buffer : request.host_buffers()) {
    uploads.push_back(session->buffers.TakeUpload(host_buffer));
  }
  absl::StatusOr<ArraySpec> spec =
      FromWire(request.spec(), options_.limits, path.Field("spec"));
  if (!spec.ok()) {
    session->Answer(op_id, spec.status());
    then(true, absl::OkStatus());
    return;
  }
  // In stream order, as put_array; the timeout bounds the wait for all of
  // the shards' bytes together.
  std::vector<uint64_t> host_buffers(request.host_buffers().begin(),
                                     request.host_buffers().end());
  const int64_t array = spec->handle.value();
  OnReadyWithin<std::vector<hlo::Literal>>(
      JoinFutures(uploads), options_.upload_timeout,
      absl::StrCat("the bytes of the ", uploads.size(), " shards of array ",
                   array),
      slow_,
      [this, session, op_id, array, uploads, host_buffers,
       spec = *std::move(spec), then = std::move(then)](
          absl::StatusOr<std::vector<hlo::Literal>> shards) mutable {
        if (!shards.ok()) {
          // Name the first shard whose upload failed, if one did.
          std::string what = absl::StrCat("the shards of array ", array);
          for (size_t i = 0; i < uploads.size(); ++i) {
            if (uploads[i].IsReady() && !uploads[i].Await().ok()) {
              what = absl::StrCat("shard ", i, " of array ", array,
                                  " (host buffer ", host_buffers[i], ")");
              break;
            }
          }
          then(false, FailedUpload(shards.status(), what));
          return;
        }
        session->AnswerWhenReady(
            op_id,
            service_->PutShards(session->id, std::move(spec),
                                *std::move(shards)),
            Done, session);
        then(true, absl::OkStatus());
      });
}

grpc::Status GrpcSessionServer::PutHostBuffer(
    grpc::ServerContext* context,
    grpc::ServerReader<wire::HostBufferPut>* reader,
    wire::HostBufferPutResponse* response) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  wire::HostBufferPut message;
  if (!reader->Read(&message) || !message.has_header()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "HostBufferPut: the first message must be the header"));
  }
  const wire::HostBufferPutHeader& header = message.header();
  absl::StatusOr<std::shared_ptr<SessionState>> session =
      FindSession(header.session(), header.key());
  if (!session.ok()) return ToGrpcStatus(session.status());
  const uint64_t id = header.host_buffer();
  absl::StatusOr<ValueAssembler> assembler = ValueAssembler::Create(
      header.value(), options_.limits, FieldPath("HostBufferPut.header.value"));
  if (!assembler.ok()) {
    (*session)->buffers.EndUpload(id, assembler.status());
    return ToGrpcStatus(assembler.status());
  }
  if (absl::Status begun =
          (*session)->buffers.BeginUpload(id, assembler->expected_bytes());
      !begun.ok()) {
    return ToGrpcStatus(begun);
  }
  while (reader->Read(&message)) {
    absl::Status appended =
        message.has_chunk()
            ? assembler->Append(message.chunk().data())
            : absl::InvalidArgumentError(
                  "HostBufferPut: a header after the first message");
    if (!appended.ok()) {
      (*session)->buffers.EndUpload(id, appended);
      return ToGrpcStatus(appended);
    }
  }
  if (context->IsCancelled()) {
    absl::Status broken = absl::DataLossError(absl::StrCat(
        "the upload of host buffer ", id, " was cut off"));
    (*session)->buffers.EndUpload(id, broken);
    return ToGrpcStatus(broken);
  }
  absl::StatusOr<hlo::Literal> value = std::move(*assembler).Finish();
  absl::Status status = value.status();
  (*session)->buffers.EndUpload(id, std::move(value));
  return ToGrpcStatus(status);
}

grpc::Status GrpcSessionServer::GetHostBuffer(
    grpc::ServerContext* context, const wire::HostBufferGet* request,
    grpc::ServerWriter<wire::HostBufferData>* writer) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  absl::StatusOr<std::shared_ptr<SessionState>> session =
      FindSession(request->session(), request->key());
  if (!session.ok()) return ToGrpcStatus(session.status());
  absl::StatusOr<hlo::Literal> value =
      (*session)->buffers.TakeDownload(request->host_buffer());
  if (!value.ok()) return ToGrpcStatus(value.status());
  wire::HostBufferData message;
  *message.mutable_header() = ValueHeaderOf(*value);
  if (!WriteValueStream(*writer, message, *value)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the download broke");
  }
  return grpc::Status::OK;
}

grpc::Status GrpcSessionServer::GetClusterStatus(
    grpc::ServerContext* context, const wire::ClusterStatusRequest* request,
    wire::ClusterStatusResponse* response) {
  if (grpc::Status denied = auth_->Check(*context); !denied.ok()) return denied;
  absl::StatusOr<StatusReport> report =
      service_->GetStatus().AwaitFor(absl::Seconds(30));
  if (!report.ok()) return ToGrpcStatus(report.status());
  ToWire(*report, response->mutable_report());
  if (request->include_trace()) {
    absl::StatusOr<std::string> trace =
        service_->GetTrace().AwaitFor(absl::Seconds(30));
    if (!trace.ok()) return ToGrpcStatus(trace.status());
    response->mutable_trace()->set_json(*std::move(trace));
  }
  if (options_.topology) {
    std::shared_ptr<const Topology> topology = options_.topology();
    if (topology != nullptr) ToWire(*topology, response->mutable_topology());
  }
  return grpc::Status::OK;
}

}  // namespace causeway::transport
