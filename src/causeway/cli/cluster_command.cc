#include "causeway/cli/cluster_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/stop_signals.h"

namespace causeway::cli {
namespace {

constexpr char kClusterHelp[] = R"(Usage:
  causeway cluster --islands I --hosts-per-island H --devices-per-host D
                   [--device-kind cpu|sim [--sim-...]]
                   [--spare-hosts K] [--memory-per-device BYTES]
                   [--listen HOST:PORT] [--heartbeat-interval S]
                   [--worker-timeout S] [--session-lease S]
                   [--token-file F] [--tls-cert F --tls-key F [--tls-ca F]]
                   [--keepalive-timeout S]
                   [--http-listen HOST:PORT] [--insecure]
                   [--history-file F] [--program-cache-bytes B]
                   [--proxy-listen ADDRESS]

Starts a cluster on this machine: a head (`causeway head`) and, on each of
the I islands, H + K workers (`causeway worker`) with D CPU devices each,
every one its own process on loopback. As each worker registers it prints
`pid P: worker host H ready: devices A..B on island I (head HOST:PORT)`;
once all have, `head listening on HOST:PORT`: connect clients there
(client::Connect, `causeway run --cluster`, `causeway status --head`).
Nothing else goes to stdout (its members' output goes to stderr).

It stops them all on SIGINT or SIGTERM, and they stop when it is killed
(each child gets SIGTERM when its parent dies): no orphans. A worker that
dies is reported and the cluster goes on without it (the head remaps its
slices); if the head dies, everything stops with status 1.

  --islands I             Islands (1..64).
  --hosts-per-island H    Workers per island (1..64).
  --devices-per-host D    Devices per worker (1..256).
  --device-kind cpu|sim   cpu (default), or sim: simulated devices that
                          model time instead of running kernels
                          (docs/sim_devices.md). Each island's H + K sim
                          hosts are one `causeway worker --device-kind sim
                          --hosts H+K` process; H may then be up to 1024.
  --sim-program-time S, --sim-peak-flops F, --sim-memory-bandwidth B,
  --sim-interconnect-bandwidth B, --sim-collective-latency S
                          Passed to the sim workers (causeway worker
                          --help).
  --spare-hosts K         K more workers on every island (default 0), for
                          slices to be remapped onto after a failure.
  --memory-per-device B   Each device's memory budget (default 1G).
  --listen HOST:PORT      The head's address (default 127.0.0.1:0: a free
                          port on loopback).
  --heartbeat-interval S, --worker-timeout S, --session-lease S
                          Passed to the head (see causeway head --help).
  --token-file F          Passed to the head, every worker and the proxy.
  --tls-cert F, --tls-key F, --tls-ca F
                          Passed to the head, every worker and the proxy:
                          the head serves TLS with the certificate; with
                          --tls-ca it requires a certificate signed by that
                          CA from every worker and client (mutual TLS), and
                          the members present this one.
  --keepalive-timeout S   Passed to the head, every worker and the proxy
                          (see causeway head --help).
  --insecure              Passed to the head and every worker (see causeway
                          head --help).
  --http-listen HOST:PORT The head's HTTP endpoint (web page, /api/status,
                          /metrics; see causeway head --help): printed as
                          `http listening on HOST:PORT` before the head's
                          line.
  --history-file F        Passed to the head: the history of finished
                          sessions kept in the SQLite file F.
  --program-cache-bytes B Passed to the head: HLO text bytes of programs
                          kept after their last executable goes (64 MiB).
  --proxy-listen HOST:PORT|unix:PATH
                          Also start `causeway proxy` (unmodified JAX:
                          docs/jax.md) on HOST:PORT (port 0 picks one) or
                          on a Unix socket only this user may connect to,
                          once the workers are ready, and print its
                          `proxy listening on ADDRESS` line after the
                          head's.
  --proxy-python PATH     The Python the proxy's compile worker runs.
)";

// A line on our own pipe: the signal thread wakes the watch loop.
class Wakeup {
 public:
  Wakeup() {
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) fds_[0] = fds_[1] = -1;
  }
  ~Wakeup() {
    close(fds_[0]);
    close(fds_[1]);
  }
  void Notify() { (void)!write(fds_[1], "x", 1); }
  int fd() const { return fds_[0]; }

 private:
  int fds_[2];
};

std::string SelfPath() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "causeway";
  return std::string(path, n);
}

constexpr absl::Duration kStartTimeout = absl::Seconds(60);
constexpr absl::Duration kStopGrace = absl::Seconds(10);

struct Member {
  std::string what;  // "head", "worker 3 (island 1)".
  std::unique_ptr<ChildProcess> process;
  bool open = true;  // Its stdout is still open.
};

// Stops `member` (SIGTERM; SIGKILL after the grace) and says so if it
// ended otherwise than asked (a crash while stopping).
void StopMember(Member& member) {
  if (member.process->reaped()) return;  // Ended before; reported then.
  const int status = member.process->Stop(kStopGrace);
  if (status != -1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
      !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
    PrintUserMessage(LogSeverity::kError,
                     "causeway cluster: %s (pid %d) %s while stopping\n",
                     member.what.c_str(), member.process->pid(),
                     ChildProcess::DescribeWaitStatus(status).c_str());
  }
}

// members[0] is the head, then the workers, then the proxy if any.
void StopAll(std::vector<Member>& members) {
  // The proxy (a client of the head) first, then the head while its workers
  // still run, then the workers. A head shutting down while its workers'
  // streams end under it could abort inside gRPC (the worker server cancels
  // a stream whose handler may just have returned: transport/
  // grpc_control_channel.cc, GrpcWorkerServer::Shutdown); with the workers
  // alive, only the head's own cancels end their streams.
  if (members.size() > 1 && members.back().what == "proxy") {
    StopMember(members.back());
  }
  if (!members.empty()) StopMember(members[0]);
  for (size_t i = 1; i < members.size(); ++i) {
    members[i].process->Signal(SIGTERM);
  }
  for (size_t i = 1; i < members.size(); ++i) StopMember(members[i]);
}

}  // namespace

int ClusterCommand(const std::vector<std::string>& args) {
  StopSignals& signals = StopSignals::Install();
  // Our own group, so that one signal can reach every member.
  setpgid(0, 0);
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      args, {{"--islands"},
             {"--hosts-per-island"},
             {"--devices-per-host"},
             {"--device-kind"},
             {"--sim-program-time"},
             {"--sim-peak-flops"},
             {"--sim-memory-bandwidth"},
             {"--sim-interconnect-bandwidth"},
             {"--sim-collective-latency"},
             {"--spare-hosts"},
             {"--memory-per-device"},
             {"--listen"},
             {"--heartbeat-interval"},
             {"--worker-timeout"},
             {"--session-lease"},
             {"--token-file"},
             {"--tls-cert"},
             {"--tls-key"},
             {"--tls-ca"},
             {"--keepalive-timeout"},
             {"--insecure", false},
             {"--http-listen"},
             {"--history-file"},
             {"--program-cache-bytes"},
             {"--proxy-listen"},
             {"--proxy-python"}});
  if (parsed.ok() && parsed->help) {
    std::printf("%s", kClusterHelp);
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  int64_t islands = 0, hosts = 0, devices = 0, spare = 0, memory = 0;
  if (usage.ok()) {
    for (const char* required :
         {"--islands", "--hosts-per-island", "--devices-per-host"}) {
      if (!parsed->Has(required)) {
        usage = absl::InvalidArgumentError(absl::StrCat("missing ", required));
      }
    }
  }
  auto take = [&](absl::StatusOr<int64_t> value, int64_t* out) {
    if (!usage.ok()) return;
    usage = value.status();
    if (value.ok()) *out = *value;
  };
  const std::string kind =
      usage.ok() ? parsed->Get("--device-kind").value_or("cpu") : "cpu";
  const bool sim = kind == "sim";
  if (usage.ok() && kind != "cpu" && !sim) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("--device-kind ", kind, ": the kinds are cpu and sim"));
  }
  if (usage.ok()) {
    take(IntFlag(*parsed, "--islands", 1, 1, 64), &islands);
    // Sim hosts are threads of one process per island, not processes.
    take(IntFlag(*parsed, "--hosts-per-island", 1, 1, sim ? 1024 : 64),
         &hosts);
    take(IntFlag(*parsed, "--devices-per-host", 1, 1, 256), &devices);
    take(IntFlag(*parsed, "--spare-hosts", 0, 0, sim ? 1024 : 64), &spare);
    take(BytesFlag(*parsed, "--memory-per-device", int64_t{1} << 30), &memory);
  }
  if (usage.ok() && sim && hosts + spare > 1024) {
    usage = absl::InvalidArgumentError(
        "--hosts-per-island plus --spare-hosts: at most 1024 sim hosts per "
        "island");
  }
  if (usage.ok() && !sim) {
    for (const char* name :
         {"--sim-program-time", "--sim-peak-flops", "--sim-memory-bandwidth",
          "--sim-interconnect-bandwidth", "--sim-collective-latency"}) {
      if (parsed->Has(name)) {
        usage = absl::InvalidArgumentError(
            absl::StrCat(name, " needs --device-kind sim"));
      }
    }
  }
  if (usage.ok() && !parsed->positional.empty()) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!usage.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway cluster: %s\n(see causeway cluster --help)\n",
                 std::string(usage.message()).c_str());
    return kExitUsage;
  }

  const std::string self = SelfPath();
  std::vector<std::string> head_argv = {
      self, "head", "--listen", parsed->Get("--listen").value_or("127.0.0.1:0")};
  // One security configuration for every member: the head serves with it,
  // the workers and the proxy connect with it (with --tls-ca the head
  // requires their certificates, and they present the same one).
  std::vector<std::string> shared;
  for (const char* security : {"--token-file", "--tls-cert", "--tls-key",
                               "--tls-ca", "--keepalive-timeout"}) {
    if (std::optional<std::string> value = parsed->Get(security)) {
      shared.insert(shared.end(), {security, *value});
    }
  }
  if (parsed->Has("--insecure")) shared.push_back("--insecure");
  // Every member logs as the cluster does (its lines are passed on as they
  // are: already JSON objects).
  if (GetLogFormat() == LogFormat::kJson) {
    shared.insert(shared.end(), {"--log-format", "json"});
  }
  for (const char* passed : {"--heartbeat-interval", "--worker-timeout",
                             "--session-lease", "--http-listen",
                             "--history-file", "--program-cache-bytes"}) {
    if (std::optional<std::string> value = parsed->Get(passed)) {
      head_argv.push_back(passed);
      head_argv.push_back(*value);
    }
  }
  head_argv.insert(head_argv.end(), shared.begin(), shared.end());
  // The head knows what this cluster will be: a slice no island of it can
  // hold is refused at once instead of waiting for hosts that never come.
  head_argv.insert(head_argv.end(),
                   {"--islands", absl::StrCat(islands), "--max-island-devices",
                    absl::StrCat((hosts + spare) * devices)});

  std::vector<Member> members;
  auto fail = [&](const std::string& message) {
    PrintUserMessage(LogSeverity::kError, "causeway cluster: %s\n", message.c_str());
    StopAll(members);
    return kExitFailure;
  };
  absl::StatusOr<std::unique_ptr<ChildProcess>> head = ChildProcess::Start(head_argv);
  if (!head.ok()) return fail(std::string(head.status().message()));
  members.push_back({"head", *std::move(head)});
  std::string http_line;
  if (parsed->Has("--http-listen")) {
    absl::StatusOr<std::string> http =
        members[0].process->ReadLineStartingWith("http listening on ",
                                                 kStartTimeout);
    if (!http.ok()) {
      return fail(absl::StrCat("the head's HTTP endpoint did not start: ",
                               http.status().message()));
    }
    http_line = *http;
  }
  absl::StatusOr<std::string> listening =
      members[0].process->ReadLineStartingWith("head listening on ", kStartTimeout);
  if (!listening.ok()) {
    return fail(absl::StrCat("the head did not start: ",
                             listening.status().message()));
  }
  const std::string address =
      listening->substr(std::string("head listening on ").size());
  PrintUserMessage(LogSeverity::kInfo, "causeway cluster: head, pid %d: %s\n",
               members[0].process->pid(), listening->c_str());

  // Sim: one process per island serves all its hosts.
  const int64_t processes_per_island = sim ? 1 : hosts + spare;
  const int64_t hosts_per_process = sim ? hosts + spare : 1;
  std::vector<std::string> sim_flags;
  if (sim) {
    sim_flags = {"--device-kind", "sim", "--hosts",
                 absl::StrCat(hosts_per_process)};
    for (const char* passed :
         {"--sim-program-time", "--sim-peak-flops", "--sim-memory-bandwidth",
          "--sim-interconnect-bandwidth", "--sim-collective-latency"}) {
      if (std::optional<std::string> value = parsed->Get(passed)) {
        sim_flags.insert(sim_flags.end(), {passed, *value});
      }
    }
  }
  for (int64_t island = 0; island < islands; ++island) {
    for (int64_t h = 0; h < processes_per_island; ++h) {
      std::vector<std::string> worker_argv = {
          self,           "worker",
          "--head",       address,
          "--island",     absl::StrCat(island),
          "--devices",    absl::StrCat(devices),
          "--memory-per-device", absl::StrCat(memory)};
      worker_argv.insert(worker_argv.end(), sim_flags.begin(), sim_flags.end());
      worker_argv.insert(worker_argv.end(), shared.begin(), shared.end());
      absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
          ChildProcess::Start(worker_argv);
      if (!worker.ok()) return fail(std::string(worker.status().message()));
      members.push_back({absl::StrCat("worker ", members.size() - 1,
                                      " (island ", island, ")"),
                         *std::move(worker)});
    }
  }
  for (size_t i = 1; i < members.size(); ++i) {
    for (int64_t h = 0; h < hosts_per_process; ++h) {
      absl::StatusOr<std::string> ready =
          members[i].process->ReadLineStartingWith("worker host ",
                                                   kStartTimeout);
      if (!ready.ok()) {
        return fail(absl::StrCat(members[i].what, " did not start: ",
                                 ready.status().message()));
      }
      PrintUserMessage(LogSeverity::kInfo,
                       "causeway cluster: %s, pid %d: %s\n",
                       members[i].what.c_str(), members[i].process->pid(),
                       ready->c_str());
      // On stdout too, for whoever wants to kill a worker of a given host.
      std::printf("pid %d: %s\n", members[i].process->pid(), ready->c_str());
    }
  }
  if (!http_line.empty()) std::printf("%s\n", http_line.c_str());
  std::printf("head listening on %s\n", address.c_str());
  std::fflush(stdout);

  if (std::optional<std::string> proxy_listen = parsed->Get("--proxy-listen")) {
    std::vector<std::string> proxy_argv = {self, "proxy", "--head", address,
                                           "--listen", *proxy_listen};
    if (std::optional<std::string> python = parsed->Get("--proxy-python")) {
      proxy_argv.push_back("--python");
      proxy_argv.push_back(*python);
    }
    // The spare hosts stay out of jax.devices(), for the head to remap onto.
    proxy_argv.push_back("--spare-hosts");
    proxy_argv.push_back(absl::StrCat(spare));
    proxy_argv.insert(proxy_argv.end(), shared.begin(), shared.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> proxy =
        ChildProcess::Start(proxy_argv);
    if (!proxy.ok()) return fail(std::string(proxy.status().message()));
    members.push_back({"proxy", *std::move(proxy)});
    absl::StatusOr<std::string> proxy_ready =
        members.back().process->ReadLineStartingWith("proxy listening on ",
                                                     kStartTimeout);
    if (!proxy_ready.ok()) {
      return fail(absl::StrCat("the proxy did not start: ",
                               proxy_ready.status().message()));
    }
    PrintUserMessage(LogSeverity::kInfo, "causeway cluster: proxy, pid %d: %s\n",
                 members.back().process->pid(), proxy_ready->c_str());
    std::printf("%s\n", proxy_ready->c_str());
    std::fflush(stdout);
  }

  // Watch every member's output until a signal (or the head's death).
  Wakeup wakeup;
  signals.SetHandler([&wakeup] { wakeup.Notify(); });
  int exit_code = kExitOk;
  while (!signals.stopped()) {
    std::vector<pollfd> fds = {{wakeup.fd(), POLLIN, 0}};
    std::vector<size_t> which;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!members[i].open) continue;
      fds.push_back({members[i].process->stdout_fd(), POLLIN, 0});
      which.push_back(i);
    }
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    bool head_died = false;
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Member& member = members[which[k - 1]];
      // Lines (echoed), or the end: the member exited.
      if (member.process->Drain().ok()) continue;
      member.open = false;
      absl::StatusOr<int> status = member.process->Wait(kStopGrace);
      PrintUserMessage(LogSeverity::kError, "causeway cluster: %s (pid %d) %s\n",
                   member.what.c_str(), member.process->pid(),
                   status.ok() ? ChildProcess::DescribeWaitStatus(*status).c_str()
                               : "closed its output");
      if (which[k - 1] == 0) head_died = true;
    }
    if (head_died) {
      PrintUserMessage(LogSeverity::kError, "causeway cluster: the head is gone; stopping\n");
      exit_code = kExitFailure;
      break;
    }
  }
  signals.SetHandler(nullptr);
  StopAll(members);
  return exit_code;
}

}  // namespace causeway::cli
