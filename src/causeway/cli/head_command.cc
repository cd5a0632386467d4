#include "causeway/cli/head_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "causeway/base/block_pool.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/stop_signals.h"
#include "causeway/head/head.h"
#include "causeway/observe/cluster_observer.h"
#include "causeway/observe/history.h"
#include "causeway/observe/http_server.h"
#include "causeway/observe/metrics_sink.h"
#include "causeway/trace/trace_recorder.h"
#include "causeway/transport/grpc_head_server.h"
#include "causeway/transport/gloo_collectives.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/transport/topology.h"

namespace causeway::cli {
namespace {

constexpr char kHeadHelp[] = R"(Usage:
  causeway head [--listen HOST:PORT] [--port-file F]
                [--heartbeat-interval S] [--worker-timeout S]
                [--session-lease S] [--max-inflight-launches N]
                [--tls-cert F --tls-key F [--tls-ca F]] [--token-file F]
                [--http-listen HOST:PORT] [--history-file F] [--insecure]
                [--islands N] [--max-island-devices N]

Runs a cluster's head: the single controller that clients connect to
(client::Connect, `causeway run --cluster`) and workers register with
(`causeway worker --head`). It starts with no hosts; workers join at any
time and slices wait for devices. Once it accepts connections it prints
`head listening on HOST:PORT` (and writes that line to --port-file). It
runs until SIGINT or SIGTERM. A restarted head starts empty: workers
register with it again, old sessions are gone.

  --listen HOST:PORT      Where to listen (default 127.0.0.1:0: loopback, a
                          free port). 0.0.0.0:PORT for every interface.
  --port-file F           Also write `head listening on HOST:PORT` to F
                          (atomically: it appears whole).
  --heartbeat-interval S  How often every worker is pinged (default 0.5).
  --worker-timeout S      A worker that has not answered for this long is
                          dead (default 3). A worker whose connection
                          breaks is dead at once.
  --session-lease S       A client silent for this long loses its session,
                          its devices going to the next in the queue
                          (default 10; clients send keepalives).
  --max-inflight-launches N
                          Launches an island's scheduler releases ahead of
                          their completion (default 1024): enough to cover a
                          network round trip of chained programs (the
                          embedded default, 64, halves throughput over
                          gRPC); fewer makes sessions' fair shares react
                          sooner.

  --http-listen HOST:PORT
                          Also serve the web page, /api/status, /metrics and
                          /trace over HTTP there (docs/operate.md); port 0
                          picks a free one. Prints `http listening on
                          HOST:PORT` before the head's own line. With
                          --token-file every endpoint but the page's HTML
                          needs a fresh proof of the token,
                          `Authorization: Causeway-Proof v1:MICROS:NONCE:MAC`
                          (docs/security.md). The token itself (`Bearer
                          TOKEN`, as Prometheus sends it) is accepted only
                          over HTTPS or with --insecure. With --tls-cert it
                          serves HTTPS only, with the head's certificate,
                          and with --tls-ca it requires client certificates
                          too (mutual TLS).
  --islands N             The cluster will have islands 0..N-1: a slice
                          request for another island is refused at once
                          (default: any island may still join, it waits).
  --max-island-devices N  No island will have more than N devices: a
                          larger slice request is refused at once, naming
                          both sizes (default: it waits for hosts to join;
                          `causeway status` says what it needs). An island
                          that grows larger counts at its real size.
  --history-file F        Keep the history of finished sessions and host
                          deaths (/api/history, the page's History) in the
                          SQLite file F, created if missing: a head
                          restarted on the same file shows it again.
                          Without it the history is kept in memory only.

Limits (docs/security.md, "Limits"): a client that goes over one gets
RESOURCE_EXHAUSTED naming it, and every other session goes on.
  --max-sessions N        Sessions open at once (default 4096).
  --max-slices-per-session N
                          Slices one session holds (default 1024).
  --max-executables-per-session N
                          Programs one session has compiled (default 4096).
  --max-arrays-per-session N
                          Arrays one session holds (default 1048576).
  --max-program-bytes B   One program's HLO text (default 64M, at most
                          256M): the head's check and the wire's are this
                          one limit.
  --max-host-buffer-bytes-per-session B
                          Bytes of uploads and downloads one session holds
                          in the head at once (default 32G).
  --host-buffer-cache-bytes B
                          Freed host buffers (uploads, fetched values) the
                          head keeps for reuse (default 256M; 0 keeps
                          none): beyond it their memory goes back to the
                          system. More makes repeated large uploads
                          faster (no fresh pages to fault in).
  --program-cache-bytes B Programs (bytes of HLO text, default 64M; 0
                          keeps none) kept parsed, and loaded on the
                          workers that ran them, after their last
                          executable goes, the most recently compiled
                          first: a client that compiles one again (a new
                          JAX process) gets it at once. Beyond it, and
                          for programs nobody uses, workers unload them.
  --max-answer-bytes-per-session B
                          Bytes of one session's answers waiting to be
                          written (default 64M): a client that sends
                          requests and never reads the answers loses its
                          session past it.
  --max-session-opens-per-second N
                          Sessions opened per second by all clients together
                          (default 1000, in bursts of as many): a client
                          opening sessions in a loop cannot take the head
                          from the others.
  --max-queued-slice-requests N
                          Slice requests waiting for devices at once, all
                          sessions together (default 10000): one more is
                          refused RESOURCE_EXHAUSTED naming this flag.
  --max-worker-queue-bytes B
                          Bytes of commands waiting to be written to one
                          worker's stream (default 256M): a worker that
                          does not read them is cut off (and treated as
                          gone) instead of the head's memory growing.
  --max-requests-per-second-per-session N
                          Requests per second within one session (default
                          200000, in bursts of as many; keepalives not
                          counted): over it the session ends
                          RESOURCE_EXHAUSTED naming this flag, and the
                          other sessions go on.
  --max-host-buffer-bytes B
                          The same for all sessions together (default 64G,
                          or the per-session limit if larger):
                          many sessions, each within its own limit, cannot
                          exhaust the head's memory.

Membership changes are printed as they happen: `causeway head: host H
alive`, `causeway head: host H dead: REASON`.
)";

// The head's side of the worker protocol, over the head.
class HeadMembership final : public transport::WorkerMembership {
 public:
  explicit HeadMembership(head::Head* head) : head_(head) {}

  absl::StatusOr<transport::WorkerAdmission> AdmitWorker(
      const transport::WorkerHello& hello) override {
    head::HostRegistration registration;
    registration.island = hello.island;
    registration.devices = hello.spec;
    registration.incarnation = absl::StrFormat("%016x", hello.incarnation);
    registration.address = hello.data_plane_address;
    CW_ASSIGN_OR_RETURN(head::HostAssignment assignment,
                        head_->RegisterHost(registration));
    std::printf("causeway head: host %lld is %s\n",
                static_cast<long long>(assignment.host.value()),
                hello.name.c_str());
    std::fflush(stdout);
    return transport::WorkerAdmission{assignment.host, assignment.devices};
  }
  absl::Status ActivateWorker(
      HostId host,
      std::shared_ptr<transport::ControlChannel> channel) override {
    return head_->ActivateHost(host, std::move(channel));
  }
  transport::WorkerListener& listener() override { return *head_; }

 private:
  head::Head* const head_;
};

// The head's events go to its trace recorder; membership changes are also
// printed, one line each on stdout, for whoever runs the head (`causeway
// cluster`, tests): `causeway head: host 3 alive`, `... host 3 dead: why`.
class HeadEventSink final : public trace::EventSink {
 public:
  void LaunchDispatched(const trace::LaunchEvent& e) override {
    recorder_.LaunchDispatched(e);
  }
  void OpEnqueued(const trace::OpEvent& e) override { recorder_.OpEnqueued(e); }
  void OpStarted(const trace::OpEvent& e) override { recorder_.OpStarted(e); }
  void OpFinished(const trace::OpEvent& e, const absl::Status& s) override {
    recorder_.OpFinished(e, s);
  }
  void WaitStarted(const trace::WaitEvent& e) override {
    recorder_.WaitStarted(e);
  }
  void WaitFinished(const trace::WaitEvent& e) override {
    recorder_.WaitFinished(e);
  }
  void TransferStarted(const trace::TransferEvent& e) override {
    recorder_.TransferStarted(e);
  }
  void TransferFinished(const trace::TransferEvent& e,
                        const absl::Status& s) override {
    recorder_.TransferFinished(e, s);
  }
  void HostStateChanged(const trace::HostEvent& e) override {
    recorder_.HostStateChanged(e);
    std::printf("causeway head: host %lld %s\n",
                static_cast<long long>(e.host.value()), e.what.c_str());
    std::fflush(stdout);
  }
  absl::StatusOr<std::string> ExportChromeTrace() override {
    return recorder_.ExportChromeTrace();
  }
  absl::StatusOr<std::string> ExportChromeTraceSince(absl::Time since) {
    return recorder_.ExportChromeTraceSince(since);
  }

 private:
  trace::TraceRecorder recorder_;
};

absl::Status WritePortFile(const std::string& path, const std::string& line) {
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary);
    out << line << "\n";
    if (!out) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write the port file '", path, "'"));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write the port file '", path, "': ", error.message()));
  }
  return absl::OkStatus();
}

struct HeadFlags {
  transport::GrpcHeadServerOptions server;
  head::HeadOptions head;
  std::string port_file;
  std::string http_listen;  // Empty: no HTTP.
  std::string history_file;  // Empty: history in memory only.
  int64_t host_buffer_cache_bytes = int64_t{256} << 20;
};

// A cache's budget: a byte count (BytesFlag), or 0 for no cache.
absl::StatusOr<int64_t> CacheBytesFlag(const ParsedFlags& flags,
                                       const std::string& name,
                                       int64_t fallback) {
  if (flags.Get(name) == "0") return 0;
  return BytesFlag(flags, name, fallback);
}

absl::StatusOr<HeadFlags> ParseHeadFlags(const ParsedFlags& flags) {
  HeadFlags out;
  out.server.listen = "127.0.0.1:0";
  if (flags.Has("--listen")) {
    CW_ASSIGN_OR_RETURN(out.server.listen, AddressFlag(flags, "--listen"));
  }
  out.port_file = flags.Get("--port-file").value_or("");
  out.history_file = flags.Get("--history-file").value_or("");
  if (flags.Has("--http-listen")) {
    CW_ASSIGN_OR_RETURN(out.http_listen, AddressFlag(flags, "--http-listen"));
    CW_RETURN_IF_ERROR(observe::SplitHostPort(out.http_listen).status());
  }
  CW_ASSIGN_OR_RETURN(out.head.heartbeat_interval,
                      SecondsFlag(flags, "--heartbeat-interval",
                                  absl::Milliseconds(500)));
  CW_ASSIGN_OR_RETURN(out.head.heartbeat_timeout,
                      SecondsFlag(flags, "--worker-timeout", absl::Seconds(3)));
  CW_ASSIGN_OR_RETURN(out.head.session_lease,
                      SecondsFlag(flags, "--session-lease", absl::Seconds(10)));
  CW_ASSIGN_OR_RETURN(out.head.max_inflight_launches_per_island,
                      IntFlag(flags, "--max-inflight-launches", 1024, 1,
                              1 << 20));
  if (out.head.heartbeat_timeout < out.head.heartbeat_interval) {
    return absl::InvalidArgumentError(
        "--worker-timeout must be at least --heartbeat-interval");
  }
  // An empty head at start: slices wait for workers to join, up to what
  // the cluster is configured to have.
  out.head.slices_wait_for_hosts = true;
  CW_ASSIGN_OR_RETURN(out.head.configured_islands,
                      IntFlag(flags, "--islands", 0, 1,
                              transport::Topology::kMaxIslands));
  CW_ASSIGN_OR_RETURN(out.head.configured_island_devices,
                      IntFlag(flags, "--max-island-devices", 0, 1,
                              transport::Topology::kMaxDevices));
  CW_ASSIGN_OR_RETURN(out.server.security, SecurityFromFlags(flags));
  CW_ASSIGN_OR_RETURN(out.server.keepalive, KeepaliveFromFlags(flags));
  if (!out.server.security.tls_ca_file.empty() &&
      out.server.security.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca on the head asks every client and worker for a "
        "certificate signed by it (mutual TLS), which needs TLS: give the "
        "head's own --tls-cert and --tls-key too");
  }
  // Exposed, a port needs both: TLS, without which the session keys, the
  // programs and the data cross the network in clear text (the token is
  // only proven, never sent), and a way to tell members
  // (the token, or client certificates of --tls-ca). docs/security.md.
  const transport::GrpcSecurity& security = out.server.security;
  const bool tls = !security.tls_cert_file.empty();
  const bool members = !security.token.empty() || !security.tls_ca_file.empty();
  const std::string needs =
      tls ? "a token (--token-file) or client certificates (--tls-ca)"
      : members
          ? "TLS (--tls-cert, --tls-key; the session keys, programs and "
            "arrays would cross the network in clear text)"
          : "TLS (--tls-cert, --tls-key) and a token (--token-file)";
  CW_RETURN_IF_ERROR(RequireProtectionWhenExposed(
      flags, "--listen", out.server.listen, tls && members, needs));
  if (!out.http_listen.empty()) {
    CW_RETURN_IF_ERROR(RequireProtectionWhenExposed(
        flags, "--http-listen", out.http_listen, tls && members, needs));
  }
  head::SessionLimits& limits = out.head.session_limits;
  CW_ASSIGN_OR_RETURN(limits.max_sessions,
                      IntFlag(flags, "--max-sessions", limits.max_sessions, 1,
                              int64_t{1} << 20));
  CW_ASSIGN_OR_RETURN(limits.max_slices_per_session,
                      IntFlag(flags, "--max-slices-per-session",
                              limits.max_slices_per_session, 1,
                              int64_t{1} << 20));
  CW_ASSIGN_OR_RETURN(limits.max_executables_per_session,
                      IntFlag(flags, "--max-executables-per-session",
                              limits.max_executables_per_session, 1,
                              int64_t{1} << 24));
  CW_ASSIGN_OR_RETURN(limits.max_arrays_per_session,
                      IntFlag(flags, "--max-arrays-per-session",
                              limits.max_arrays_per_session, 1,
                              int64_t{1} << 30));
  // One program-size limit: the head's check and the wire's (a program
  // larger than the wire's is refused before it reaches the head), under
  // gRPC's message size.
  CW_ASSIGN_OR_RETURN(int64_t program_bytes,
                      BytesFlag(flags, "--max-program-bytes",
                                static_cast<int64_t>(limits.max_program_bytes)));
  if (program_bytes < 1 || program_bytes > out.server.sessions.limits.max_program_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-program-bytes must be 1..",
        out.server.sessions.limits.max_program_bytes));
  }
  limits.max_program_bytes = static_cast<size_t>(program_bytes);
  out.server.sessions.limits.max_program_bytes = program_bytes;
  CW_ASSIGN_OR_RETURN(out.server.sessions.max_host_buffer_bytes_per_session,
                      BytesFlag(flags, "--max-host-buffer-bytes-per-session",
                                out.server.sessions
                                    .max_host_buffer_bytes_per_session));
  CW_ASSIGN_OR_RETURN(
      out.server.sessions.max_host_buffer_bytes,
      BytesFlag(flags, "--max-host-buffer-bytes",
                std::max(out.server.sessions.max_host_buffer_bytes,
                         out.server.sessions
                             .max_host_buffer_bytes_per_session)));
  if (out.server.sessions.max_host_buffer_bytes <
      out.server.sessions.max_host_buffer_bytes_per_session) {
    return absl::InvalidArgumentError(
        "--max-host-buffer-bytes (all sessions) must be at least "
        "--max-host-buffer-bytes-per-session");
  }
  CW_ASSIGN_OR_RETURN(out.host_buffer_cache_bytes,
                      CacheBytesFlag(flags, "--host-buffer-cache-bytes",
                                     out.host_buffer_cache_bytes));
  CW_ASSIGN_OR_RETURN(out.head.program_cache_bytes,
                      CacheBytesFlag(flags, "--program-cache-bytes",
                                     out.head.program_cache_bytes));
  CW_ASSIGN_OR_RETURN(
      out.server.sessions.max_answer_bytes_per_session,
      BytesFlag(flags, "--max-answer-bytes-per-session",
                out.server.sessions.max_answer_bytes_per_session));
  CW_ASSIGN_OR_RETURN(
      const int64_t opens,
      IntFlag(flags, "--max-session-opens-per-second",
              static_cast<int64_t>(
                  out.server.sessions.max_session_opens_per_second),
              1, 1000000));
  out.server.sessions.max_session_opens_per_second = static_cast<double>(opens);
  out.server.sessions.session_open_burst = static_cast<double>(opens);
  CW_ASSIGN_OR_RETURN(
      const int64_t requests,
      IntFlag(flags, "--max-requests-per-second-per-session",
              static_cast<int64_t>(
                  out.server.sessions.max_requests_per_second_per_session),
              1, 100000000));
  out.server.sessions.max_requests_per_second_per_session =
      static_cast<double>(requests);
  out.server.sessions.session_request_burst = static_cast<double>(requests);
  out.server.sessions.lease = out.head.session_lease;
  out.server.workers.heartbeat_interval = out.head.heartbeat_interval;
  CW_ASSIGN_OR_RETURN(out.head.max_queued_slice_requests,
                      IntFlag(flags, "--max-queued-slice-requests",
                              out.head.max_queued_slice_requests, 1,
                              int64_t{1} << 24));
  CW_ASSIGN_OR_RETURN(
      out.server.workers.max_queued_bytes_per_worker,
      BytesFlag(flags, "--max-worker-queue-bytes",
                out.server.workers.max_queued_bytes_per_worker));
  return out;
}

}  // namespace

int HeadCommand(const std::vector<std::string>& args) {
  StopSignals& signals = StopSignals::Install();
  absl::StatusOr<ParsedFlags> parsed =
      ParseFlags(args, WithSecurityFlags({{"--listen"},
                                          {"--port-file"},
                                          {"--heartbeat-interval"},
                                          {"--worker-timeout"},
                                          {"--session-lease"},
                                          {"--max-inflight-launches"},
                                          {"--http-listen"},
                                          {"--insecure", false},
                                          {"--max-sessions"},
                                          {"--max-slices-per-session"},
                                          {"--max-executables-per-session"},
                                          {"--max-arrays-per-session"},
                                          {"--max-program-bytes"},
                                          {"--max-host-buffer-bytes-per-session"},
                                          {"--max-host-buffer-bytes"},
                                          {"--max-session-opens-per-second"},
                                          {"--max-requests-per-second-per-session"},
                                          {"--max-worker-queue-bytes"},
                                          {"--max-queued-slice-requests"},
                                          {"--max-answer-bytes-per-session"},
                                          {"--host-buffer-cache-bytes"},
                                          {"--program-cache-bytes"},
                                          {"--history-file"},
                                          {"--islands"},
                                          {"--max-island-devices"}}));
  if (parsed.ok() && parsed->help) {
    std::printf("%s%s%s", kHeadHelp, kSecurityFlagsHelp, kInsecureFlagHelp);
    return kExitOk;
  }
  absl::StatusOr<HeadFlags> flags =
      parsed.ok() ? ParseHeadFlags(*parsed)
                  : absl::StatusOr<HeadFlags>(parsed.status());
  if (flags.ok() && !parsed->positional.empty()) {
    flags = absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!flags.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway head: %s\n(see causeway head --help)\n",
                 std::string(flags.status().message()).c_str());
    return kExitUsage;
  }

  // Every host buffer's bytes come from the process-wide pool, which keeps
  // up to 1 GiB of freed blocks for reuse: right for a worker's device
  // buffers, not for the head, which only passes uploads and fetches on.
  BlockPool::Global().SetMaxCachedBytes(
      static_cast<size_t>(flags->host_buffer_cache_bytes));

  HeadEventSink events;
  // Counted for /metrics and /api/status, then for the history, then
  // recorded for the trace. The history outlives the head: the sessions
  // the head ends as it goes are kept too.
  absl::StatusOr<std::unique_ptr<observe::HistoryRecorder>> history =
      observe::HistoryRecorder::Create(
          observe::HistoryRecorder::Options{.file = flags->history_file},
          &events);
  if (!history.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway head: --history-file: %s\n",
                 std::string(history.status().message()).c_str());
    return kExitFailure;
  }
  observe::MetricsSink metrics(history->get());
  flags->head.events = &metrics;
  // The workers' rendezvous for their Gloo collectives; an epoch's keys go
  // once no launch of it is in flight (it outlives the head).
  transport::InProcessKeyValueStore key_value_store;
  flags->head.epoch_retired = [&key_value_store](IslandId island,
                                                 uint64_t epoch) {
    transport::DeleteGlooKeysThrough(key_value_store, island, epoch);
  };
  absl::StatusOr<std::unique_ptr<head::Head>> head =
      head::Head::Create(flags->head);
  if (!head.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway head: %s\n",
                 std::string(head.status().message()).c_str());
    return kExitFailure;
  }
  head::Head* raw = head->get();
  flags->server.workers.key_value_store = &key_value_store;
  flags->server.sessions.topology = [raw] { return raw->topology(); };
  HeadMembership membership(raw);
  absl::StatusOr<std::unique_ptr<transport::GrpcHeadServer>> server =
      transport::GrpcHeadServer::Start(raw, &membership, flags->server);
  if (!server.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway head: %s\n",
                 std::string(server.status().message()).c_str());
    return kExitFailure;
  }
  std::unique_ptr<observe::ClusterObserver> observer;
  std::unique_ptr<observe::HttpServer> http;
  if (!flags->http_listen.empty()) {
    observer = std::make_unique<observe::ClusterObserver>(
        raw, &metrics, observe::ClusterObserver::Options());
    observer->Start();
    absl::StatusOr<std::unique_ptr<observe::HttpServer>> started =
        observe::HttpServer::Start(
            observe::HttpServerOptions{
                .listen = flags->http_listen,
                .token = flags->server.security.token,
                .accept_bearer_in_clear_text =
                    flags->server.security.allow_clear_text,
                .tls_cert_file = flags->server.security.tls_cert_file,
                .tls_key_file = flags->server.security.tls_key_file,
                .tls_ca_file = flags->server.security.tls_ca_file,
                .observer = observer.get(),
                .history = history->get(),
                .trace = [&events](absl::Time since) {
                  return events.ExportChromeTraceSince(since);
                }});
    if (!started.ok()) {
      PrintUserMessage(LogSeverity::kError, "causeway head: --http-listen: %s\n",
                   std::string(started.status().message()).c_str());
      return kExitFailure;
    }
    http = *std::move(started);
    std::printf("http listening on %s\n", http->address().c_str());
  }
  const std::string line =
      absl::StrCat("head listening on ", (*server)->address());
  if (!flags->port_file.empty()) {
    if (absl::Status written = WritePortFile(flags->port_file, line);
        !written.ok()) {
      PrintUserMessage(LogSeverity::kError, "causeway head: %s\n",
                   std::string(written.message()).c_str());
      return kExitFailure;
    }
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  signals.Wait();
  if (http != nullptr) http->Shutdown();
  if (observer != nullptr) observer->Stop();
  (*server)->Shutdown();
  (*head)->Shutdown();
  server->reset();
  head->reset();
  return kExitOk;
}

}  // namespace causeway::cli
