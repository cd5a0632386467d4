#include "causeway/cli/worker_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/stop_signals.h"
#include "causeway/observe/health_server.h"
#include "causeway/transport/grpc_worker_agent.h"
#include "causeway/transport/gloo_launch_collectives.h"
#include "causeway/transport/tcp_data_plane.h"
#include "causeway/transport/launch_collectives.h"
#include "causeway/worker/sim_program.h"
#include "causeway/worker/worker.h"

namespace causeway::cli {
namespace {

constexpr char kWorkerHelp[] = R"(Usage:
  causeway worker --head HOST:PORT --island N --devices D
                  [--device-kind cpu|sim [--hosts K] [--sim-... ]]
                  [--memory-per-device BYTES] [--retry-seconds S]
                  [--collective-timeout S] [--data-plane-listen IP:PORT]
                  [--max-early-piece-bytes BYTES]
                  [--max-notice-queue-bytes BYTES] [--insecure]
                  [--token-file F] [--tls-ca F [--tls-cert F --tls-key F]]
                  [--health-listen HOST:PORT]

Runs one worker (a host with D CPU devices on island N): it dials the head,
registers (the head gives it a host id and device ids), and runs what the
head sends until it is stopped (SIGINT, SIGTERM). Prints
`worker host H ready: devices A..B on island N` once the head has made it
alive (its devices are in the head's pool then).

When it loses the head it stops everything it holds (that state belonged
to the head that is gone) and registers again, as a new host, with
whatever head answers at HOST:PORT; if none does within --retry-seconds it
exits with status 1 and says so.

  --head HOST:PORT          The head to join.
  --island N                Its island (0..4095): devices of one island
                            run collectives together.
  --devices D               How many devices (1..4096), per host.
  --device-kind cpu|sim     cpu (default): devices that run programs on
                            this machine's cores. sim: devices that run
                            the real worker path (queues, gang order,
                            memory budgets, transfers, collectives' waits)
                            but no kernels: a program takes a modelled
                            time (docs/sim_devices.md), for scale
                            experiments.
  --hosts K                 With sim: this process serves K hosts
                            (1..1024), each registered on its own (its own
                            stream, heartbeats, incarnation, data plane);
                            each prints its own ready line. Their
                            collectives meet in this process: a launch
                            whose devices span sim processes fails its
                            collectives, saying so.
  --control-stdin           With sim: read commands from stdin, one a
                            line. `kill-host H` stops this process's host
                            H (the head's id) at once, as if its machine
                            died: its stream and data plane close and it
                            does not register again; the others go on.
                            Answers `killed host H` or `no host H here`.
  --sim-program-time S      Every program's fixed modelled time (default 0;
                            a program may add its own with the frontend
                            attribute causeway_sim_us="N").
  --sim-peak-flops F, --sim-memory-bandwidth B,
  --sim-interconnect-bandwidth B, --sim-collective-latency S
                            The cost model's device (defaults: 275e12
                            flop/s, 1.2e12 B/s, 1e11 B/s, 10 us: a TPU v4).
  --memory-per-device BYTES Each device's memory budget (default 1G; K, M,
                            G, T suffixes).
  --retry-seconds S         How long to keep trying to reach a head, at
                            start and after losing one (default 60).
  --collective-timeout S    How long a device waits for its peers in a
                            collective (default 60).
  --data-plane-listen IP:PORT
                            Where its data plane (array pieces from other
                            workers) listens, as the other workers reach
                            it (default 127.0.0.1:0: loopback, a free
                            port). Numeric, and this host's own address,
                            never a wildcard: it is what the head tells the
                            other workers to dial. The worker's Gloo
                            sockets (collectives across processes) listen
                            on the same IP. On separate hosts give the IP
                            the other hosts reach it at. With --token-file,
                            peers must prove they hold the token (an HMAC
                            challenge both ways; it never crosses the wire).
  --max-early-piece-bytes BYTES
                            Pieces from other workers that come before
                            their receive is announced are held in memory,
                            at most this many bytes in all (default 1G); one
                            that would go over waits a few seconds for room,
                            then is refused (its transfer fails naming this
                            limit).
  --max-notice-queue-bytes BYTES
                            Notices to the head (replies, completions,
                            trace events) waiting to be written, at most
                            (default 256M): a head that stops reading them
                            ends the stream, naming this limit, and the
                            worker registers again.
  --health-listen HOST:PORT Also serve probes over HTTP there (for
                            Kubernetes, docs/deploy.md): /healthz answers
                            200 while the process serves, /readyz 200 while
                            the head has this worker alive and 503 while it
                            registers. Prints `health listening on
                            HOST:PORT` first; port 0 picks a free one.
)";

// Backoff between attempts to reach the head.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);

struct WorkerFlags {
  transport::GrpcWorkerAgentOptions agent;
  int64_t hosts = 1;
  std::optional<worker::SimModel> sim;  // Set: sim devices.
  std::string data_plane_listen = "127.0.0.1:0";
  absl::Duration retry = absl::Seconds(60);
  absl::Duration collective_timeout = absl::Seconds(60);
  std::optional<std::string> health_listen;
  int64_t max_early_piece_bytes = int64_t{1} << 30;
  bool control_stdin = false;
};

// The host part of "IP:PORT" or "[IPv6]:PORT".
std::string HostOfAddress(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

// A positive rate ("275e12"); `fallback` when absent.
absl::StatusOr<double> RateFlag(const ParsedFlags& flags,
                                const std::string& name, double fallback) {
  std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !(value > 0) ||
      !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " ", *text, ": a positive number (for example 1.2e12)"));
  }
  return value;
}

absl::StatusOr<WorkerFlags> ParseWorkerFlags(const ParsedFlags& flags) {
  WorkerFlags out;
  CW_ASSIGN_OR_RETURN(out.agent.head, AddressFlag(flags, "--head"));
  if (!flags.Has("--island")) {
    return absl::InvalidArgumentError("missing --island N");
  }
  if (!flags.Has("--devices")) {
    return absl::InvalidArgumentError("missing --devices D");
  }
  CW_ASSIGN_OR_RETURN(int64_t island, IntFlag(flags, "--island", 0, 0,
                                              transport::Topology::kMaxIslands - 1));
  out.agent.island = IslandId(island);
  CW_ASSIGN_OR_RETURN(out.agent.spec.num_devices,
                      IntFlag(flags, "--devices", 1, 1, 4096));
  out.agent.spec.kind = flags.Get("--device-kind").value_or("cpu");
  if (out.agent.spec.kind != "cpu" && out.agent.spec.kind != "sim") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-kind ", out.agent.spec.kind,
                     ": the kinds are cpu and sim"));
  }
  const bool sim = out.agent.spec.kind == "sim";
  CW_ASSIGN_OR_RETURN(out.hosts, IntFlag(flags, "--hosts", 1, 1, 1024));
  if (out.hosts > 1 && !sim) {
    return absl::InvalidArgumentError(
        "--hosts K needs --device-kind sim (a cpu worker is one host)");
  }
  out.control_stdin = flags.Has("--control-stdin");
  if (out.control_stdin && !sim) {
    return absl::InvalidArgumentError(
        "--control-stdin needs --device-kind sim (stop a cpu worker by "
        "signalling its process)");
  }
  for (const char* name :
       {"--sim-program-time", "--sim-peak-flops", "--sim-memory-bandwidth",
        "--sim-interconnect-bandwidth", "--sim-collective-latency"}) {
    if (flags.Has(name) && !sim) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " needs --device-kind sim"));
    }
  }
  if (sim) {
    worker::SimModel model;
    if (flags.Has("--sim-program-time")) {
      CW_ASSIGN_OR_RETURN(model.program_time,
                          SecondsFlag(flags, "--sim-program-time",
                                      absl::ZeroDuration()));
    }
    CW_ASSIGN_OR_RETURN(model.peak_flops,
                        RateFlag(flags, "--sim-peak-flops", model.peak_flops));
    CW_ASSIGN_OR_RETURN(model.memory_bandwidth,
                        RateFlag(flags, "--sim-memory-bandwidth",
                                 model.memory_bandwidth));
    CW_ASSIGN_OR_RETURN(model.interconnect_bandwidth,
                        RateFlag(flags, "--sim-interconnect-bandwidth",
                                 model.interconnect_bandwidth));
    CW_ASSIGN_OR_RETURN(model.collective_latency,
                        SecondsFlag(flags, "--sim-collective-latency",
                                    model.collective_latency));
    out.sim = model;
  }
  CW_ASSIGN_OR_RETURN(out.agent.spec.memory_per_device,
                      BytesFlag(flags, "--memory-per-device", int64_t{1} << 30));
  CW_ASSIGN_OR_RETURN(out.retry, SecondsFlag(flags, "--retry-seconds",
                                             absl::Seconds(60)));
  CW_ASSIGN_OR_RETURN(out.collective_timeout,
                      SecondsFlag(flags, "--collective-timeout",
                                  absl::Seconds(60)));
  if (flags.Has("--data-plane-listen")) {
    CW_ASSIGN_OR_RETURN(out.data_plane_listen,
                        AddressFlag(flags, "--data-plane-listen"));
    // The address is what the other workers dial (and where Gloo
    // listens): a wildcard would send them to their own machine.
    const std::string host = HostOfAddress(out.data_plane_listen);
    if (host == "0.0.0.0" || host == "::") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data-plane-listen ", out.data_plane_listen,
          ": the other workers dial this address, so it must be this "
          "host's own (for example its IP on the cluster's network), not "
          "a wildcard"));
    }
  }
  if (flags.Has("--health-listen")) {
    CW_ASSIGN_OR_RETURN(out.health_listen,
                        AddressFlag(flags, "--health-listen"));
  }
  CW_ASSIGN_OR_RETURN(out.max_early_piece_bytes,
                      BytesFlag(flags, "--max-early-piece-bytes",
                                int64_t{1} << 30));
  CW_ASSIGN_OR_RETURN(out.agent.max_queued_notice_bytes,
                      BytesFlag(flags, "--max-notice-queue-bytes",
                                out.agent.max_queued_notice_bytes));
  CW_ASSIGN_OR_RETURN(out.agent.security, SecurityFromFlags(flags));
  CW_ASSIGN_OR_RETURN(out.agent.keepalive, KeepaliveFromFlags(flags));
  // Its data plane and its Gloo sockets listen there; the token is what
  // they check (certificates guard only the head's port).
  CW_RETURN_IF_ERROR(RequireProtectionWhenExposed(
      flags, "--data-plane-listen", out.data_plane_listen,
      !out.agent.security.token.empty(),
      "a token (--token-file: the data plane and the collectives prove it)"));
  char hostname[256] = {0};
  gethostname(hostname, sizeof(hostname) - 1);
  out.agent.name = absl::StrCat(hostname, " pid ", getpid());
  return out;
}

// The hosts this process serves (one, or K sim hosts) and how they stop:
// a signal, or one host that gives up, stops them all. Thread-safe.
class HostGroup {
 public:
  // Stops every host: their streams end, and registering gives up.
  void Stop() {
    // Under the lock: a host's agent cannot end (Remove) meanwhile.
    // GrpcWorkerAgent::Stop only cancels; it does not wait.
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (transport::GrpcWorkerAgent* agent : agents_) agent->Stop();
  }
  bool stopped() const {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }
  // Waits up to `timeout` for Stop; true if it came.
  bool WaitFor(absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopped_), timeout);
    return stopped_;
  }
  // `agent` serves until Remove; stopped at once if the group is.
  void Add(transport::GrpcWorkerAgent* agent) {
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      agents_.insert(agent);
      stop = stopped_;
    }
    if (stop) agent->Stop();
  }
  // True if `agent` was killed (Kill): its host must not register again.
  bool Remove(transport::GrpcWorkerAgent* agent) {
    absl::MutexLock lock(&mu_);
    agents_.erase(agent);
    return killed_.erase(agent) > 0;
  }
  // Stops the one host whose agent serves `host`, as if its machine died:
  // its stream ends now (its data plane closes as Serve returns) and it
  // does not register again. False if no host of the group is `host`.
  bool Kill(HostId host) {
    absl::MutexLock lock(&mu_);
    for (transport::GrpcWorkerAgent* agent : agents_) {
      if (agent->host() != host) continue;
      killed_.insert(agent);
      agent->Stop();
      return true;
    }
    return false;
  }

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::set<transport::GrpcWorkerAgent*> agents_ ABSL_GUARDED_BY(mu_);
  std::set<transport::GrpcWorkerAgent*> killed_ ABSL_GUARDED_BY(mu_);
};

// The collectives of a sim process's hosts (one island): launches meet in
// memory. A launch with a device this process does not serve cannot meet
// here: its collectives fail at once, saying why, instead of waiting out
// the timeout. Thread-safe.
class SimCollectives final : public transport::LaunchCollectives {
 public:
  explicit SimCollectives(absl::Duration timeout) : in_process_(timeout) {}

  // The devices of a host of this process. A device id is never reused
  // (a dead host's devices never come back), so they are never removed:
  // a launch is decided the same way at its Join and at its Leave.
  void AddDevices(const std::vector<transport::DeviceInfo>& devices) {
    absl::MutexLock lock(&mu_);
    for (const transport::DeviceInfo& device : devices) {
      if (device.id.value() < 0) continue;  // Never local: never met here.
      const size_t index = static_cast<size_t>(device.id.value());
      if (index >= local_.size()) local_.resize(index + 1, false);
      local_[index] = true;
    }
  }

  exec::Collectives* Join(const transport::LaunchMember& member) override {
    absl::Status elsewhere = Elsewhere(member);
    if (elsewhere.ok()) return in_process_.Join(member);
    auto refused = std::make_unique<Refused>(std::move(elsewhere));
    exec::Collectives* collectives = refused.get();
    absl::MutexLock lock(&mu_);
    refused_[Key(member)] = std::move(refused);
    return collectives;
  }
  // Decided as its Join was: refused members are the ones listed.
  void Leave(const transport::LaunchMember& member) override {
    {
      absl::MutexLock lock(&mu_);
      if (refused_.erase(Key(member)) > 0) return;
    }
    in_process_.Leave(member);
  }
  void Cancel(const transport::LaunchMember& member,
              absl::Status status) override {
    if (Elsewhere(member).ok()) in_process_.Cancel(member, std::move(status));
  }
  void Abort(const transport::LaunchMember& member,
             absl::Status status) override {
    if (Elsewhere(member).ok()) in_process_.Abort(member, std::move(status));
  }

 private:
  // Fails every call with why the launch cannot meet here.
  class Refused final : public exec::Collectives {
   public:
    explicit Refused(absl::Status why) : why_(std::move(why)) {}
    absl::StatusOr<hlo::Literal> AllReduce(
        const exec::CollectiveOp&, std::vector<hlo::Literal>) override {
      return why_;
    }
    absl::StatusOr<hlo::Literal> AllGather(
        const exec::CollectiveOp&, std::vector<hlo::Literal>) override {
      return why_;
    }
    absl::StatusOr<hlo::Literal> ReduceScatter(
        const exec::CollectiveOp&, std::vector<hlo::Literal>) override {
      return why_;
    }
    absl::StatusOr<hlo::Literal> AllToAll(
        const exec::CollectiveOp&, std::vector<hlo::Literal>) override {
      return why_;
    }
    absl::StatusOr<hlo::Literal> CollectivePermute(const exec::CollectiveOp&,
                                                   hlo::Literal) override {
      return why_;
    }
    absl::Status Cancelled() const override { return why_; }

   private:
    const absl::Status why_;
  };
  static std::pair<uint64_t, int64_t> Key(
      const transport::LaunchMember& member) {
    return {member.seq, member.partition};
  }
  absl::Status Elsewhere(const transport::LaunchMember& member) const {
    absl::MutexLock lock(&mu_);
    for (DeviceId device : member.devices) {
      const size_t index = static_cast<size_t>(device.value());
      if (index >= local_.size() || !local_[index]) {
        return absl::UnimplementedError(absl::StrCat(
            "launch seq ", member.seq, " spans device ", device.value(),
            ", which this sim worker process does not serve: sim devices "
            "meet for collectives within one process (serve an island's "
            "sim hosts from one process, --hosts K)"));
      }
    }
    return absl::OkStatus();
  }

  transport::InProcessLaunchCollectives in_process_;
  mutable absl::Mutex mu_;
  // Indexed by device id: whether this process serves it (a launch of
  // 2,048 devices checks every one at each Join, so no tree lookups).
  std::vector<bool> local_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, int64_t>, std::unique_ptr<Refused>> refused_
      ABSL_GUARDED_BY(mu_);
};

// Keeps the data plane's peer table as the head's membership says: every
// other alive host with a data plane is a peer; a dead one is removed.
void ApplyMembership(transport::TcpDataPlane& data_plane, HostId self,
                     const transport::MembershipUpdate& update) {
  for (const transport::PeerInfo& peer : update.hosts) {
    if (peer.host == self) continue;
    uint64_t incarnation = 0;
    if (peer.state == transport::HostState::kDead || peer.address.empty() ||
        !absl::SimpleHexAtoi(peer.incarnation, &incarnation)) {
      data_plane.RemovePeer(peer.host);
      continue;
    }
    data_plane.SetPeer(peer.host, peer.address, incarnation);
  }
}

// Runs one incarnation: a fresh worker served until the stream ends.
// Returns why it ended.
absl::Status ServeOnce(transport::GrpcWorkerAgent& agent,
                       transport::TcpDataPlane& data_plane,
                       const WorkerFlags& flags, HostGroup& group,
                       SimCollectives* sim_collectives,
                       observe::HealthServer* health, bool* killed) {
  trace::EventBuffer events;  // Sent to the head, for its trace.
  // Launches within this process meet in memory; launches that span
  // processes run their collectives over Gloo, meeting through the head's
  // key-value store (docs/collectives.md). Its Gloo sockets listen on the
  // data plane's interface.
  // Sim hosts meet in their process's SimCollectives instead.
  std::unique_ptr<transport::GlooLaunchCollectives> gloo_collectives;
  transport::LaunchCollectives* collectives = sim_collectives;
  if (sim_collectives != nullptr) {
    sim_collectives->AddDevices(agent.devices());
  } else {
    transport::GlooLaunchCollectives::Options gloo;
    gloo.store = &agent.key_value_store();
    gloo.hostname = HostOfAddress(data_plane.address());
    gloo.auth_token = flags.agent.security.token;
    for (const transport::DeviceInfo& device : agent.devices()) {
      gloo.local_devices.push_back(device.id);
    }
    gloo.timeout = flags.collective_timeout;
    CW_ASSIGN_OR_RETURN(gloo_collectives,
                        transport::GlooLaunchCollectives::Create(std::move(gloo)));
    collectives = gloo_collectives.get();
  }
  worker::WorkerOptions options;
  options.host = agent.host();
  options.island = flags.agent.island;
  options.devices = agent.devices();
  options.data_plane = &data_plane;
  options.collectives = collectives;
  options.sim = flags.sim;
  options.listener = &agent;
  options.events = &events;
  const HostId self = agent.host();
  // The head activates a worker after telling it its ids, then sends every
  // alive worker the new membership: the first update that shows this one
  // alive means its devices are in the head's pool, and only then is it
  // ready for whoever waits on its line.
  std::atomic<bool> announced = false;
  options.on_membership = [&](const transport::MembershipUpdate& update) {
    ApplyMembership(data_plane, self, update);
    const bool alive = std::any_of(
        update.hosts.begin(), update.hosts.end(),
        [self](const transport::PeerInfo& peer) {
          return peer.host == self &&
                 peer.state == transport::HostState::kAlive;
        });
    if (!alive || announced.exchange(true)) return;
    // Ready for the probe before the line, so that whoever read the line
    // finds /readyz ready.
    if (health != nullptr) {
      health->SetReady(absl::StrCat("ready: host ", self.value(), " on island ",
                                    flags.agent.island.value(), ", head ",
                                    flags.agent.head));
    }
    const std::vector<transport::DeviceInfo>& devices = agent.devices();
    std::printf("worker host %lld ready: devices %lld..%lld on island %lld "
                "(head %s, data plane %s)\n",
                static_cast<long long>(self.value()),
                static_cast<long long>(devices.front().id.value()),
                static_cast<long long>(devices.back().id.value()),
                static_cast<long long>(flags.agent.island.value()),
                flags.agent.head.c_str(), data_plane.address().c_str());
    std::fflush(stdout);
  };
  CW_ASSIGN_OR_RETURN(std::unique_ptr<worker::Worker> worker,
                      worker::Worker::Create(options));
  data_plane.Attach(agent.host(), worker.get());
  group.Add(&agent);
  absl::Status ended = agent.Serve(worker.get(), &events);
  *killed = group.Remove(&agent);
  worker->Stop();
  // After this no piece reaches the worker any more.
  data_plane.Shutdown();
  return ended;
}

// A data plane for one incarnation: a fresh incarnation of its own, which
// the worker registers with (its peers dial it expecting that).
absl::StatusOr<std::unique_ptr<transport::TcpDataPlane>> StartDataPlane(
    const WorkerFlags& flags) {
  transport::TcpDataPlaneOptions options;
  options.listen_address = flags.data_plane_listen;
  options.auth_token = flags.agent.security.token;
  options.max_early_piece_bytes = flags.max_early_piece_bytes;
  return transport::TcpDataPlane::Create(std::move(options));
}

// A registered incarnation: the head's stream and its data plane.
struct Registration {
  std::unique_ptr<transport::GrpcWorkerAgent> agent;
  std::unique_ptr<transport::TcpDataPlane> data_plane;
};

// Registers with the head, retrying with backoff for `window`. The last
// error when no head answered in time (or a refusal, at once: a head that
// says no will say no again).
//
// Every attempt is a fresh incarnation (its own data plane): an attempt
// given up on because the head's answer was late may have been admitted,
// and the head then saw that incarnation's stream end, so it is dead to
// the head and would be refused ("which died"); a busy head (512 sim
// hosts registering at once on a loaded machine) answers late.
absl::StatusOr<Registration> RegisterWithRetry(const WorkerFlags& flags,
                                               absl::Duration window,
                                               const HostGroup& group) {
  const absl::Time deadline = absl::Now() + window;
  absl::Duration backoff = kFirstBackoff;
  while (true) {
    absl::StatusOr<std::unique_ptr<transport::TcpDataPlane>> data_plane =
        StartDataPlane(flags);
    if (!data_plane.ok()) {
      return absl::Status(data_plane.status().code(),
                          absl::StrCat("the data plane: ",
                                       data_plane.status().message()));
    }
    transport::GrpcWorkerAgentOptions options = flags.agent;
    options.data_plane_address = (*data_plane)->address();
    options.incarnation = (*data_plane)->incarnation();
    options.connect_timeout = absl::Trunc(
        std::max(absl::Milliseconds(100),
                 std::min(absl::Seconds(2), deadline - absl::Now())),
        absl::Milliseconds(1));
    // Told to stop while the head is away (a cluster stopping its head
    // first): at once, not after this attempt's connect timeout.
    options.stopped = [&group] { return group.stopped(); };
    absl::StatusOr<std::unique_ptr<transport::GrpcWorkerAgent>> agent =
        transport::GrpcWorkerAgent::Register(options);
    if (agent.ok()) {
      return Registration{*std::move(agent), *std::move(data_plane)};
    }
    const absl::StatusCode code = agent.status().code();
    if (code != absl::StatusCode::kUnavailable &&
        code != absl::StatusCode::kDeadlineExceeded) {
      return agent.status();
    }
    if (absl::Now() + backoff >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "no head answered at ", options.head, " within ",
          absl::FormatDuration(window)));
    }
    if (group.WaitFor(backoff)) {
      return absl::CancelledError("stopped while trying to reach the head");
    }
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
}

// --control-stdin: reads commands from stdin until it ends.
void ReadControlCommands(HostGroup& group) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> words =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int64_t host = 0;
    if (words.size() == 2 && words[0] == "kill-host" &&
        absl::SimpleAtoi(words[1], &host)) {
      std::printf(group.Kill(HostId(host)) ? "killed host %lld\n"
                                           : "no host %lld here\n",
                  static_cast<long long>(host));
    } else if (!words.empty()) {
      std::printf("unknown command '%s' (the command is kill-host H)\n",
                  line.c_str());
    }
    std::fflush(stdout);
  }
}

}  // namespace

// Serves one host until the group stops: registers, serves one
// incarnation, and registers again after losing the head. Its exit status.
int RunHost(const WorkerFlags& flags, HostGroup& group,
            SimCollectives* sim_collectives, observe::HealthServer* health) {
  absl::Status last = absl::OkStatus();
  bool first = true;
  while (!group.stopped()) {
    absl::StatusOr<Registration> registered =
        RegisterWithRetry(flags, flags.retry, group);
    if (!registered.ok()) {
      if (group.stopped()) break;
      if (first) {
        PrintUserMessage(LogSeverity::kError, "causeway worker: %s\n",
                     std::string(registered.status().message()).c_str());
      } else {
        PrintUserMessage(LogSeverity::kError,
                     "causeway worker: lost the head (%s), then %s; "
                     "exiting\n",
                     std::string(last.message()).c_str(),
                     std::string(registered.status().message()).c_str());
      }
      return kExitFailure;
    }
    first = false;
    bool killed = false;
    last = ServeOnce(*registered->agent, *registered->data_plane, flags, group,
                     sim_collectives, health, &killed);
    registered->agent.reset();
    if (group.stopped() || killed) break;
    if (health != nullptr) {
      health->SetNotReady(absl::StrCat("lost the head (", last.message(),
                                       "); registering again with ",
                                       flags.agent.head));
    }
    PrintUserMessage(LogSeverity::kWarning,
                 "causeway worker: %s; registering again (for up to %s)\n",
                 std::string(last.message()).c_str(),
                 absl::FormatDuration(flags.retry).c_str());
  }
  return kExitOk;
}

int WorkerCommand(const std::vector<std::string>& args) {
  StopSignals& signals = StopSignals::Install();
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      args, WithSecurityFlags({{"--head"},
                               {"--island"},
                               {"--devices"},
                               {"--device-kind"},
                               {"--hosts"},
                               {"--sim-program-time"},
                               {"--sim-peak-flops"},
                               {"--sim-memory-bandwidth"},
                               {"--sim-interconnect-bandwidth"},
                               {"--sim-collective-latency"},
                               {"--memory-per-device"},
                               {"--retry-seconds"},
                               {"--collective-timeout"},
                               {"--data-plane-listen"},
                               {"--health-listen"},
                               {"--max-early-piece-bytes"},
                               {"--max-notice-queue-bytes"},
                               {"--control-stdin", false},
                               {"--insecure", false}}));
  if (parsed.ok() && parsed->help) {
    std::printf("%s%s%s", kWorkerHelp, kSecurityFlagsHelp, kInsecureFlagHelp);
    return kExitOk;
  }
  absl::StatusOr<WorkerFlags> flags =
      parsed.ok() ? ParseWorkerFlags(*parsed)
                  : absl::StatusOr<WorkerFlags>(parsed.status());
  if (flags.ok() && !parsed->positional.empty()) {
    flags = absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!flags.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway worker: %s\n(see causeway worker --help)\n",
                 std::string(flags.status().message()).c_str());
    return kExitUsage;
  }

  std::unique_ptr<observe::HealthServer> health;
  if (flags->health_listen.has_value()) {
    absl::StatusOr<std::unique_ptr<observe::HealthServer>> started =
        observe::HealthServer::Start(
            *flags->health_listen,
            absl::StrCat("registering with the head at ", flags->agent.head));
    if (!started.ok()) {
      PrintUserMessage(LogSeverity::kError, "causeway worker: --health-listen: %s\n",
                       std::string(started.status().message()).c_str());
      return kExitFailure;
    }
    health = *std::move(started);
    std::printf("health listening on %s\n", health->address().c_str());
    std::fflush(stdout);
  }

  // Shared with the stdin reader, which may outlive this function.
  auto shared_group = std::make_shared<HostGroup>();
  HostGroup& group = *shared_group;
  signals.SetHandler([&group] { group.Stop(); });
  // A sim process's hosts share one SimCollectives (one island).
  std::unique_ptr<SimCollectives> sim_collectives;
  if (flags->sim.has_value()) {
    sim_collectives = std::make_unique<SimCollectives>(flags->collective_timeout);
  }
  if (flags->control_stdin) {
    // Detached: it may wait in a read of stdin when the process exits.
    std::thread([shared_group] { ReadControlCommands(*shared_group); })
        .detach();
  }
  std::vector<int> exit_codes(flags->hosts, kExitOk);
  std::vector<std::thread> hosts;
  for (int64_t i = 1; i < flags->hosts; ++i) {
    hosts.emplace_back([&, i] {
      exit_codes[i] =
          RunHost(*flags, group, sim_collectives.get(), health.get());
      // One host that gives up stops the others: the process is done.
      if (exit_codes[i] != kExitOk) group.Stop();
    });
  }
  exit_codes[0] = RunHost(*flags, group, sim_collectives.get(), health.get());
  if (exit_codes[0] != kExitOk) group.Stop();
  for (std::thread& host : hosts) host.join();
  signals.SetHandler(nullptr);
  for (int code : exit_codes) {
    if (code != kExitOk) return code;
  }
  return kExitOk;
}

}  // namespace causeway::cli
