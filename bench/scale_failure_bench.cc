// Failure at scale, on sim devices: one of H hosts (default 512, one sim
// process) is killed while C clients run steps; how long until the head
// declares it dead, until the affected client's slice is remapped, until
// that client's next good step, and whether any other client saw an error.
//
//   scale_failure_bench [--hosts=512] [--clients=8] [--step-us=1000]
//                       [--before-s=5] [--after-s=20]
//
// It starts `causeway head` and one `causeway worker --device-kind sim
// --hosts H --control-stdin` (the build's own binary), and C clients, each
// its own connection and session with a slice of 4 devices, running a
// 4-device all-reduce + add modelled at --step-us, one step after the
// other (Execute, then wait for the output). Client 0's slice is on the
// victim host. After --before-s it writes `kill-host V` to the sim
// process (the host's stream and data plane close, as when its machine
// dies) and measures, from that moment:
//   detected   the head prints `causeway head: host V dead` (its stdout);
//   remapped   client 0's slice info shows a new generation (polled);
//   next step  client 0's first step that completes after the kill (it
//              retries from a fresh input, compiling again, after each
//              error: what a client resuming from its snapshot does).
// Every client's steps and errors before and after the kill are counted
// until --after-s. Prints one JSON line.
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "flags.h"

namespace causeway {
namespace {

constexpr int64_t kDevicesPerHost = 4;
constexpr absl::Duration kWait = absl::Seconds(120);

struct Options {
  int64_t hosts = 512;
  int64_t clients = 8;
  int64_t step_us = 1000;
  int64_t before_s = 5;
  int64_t after_s = 20;
};

std::string StepProgram(int64_t micros) {
  return absl::StrCat(
      "HloModule step, num_partitions=4\n"
      "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT m = f32[] maximum(a, b)\n}\nENTRY main {\n"
      "  x = f32[1] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,4]<=[4], "
      "use_global_device_ids=true, to_apply=max\n"
      "  one = f32[1] constant({1})\n"
      "  ROOT y = f32[1] add(r, one), sharding={devices=[4]<=[4]}, "
      "frontend_attributes={causeway_sim_us=\"",
      micros, "\"}\n}\n");
}

// One client: its connection, session and slice, and what its steps saw.
class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Open(
      const std::string& address, int64_t index, const std::string& program) {
    auto client = std::unique_ptr<Client>(new Client());
    client->program_ = program;
    CW_ASSIGN_OR_RETURN(client->client_, client::Connect(address));
    CW_ASSIGN_OR_RETURN(
        client::Session session,
        client->client_->OpenSession({.name = absl::StrCat("client ", index)}));
    client->session_ = std::make_unique<client::Session>(std::move(session));
    CW_ASSIGN_OR_RETURN(client::Slice slice,
                        client->session_->CreateSlice(kDevicesPerHost));
    client->slice_ = std::make_unique<client::Slice>(std::move(slice));
    CW_ASSIGN_OR_RETURN(transport::SliceInfo info,
                        client->slice_->Ready().AwaitFor(kWait));
    client->first_host_ = client->client_->topology()->HostOf(info.devices[0]);
    return client;
  }

  HostId host() const { return first_host_; }
  client::Slice& slice() { return *slice_; }

  // Runs steps until `stop`; counts them (and errors) before and after
  // `kill_time` once it is set.
  void Run(const std::atomic<bool>& stop, const std::atomic<int64_t>& kill_us) {
    std::optional<client::Executable> step;
    std::optional<client::Array> x;
    while (!stop.load()) {
      absl::Status status = Step(step, x);
      const int64_t killed = kill_us.load();
      const absl::Time now = absl::Now();
      const bool after = killed > 0 && absl::ToUnixMicros(now) >= killed;
      absl::MutexLock lock(&mu_);
      if (status.ok()) {
        ++(after ? steps_after_ : steps_before_);
        if (after && !first_good_after_.has_value()) first_good_after_ = now;
      } else {
        ++(after ? errors_after_ : errors_before_);
        if (last_error_.empty()) last_error_ = status.ToString();
        step.reset();  // Compile again and start from a fresh input.
        x.reset();
      }
    }
  }

  struct Counts {
    int64_t steps_before, steps_after, errors_before, errors_after;
    std::optional<absl::Time> first_good_after;
    std::string last_error;
  };
  Counts counts() const {
    absl::MutexLock lock(&mu_);
    return {steps_before_, steps_after_, errors_before_, errors_after_,
            first_good_after_, last_error_};
  }

 private:
  Client() = default;

  absl::Status Step(std::optional<client::Executable>& step,
                    std::optional<client::Array>& x) {
    if (!step.has_value()) {
      CW_ASSIGN_OR_RETURN(client::Executable compiled,
                          session_->Compile(program_, *slice_));
      step = std::move(compiled);
    }
    if (!x.has_value()) {
      CW_ASSIGN_OR_RETURN(
          client::Array fresh,
          session_->FromHost(hlo::Literal(step->parameter_shapes()[0]), *slice_,
                             step->parameter_shardings()[0]));
      x = std::move(fresh);
    }
    CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, step->Execute({*x}));
    CW_RETURN_IF_ERROR(y[0].Ready().AwaitFor(kWait));
    x = y[0];
    return absl::OkStatus();
  }

  std::string program_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Session> session_;
  std::unique_ptr<client::Slice> slice_;
  HostId first_host_;
  mutable absl::Mutex mu_;
  int64_t steps_before_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_after_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t errors_before_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t errors_after_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> first_good_after_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

absl::Status Run(const Options& options) {
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<cli::ChildProcess> head,
      cli::ChildProcess::Start({CAUSEWAY_BINARY, "head", "--worker-timeout",
                                "30", "--session-lease", "600"}));
  CW_ASSIGN_OR_RETURN(std::string listening,
                      head->ReadLineStartingWith("head listening on ", kWait));
  const std::string address = listening.substr(listening.rfind(' ') + 1);
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<cli::ChildProcess> sim,
      cli::ChildProcess::Start(
          {CAUSEWAY_BINARY, "worker", "--head", address, "--island", "0",
           "--devices", absl::StrCat(kDevicesPerHost), "--device-kind", "sim",
           "--hosts", absl::StrCat(options.hosts), "--memory-per-device", "1G",
           "--control-stdin"},
          /*merge_stderr=*/false, /*stdin_pipe=*/true));
  for (int64_t i = 0; i < options.hosts; ++i) {
    CW_RETURN_IF_ERROR(
        sim->ReadLineStartingWith("worker host ", kWait, /*echo=*/false)
            .status());
  }
  const std::string program = StepProgram(options.step_us);
  std::vector<std::unique_ptr<Client>> clients;
  for (int64_t i = 0; i < options.clients; ++i) {
    CW_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                        Client::Open(address, i, program));
    clients.push_back(std::move(client));
  }
  const HostId victim = clients[0]->host();
  std::atomic<bool> stop = false;
  std::atomic<int64_t> kill_us = 0;
  std::vector<std::thread> threads;
  for (auto& client : clients) {
    threads.emplace_back([&, c = client.get()] { c->Run(stop, kill_us); });
  }
  absl::SleepFor(absl::Seconds(options.before_s));  // Steps before the kill.

  const absl::Time killed = absl::Now();
  kill_us.store(absl::ToUnixMicros(killed));
  absl::Status kill =
      sim->WriteToStdin(absl::StrCat("kill-host ", victim.value(), "\n"));
  if (kill.ok()) {
    kill = sim->ReadLineStartingWith(
                   absl::StrCat("killed host ", victim.value()), kWait, false)
               .status();
  }
  absl::StatusOr<std::string> dead = head->ReadLineStartingWith(
      absl::StrCat("causeway head: host ", victim.value(), " dead"), kWait,
      /*echo=*/false);
  const absl::Time detected = absl::Now();
  std::optional<absl::Time> remapped;
  while (kill.ok() && dead.ok() && absl::Now() - killed < kWait) {
    absl::StatusOr<transport::SliceInfo> info =
        clients[0]->slice().Info().AwaitFor(kWait);
    if (info.ok() && info->generation > 1) {
      remapped = absl::Now();
      break;
    }
  }
  const absl::Duration left =
      absl::Seconds(options.after_s) - (absl::Now() - killed);
  if (left > absl::ZeroDuration()) absl::SleepFor(left);  // Steps after it.
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  CW_RETURN_IF_ERROR(kill);
  CW_RETURN_IF_ERROR(dead.status());

  auto ms = [&](std::optional<absl::Time> t) {
    return t.has_value() ? absl::StrCat(absl::ToDoubleMilliseconds(*t - killed))
                         : std::string("null");
  };
  const Client::Counts affected = clients[0]->counts();
  int64_t other_steps = 0, other_errors = 0;
  std::string other_error;
  for (size_t i = 1; i < clients.size(); ++i) {
    const Client::Counts c = clients[i]->counts();
    other_steps += c.steps_before + c.steps_after;
    other_errors += c.errors_before + c.errors_after;
    if (other_error.empty()) other_error = c.last_error;
  }
  std::printf(
      "{\"bench\":\"scale_failure\",\"hosts\":%lld,\"clients\":%lld,"
      "\"step_us\":%lld,\"victim\":%lld,\"detected_ms\":%s,\"remapped_ms\":%s,"
      "\"next_good_step_ms\":%s,\"affected_steps_before\":%lld,"
      "\"affected_steps_after\":%lld,\"affected_errors\":%lld,"
      "\"other_steps\":%lld,\"other_errors\":%lld,\"affected_error\":\"%s\","
      "\"other_error\":\"%s\"}\n",
      static_cast<long long>(options.hosts),
      static_cast<long long>(options.clients),
      static_cast<long long>(options.step_us),
      static_cast<long long>(victim.value()), ms(detected).c_str(),
      ms(remapped).c_str(), ms(affected.first_good_after).c_str(),
      static_cast<long long>(affected.steps_before),
      static_cast<long long>(affected.steps_after),
      static_cast<long long>(affected.errors_before + affected.errors_after),
      static_cast<long long>(other_steps), static_cast<long long>(other_errors),
      absl::CEscape(affected.last_error).c_str(),
      absl::CEscape(other_error).c_str());
  std::fflush(stdout);
  sim->Stop(absl::Seconds(30));
  head->Stop(absl::Seconds(30));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](const char* name, int64_t* value) {
      return bench::IntFlag(arg, name, value, 1);
    };
    if (!number("hosts", &options.hosts) &&
        !number("clients", &options.clients) &&
        !number("step-us", &options.step_us) &&
        !number("before-s", &options.before_s) &&
        !number("after-s", &options.after_s)) {
      std::fprintf(stderr,
                   "usage: %s [--hosts=512] [--clients=8] [--step-us=1000] "
                   "[--before-s=5] [--after-s=20]\n",
                   argv[0]);
      return 2;
    }
  }
  if (options.clients * kDevicesPerHost > options.hosts * kDevicesPerHost) {
    std::fprintf(stderr, "more clients than hosts\n");
    return 2;
  }
  if (absl::Status status = Run(options); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
