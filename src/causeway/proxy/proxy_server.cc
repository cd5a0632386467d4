#include "causeway/proxy/proxy_server.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/executor.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/proxy/proto/grpc_ifrt_service.grpc.pb.h"
#include "causeway/proxy/proxy_session.h"
#include "causeway/proxy/version.h"
#include "causeway/transport/grpc_common.h"
#include "causeway/transport/grpc_reactor_writes.h"
#include "causeway/transport/grpc_stream_writer.h"

namespace causeway::proxy {
namespace {

namespace pb = xla::ifrt::proxy;

constexpr char kSessionMetadataKey[] = "ifrt-proxy-grpc-ifrt-session-metadata-bin";
constexpr char kStoreMetadataKey[] = "ifrt-proxy-grpc-host-buffer-store-metadata-bin";
constexpr size_t kChunkBytes = 1 << 20;
// How long a lookup waits for a buffer that is not stored yet.
constexpr absl::Duration kLookupTimeout = absl::Minutes(10);

grpc::Status GrpcError(const absl::Status& status) {
  return transport::ToGrpcStatus(status);
}

template <typename T>
absl::StatusOr<T> ParseHeader(const grpc::ServerContextBase& context, const char* key) {
  auto [begin, end] = context.client_metadata().equal_range(key);
  if (begin == end) {
    return absl::InvalidArgumentError(
        absl::StrCat("the call has no '", key, "' header"));
  }
  T message;
  if (!message.ParseFromArray(begin->second.data(),
                              static_cast<int>(begin->second.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("the '", key, "' header does not parse"));
  }
  return message;
}

}  // namespace

class ProxyServer::Service final
    : public pb::GrpcIfrtService::WithCallbackMethod_IfrtSession<
          pb::GrpcIfrtService::Service> {
 public:
  Service(client::Client* client, CompileService* compiler,
          ProxyServerOptions options, std::vector<ProxyDevice> devices)
      : client_(client),
        compiler_(compiler),
        options_(std::move(options)),
        devices_(std::move(devices)),
        executor_("proxy", options_.executor_threads) {}

  grpc::Status GetVersion(grpc::ServerContext*, const pb::GrpcGetVersionRequest* request,
                          pb::GrpcGetVersionResponse* response) override {
    absl::StatusOr<pb::IfrtProxyVersion> version = NegotiateVersion(*request);
    if (!version.ok()) {
      CW_LOG(WARNING) << "proxy: refused a client: " << version.status().message();
      return GrpcError(version.status());
    }
    *response->mutable_version() = *version;
    return grpc::Status::OK;
  }

  grpc::ServerBidiReactor<pb::IfrtRequest, pb::IfrtResponse>* IfrtSession(
      grpc::CallbackServerContext* context) override;

  grpc::Status HostBufferStore(
      grpc::ServerContext* context,
      grpc::ServerReader<pb::GrpcHostBufferStoreRequest>* reader,
      pb::GrpcHostBufferStoreResponse*) override {
    absl::StatusOr<pb::GrpcHostBufferStoreMetadata> metadata =
        ParseHeader<pb::GrpcHostBufferStoreMetadata>(*context, kStoreMetadataKey);
    if (!metadata.ok()) return GrpcError(metadata.status());
    absl::StatusOr<std::shared_ptr<ProxySession>> session =
        FindSession(metadata->session_id());
    if (!session.ok()) return GrpcError(session.status());
    const int64_t size = metadata->buffer_size();
    if (absl::Status s = (*session)->host_buffers().CheckSize(size); !s.ok()) {
      return GrpcError(s);
    }
    // Received straight into the storage the array will be made of.
    HostBuffer data(size);
    char* const out = data.data();
    int64_t received = 0;
    pb::GrpcHostBufferStoreRequest chunk;
    while (reader->Read(&chunk)) {
      const int64_t n = static_cast<int64_t>(chunk.data().size());
      if (n > size - received) {
        return GrpcError(absl::DataLossError(absl::StrCat(
            "host buffer ", metadata->handle(), ": more than the ", size,
            " bytes its header announced")));
      }
      if (n > 0) std::memcpy(out + received, chunk.data().data(), n);
      received += n;
    }
    if (received != size) {
      return GrpcError(absl::DataLossError(absl::StrCat(
          "host buffer ", metadata->handle(), ": ", received,
          " bytes arrived of the ", size, " its header announced")));
    }
    return GrpcError((*session)->host_buffers().Store(metadata->handle(), std::move(data)));
  }

  grpc::Status HostBufferLookup(
      grpc::ServerContext* context, const pb::GrpcHostBufferLookupRequest* request,
      grpc::ServerWriter<pb::GrpcHostBufferLookupResponse>* writer) override {
    absl::StatusOr<std::shared_ptr<ProxySession>> session =
        FindSession(request->session_id());
    if (!session.ok()) return GrpcError(session.status());
    Future<HostBuffer> buffer = (*session)->host_buffers().Lookup(request->handle());
    session->reset();  // Do not keep a closed session alive while waiting.
    const absl::Time deadline = std::min(absl::Now() + kLookupTimeout,
                                         absl::FromChrono(context->deadline()));
    absl::StatusOr<HostBuffer> data = buffer.AwaitUntil(deadline);
    if (!data.ok()) {
      if (data.status().code() == absl::StatusCode::kDeadlineExceeded) {
        return GrpcError(absl::DeadlineExceededError(absl::StrCat(
            "host buffer ", request->handle(), " was not stored in time")));
      }
      return GrpcError(data.status());
    }
    const std::string_view bytes = data->bytes();
    pb::GrpcHostBufferLookupResponse chunk;
    size_t offset = 0;
    do {
      const size_t n = std::min(kChunkBytes, bytes.size() - offset);
      chunk.set_data(bytes.data() + offset, n);
      if (!writer->Write(chunk)) break;
      offset += n;
    } while (offset < bytes.size());
    return grpc::Status::OK;
  }

  grpc::Status HostBufferDelete(grpc::ServerContext*,
                                const pb::GrpcHostBufferDeleteRequest* request,
                                pb::GrpcHostBufferDeleteResponse*) override {
    absl::StatusOr<std::shared_ptr<ProxySession>> session =
        FindSession(request->session_id());
    if (!session.ok()) return GrpcError(session.status());
    return GrpcError((*session)->host_buffers().Delete(request->handle()));
  }

  grpc::Status HostBufferReadFromDisk(grpc::ServerContext*,
                                      const pb::GrpcHostBufferReadFromDiskRequest*,
                                      pb::GrpcHostBufferReadFromDiskResponse*) override {
    return GrpcError(absl::UnimplementedError(
        "HostBufferReadFromDisk is not supported by Causeway's proxy (leave "
        "IFRT_PROXY_GRPC_LARGE_TRANSFER_OPTIMIZATION_THRESHOLD_BYTES unset)"));
  }

  // Closes every session and ends its stream: the handlers return, so
  // that the server's shutdown need not wait for the JAX processes.
  void CloseAll() {
    std::vector<std::shared_ptr<ProxySession>> sessions;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, open] : sessions_) {
        sessions.push_back(open.session);
        // Under the lock: a handler erases its session under it before it
        // returns and its context dies, so this context is alive. TryCancel
        // only marks the call; it runs nothing of ours.
        open.context->TryCancel();
      }
    }
    for (const std::shared_ptr<ProxySession>& session : sessions) session->Close();
  }

 private:
  class SessionStream;

  absl::StatusOr<std::shared_ptr<ProxySession>> FindSession(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no proxy session ", id));
    }
    return it->second.session;
  }

  client::Client* const client_;
  CompileService* const compiler_;
  const ProxyServerOptions options_;
  // Fixed when the proxy starts: every JAX process sees the same devices.
  const std::vector<ProxyDevice> devices_;
  ThreadPool executor_;
  std::atomic<uint64_t> next_session_id_{1};
  absl::Mutex mu_;
  struct OpenSession {
    std::shared_ptr<ProxySession> session;
    grpc::CallbackServerContext* context;  // Its stream's, alive while in the map.
  };
  std::map<uint64_t, OpenSession> sessions_ ABSL_GUARDED_BY(mu_);
};

// One JAX process's session stream, on gRPC's callback API. Its reactions
// run on gRPC's threads and never block there; OnDone runs last and deletes
// it. The Causeway session is opened, and at the end closed and let go, on
// the proxy's executor (both wait for the head). In between, requests are
// read one at a time and handed to the session, which answers what is
// ready at once and the rest when it completes (jaxlib's client sends a
// fetch's requests without waiting for each answer).
//
// Answers go out through `writer_` (StreamWriter), from any
// thread: the thread that answers starts the write when none is in
// progress, and the write's OnWriteDone starts the next. A client that
// does not read its answers may queue at most kMaxQueuedResponseBytes;
// past that its call is cancelled.
class ProxyServer::Service::SessionStream final
    : public grpc::ServerBidiReactor<pb::IfrtRequest, pb::IfrtResponse> {
 public:
  SessionStream(Service* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        writes_(std::make_shared<Writes>(this)),
        writer_(std::make_shared<Writer>(Writer::Options{
            .start = [writes = writes_](const pb::IfrtResponse& response) {
              return writes->Start(response);
            },
            .merge = nullptr,
            .max_queued_bytes = kMaxQueuedResponseBytes,
            .size = nullptr,  // The response's ByteSizeLong().
            .on_overflow = [context] { context->TryCancel(); }})) {
    writes_->set_writer(writer_);
    absl::StatusOr<pb::GrpcIfrtSessionMetadata> metadata =
        ParseHeader<pb::GrpcIfrtSessionMetadata>(*context, kSessionMetadataKey);
    if (!metadata.ok()) {
      End(GrpcError(metadata.status()));
      return;
    }
    if (absl::Status s = CheckSessionVersion(metadata->version()); !s.ok()) {
      End(GrpcError(s));
      return;
    }
    const int protocol_version = metadata->version().protocol_version();
    // Nothing else reacts before the first read starts: the stream waits.
    service_->executor_.Execute([this, protocol_version] { Open(protocol_version); });
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // Ending the Causeway session waits for the head: on the proxy's
      // executor, never on gRPC's threads (a reaction that blocks there
      // can hold up the very completion it waits for).
      service_->executor_.Execute([this] { Close(); });
      return;
    }
    session_->Process(request_, [writer = writer_](pb::IfrtResponse response) {
      writer->Send(std::move(response));
    });
    request_.Clear();
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    if (std::optional<grpc::Status> finish = writes_->WriteDone(ok)) {
      Finish(*std::move(finish));
    }
  }

  void OnDone() override { delete this; }

 private:
  using Writer = transport::StreamWriter<pb::IfrtResponse>;
  using Writes = transport::ReactorWrites<pb::IfrtRequest, pb::IfrtResponse, Writer>;
  static constexpr int64_t kMaxQueuedResponseBytes = int64_t{256} << 20;

  // On the proxy's executor: opens the session, then starts reading.
  void Open(int protocol_version) {
    const uint64_t id = service_->next_session_id_.fetch_add(1);
    ProxySession::Options options;
    options.session_id = id;
    options.protocol_version = protocol_version;
    options.name = absl::StrCat("jax proxy session ", id, " (", context_->peer(), ")");
    options.host_buffer_limits = service_->options_.host_buffer_limits;
    options.devices = service_->devices_;
    absl::StatusOr<std::shared_ptr<ProxySession>> created =
        ProxySession::Create(service_->client_, service_->compiler_,
                             &service_->executor_, std::move(options));
    if (!created.ok()) {
      End(GrpcError(absl::Status(
          created.status().code(),
          absl::StrCat("Causeway's proxy could not open a session on the cluster: ",
                       created.status().message()))));
      return;
    }
    session_ = *std::move(created);
    {
      absl::MutexLock lock(&service_->mu_);
      service_->sessions_[id] = {session_, context_};
    }
    CW_LOG(INFO) << "proxy: session " << id << " opened by " << context_->peer();
    StartRead(&request_);
  }

  // On the proxy's executor: the client half-closed, went away or was
  // cancelled, and the session ends. It is let go here too (this is its
  // last reference but for work still in flight): its destructor also
  // waits for the head, and OnDone runs on one of gRPC's threads.
  void Close() {
    const uint64_t id = session_->id();
    {
      absl::MutexLock lock(&service_->mu_);
      service_->sessions_.erase(id);
    }
    session_->Close();
    writer_->Close(/*drain=*/false);
    session_.reset();
    CW_LOG(INFO) << "proxy: session " << id << " ended";
    End(grpc::Status::OK);
  }

  // Finishes the call with `status`, once no write is in progress.
  void End(const grpc::Status& status) {
    if (writes_->FinishWhenIdle(status)) Finish(status);
  }

  Service* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Writes> writes_;
  const std::shared_ptr<Writer> writer_;
  // Set by Open before any read; let go by Close.
  std::shared_ptr<ProxySession> session_;
  pb::IfrtRequest request_;
};

grpc::ServerBidiReactor<pb::IfrtRequest, pb::IfrtResponse>*
ProxyServer::Service::IfrtSession(grpc::CallbackServerContext* context) {
  return new SessionStream(this, context);
}

namespace {

constexpr char kUnixPrefix[] = "unix:";

// Makes room for a Unix socket at `path`: a socket left by an earlier proxy
// is removed; any other file is refused (never delete what is not ours).
absl::Status ClearSocketPath(const std::string& path) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot check the socket path ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " exists and is not a socket: give a path for the proxy's "
        "socket that nothing else uses"));
  }
  if (unlink(path.c_str()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot remove the old socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProxyServer>> ProxyServer::Start(
    client::Client* client, CompileService* compiler, ProxyServerOptions options) {
  const bool unix_socket = absl::StartsWith(options.listen, kUnixPrefix);
  const std::string socket_path =
      unix_socket ? options.listen.substr(std::strlen(kUnixPrefix)) : "";
  const size_t colon = options.listen.rfind(':');
  if (unix_socket) {
    if (socket_path.empty() || socket_path[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "the listening address '", options.listen,
          "' needs an absolute path after unix:"));
    }
    CW_RETURN_IF_ERROR(ClearSocketPath(socket_path));
  } else if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the listening address '", options.listen,
        "' is not HOST:PORT or unix:PATH"));
  }
  absl::StatusOr<std::vector<ProxyDevice>> devices =
      ProxyDevices(*client, options.spare_hosts_per_island);
  if (!devices.ok()) return devices.status();
  std::unique_ptr<ProxyServer> server(new ProxyServer());
  server->service_ =
      std::make_unique<Service>(client, compiler, options, *std::move(devices));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(
      std::min<int64_t>(options.max_message_bytes, INT32_MAX)));
  builder.RegisterService(server->service_.get());
  {
    // The socket file is made without access for group and others from
    // the start: no moment in which another user could connect before a
    // chmod.
    const mode_t umask_before = unix_socket ? umask(077) : 0;
    server->server_ = builder.BuildAndStart();
    if (unix_socket) umask(umask_before);
  }
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  if (unix_socket) {
    server->socket_path_ = socket_path;
    server->address_ = options.listen;
  } else {
    server->address_ = absl::StrCat(options.listen.substr(0, colon), ":", port);
  }
  return server;
}

ProxyServer::~ProxyServer() { Stop(); }

void ProxyServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

void ProxyServer::Stop() {
  if (server_ == nullptr) return;
  service_->CloseAll();
  transport::StopServer(*server_);
  server_.reset();
  if (!socket_path_.empty()) unlink(socket_path_.c_str());
}

}  // namespace causeway::proxy
