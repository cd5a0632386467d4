#include "causeway/cli/proxy_command.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/stop_signals.h"
#include "causeway/client/connect.h"
#include "causeway/proxy/compile_worker.h"
#include "causeway/proxy/proxy_server.h"

namespace causeway::cli {
namespace {

constexpr char kProxyHelp[] = R"(Usage:
  causeway proxy --head HOST:PORT [--listen HOST:PORT] [--token-file F]
                 [--tls-ca F [--tls-cert F --tls-key F]] [--insecure]
                 [--python PATH] [--max-host-buffer-bytes B]
                 [--spare-hosts K]

Serves the IFRT proxy protocol (what jaxlib's own proxy client speaks) in
front of the cluster whose head is at --head, so that unmodified JAX runs
on it:

  JAX_PLATFORMS=proxy JAX_BACKEND_TARGET=grpc://HOST:PORT \
  IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS=true python train.py

Once it accepts connections it prints `proxy listening on HOST:PORT`. Each
connected JAX process is one Causeway session; jax.devices() lists the
cluster's devices. See docs/jax.md.

  --head HOST:PORT        The cluster's head.
  --listen HOST:PORT|unix:PATH
                          Where JAX processes connect (default 127.0.0.1:0:
                          a free port on loopback). The protocol is plain
                          gRPC without authentication: keep it on loopback
                          (another address is refused without --insecure).
                          unix:PATH (an absolute path) listens on a Unix
                          socket that only this user may connect to (no
                          access for group or others), which keeps out the
                          other users of this machine too; JAX then connects with
                          JAX_BACKEND_TARGET=grpc://unix:PATH.
  --python PATH           The Python (with the pinned jax) that runs the
                          compile worker (default: python3 on PATH).
  --compile-worker PATH   The compile worker script (default: the source
                          tree's python/causeway/_proxy_compile.py, found
                          from this binary's place in build/bin).
  --max-host-buffer-bytes B
                          The most bytes of host buffers one JAX session
                          may hold in the proxy at once (default 32G).
  --spare-hosts K         Leave the devices of the last K hosts (by host id)
                          of every island out of jax.devices() (default 0):
                          the head remaps a slice onto them when a host
                          dies, and JAX keeps the same devices.
)";

// build/bin/causeway -> python/causeway/_proxy_compile.py of the same tree.
std::string DefaultCompileWorkerScript() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "_proxy_compile.py";
  std::string exe(path, n);
  for (int up = 0; up < 3; ++up) {
    const size_t slash = exe.rfind('/');
    if (slash == std::string::npos) return "_proxy_compile.py";
    exe.resize(slash);
  }
  return exe + "/python/causeway/_proxy_compile.py";
}

}  // namespace

int ProxyCommand(const std::vector<std::string>& args) {
  StopSignals& signals = StopSignals::Install();
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      args, WithSecurityFlags({{"--head"},
                               {"--listen"},
                               {"--python"},
                               {"--compile-worker"},
                               {"--max-host-buffer-bytes"},
                               {"--spare-hosts"},
                               {"--insecure", false}}));
  if (parsed.ok() && parsed->help) {
    std::printf("%s%s%s", kProxyHelp, kSecurityFlagsHelp, kInsecureFlagHelp);
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  std::string head;
  int64_t max_buffer_bytes = 0;
  int64_t spare_hosts = 0;
  if (usage.ok()) {
    absl::StatusOr<std::string> address = AddressFlag(*parsed, "--head");
    usage = address.status();
    if (address.ok()) head = *address;
  }
  if (usage.ok()) {
    absl::StatusOr<int64_t> bytes =
        BytesFlag(*parsed, "--max-host-buffer-bytes", int64_t{32} << 30);
    usage = bytes.status();
    if (bytes.ok()) max_buffer_bytes = *bytes;
  }
  if (usage.ok()) {
    absl::StatusOr<int64_t> spare = IntFlag(*parsed, "--spare-hosts", 0, 0, 64);
    usage = spare.status();
    if (spare.ok()) spare_hosts = *spare;
  }
  if (usage.ok()) {
    // jaxlib's proxy client authenticates nothing: a TCP port is open to
    // whoever reaches it; a Unix socket only to this user (its mode).
    const std::string listen = parsed->Get("--listen").value_or("127.0.0.1:0");
    usage = RequireProtectionWhenExposed(
        *parsed, "--listen", listen,
        /*protected_=*/absl::StartsWith(listen, "unix:"),
        "authentication (the IFRT proxy protocol has none: keep it on "
        "loopback, or better on a Unix socket, unix:PATH)");
  }
  if (usage.ok() && !parsed->positional.empty()) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!usage.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway proxy: %s\n(see causeway proxy --help)\n",
                 std::string(usage.message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<transport::GrpcSecurity> security = SecurityFromFlags(*parsed);
  if (!security.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway proxy: %s\n",
                 std::string(security.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<transport::KeepaliveOptions> keepalive =
      KeepaliveFromFlags(*parsed);
  if (!keepalive.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway proxy: %s\n",
                 std::string(keepalive.status().message()).c_str());
    return kExitUsage;
  }
  client::ConnectOptions connect;
  connect.keepalive_timeout = keepalive->timeout;
  connect.token = security->token;
  connect.tls_ca_file = security->tls_ca_file;
  connect.tls_cert_file = security->tls_cert_file;
  connect.tls_key_file = security->tls_key_file;
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect(head, connect);
  if (!client.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway proxy: %s\n",
                 std::string(client.status().message()).c_str());
    return kExitFailure;
  }
  proxy::CompileWorker::Options compile_options;
  compile_options.python = parsed->Get("--python").value_or("python3");
  compile_options.script =
      parsed->Get("--compile-worker").value_or(DefaultCompileWorkerScript());
  proxy::CompileWorker compiler(compile_options);
  proxy::ProxyServerOptions options;
  options.listen = parsed->Get("--listen").value_or("127.0.0.1:0");
  options.host_buffer_limits.max_total_bytes = max_buffer_bytes;
  options.host_buffer_limits.max_buffer_bytes = max_buffer_bytes;
  options.spare_hosts_per_island = static_cast<int>(spare_hosts);
  absl::StatusOr<std::unique_ptr<proxy::ProxyServer>> server =
      proxy::ProxyServer::Start(client->get(), &compiler, options);
  if (!server.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway proxy: %s\n",
                 std::string(server.status().message()).c_str());
    return kExitFailure;
  }
  std::printf("proxy listening on %s\n", (*server)->address().c_str());
  std::fflush(stdout);
  signals.Wait();
  (*server)->Stop();
  return kExitOk;
}

}  // namespace causeway::cli
