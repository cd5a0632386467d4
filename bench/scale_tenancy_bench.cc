// Multi-tenancy at scale, on sim devices: C clients (default 16) with
// fair-share weights 1:2:4:8 (client i has weight 2^(i mod 4)) share every
// device of an H-host sim cluster (default 512 hosts x 4 = 2,048 devices);
// each client's share of the completed programs is compared with its
// weight's share.
//
//   scale_tenancy_bench [--hosts=512] [--clients=16] [--step-us=1000]
//                       [--seconds=60] [--backlog=8] [--window=4]
//
// It starts `causeway head --max-inflight-launches W` (the island
// scheduler's window: with few launches released ahead, its fair-share
// order decides what runs) and one `causeway worker --device-kind sim
// --hosts H` (the build's own binary). Every client has its own
// connection, a session with its weight and a shared slice of all 4H
// devices, and runs a 4H-partition all-reduce + add modelled at --step-us,
// each output the next input, keeping --backlog programs queued (it waits
// for its oldest once that many are outstanding). A client's completions
// are counted from 1/4 to 3/4 of a run of --seconds, when every client is
// backlogged. Prints one JSON line: programs and share per client, the
// share its weight asks for, the worst relative error, the same per weight,
// and the head's and the sim process's CPU per program.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "flags.h"
#include "process_files.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"

namespace causeway {
namespace {

constexpr int64_t kDevicesPerHost = 4;
constexpr absl::Duration kWait = absl::Seconds(600);

struct Options {
  int64_t hosts = 512;
  int64_t clients = 16;
  int64_t step_us = 1000;
  int64_t seconds = 60;
  int64_t backlog = 8;
  int64_t window = 4;
};

std::string StepProgram(int64_t n, int64_t micros) {
  const std::string mesh = absl::StrCat("devices=[", n, "]<=[", n, "]");
  return absl::StrCat(
      "HloModule step, num_partitions=", n,
      "\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT m = f32[] maximum(a, b)\n}\nENTRY main {\n"
      "  x = f32[1] parameter(0), sharding={",
      mesh, "}\n  r = f32[1] all-reduce(x), channel_id=1, replica_groups=[1,",
      n, "]<=[", n,
      "], use_global_device_ids=true, to_apply=max\n"
      "  one = f32[1] constant({1})\n"
      "  ROOT y = f32[1] add(r, one), sharding={",
      mesh, "}, frontend_attributes={causeway_sim_us=\"", micros,
      "\"}\n}\n");
}

// One tenant: its connection, session, shared slice and program.
class Tenant {
 public:
  static absl::StatusOr<std::unique_ptr<Tenant>> Open(
      const std::string& address, int64_t index, double weight,
      int64_t devices, const std::string& program) {
    auto tenant = std::unique_ptr<Tenant>(new Tenant());
    tenant->weight_ = weight;
    CW_ASSIGN_OR_RETURN(tenant->client_, client::Connect(address));
    CW_ASSIGN_OR_RETURN(
        client::Session session,
        tenant->client_->OpenSession(
            {.name = absl::StrCat("tenant ", index, " w", weight),
             .weight = weight}));
    tenant->session_ =
        std::make_unique<client::Session>(std::move(session));
    client::SliceOptions options;
    options.num_devices = devices;
    options.island = IslandId(0);
    options.shared = true;
    CW_ASSIGN_OR_RETURN(client::Slice slice,
                        tenant->session_->CreateSlice(options));
    tenant->slice_ = std::make_unique<client::Slice>(std::move(slice));
    CW_RETURN_IF_ERROR(tenant->slice_->Ready().AwaitFor(kWait).status());
    CW_ASSIGN_OR_RETURN(client::Executable step,
                        tenant->session_->Compile(program, *tenant->slice_));
    tenant->step_ = std::make_unique<client::Executable>(std::move(step));
    CW_ASSIGN_OR_RETURN(
        client::Array x,
        tenant->session_->FromHost(
            hlo::Literal(tenant->step_->parameter_shapes()[0]),
            *tenant->slice_, tenant->step_->parameter_shardings()[0]));
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(kWait));
    tenant->x_ = std::make_unique<client::Array>(std::move(x));
    return tenant;
  }

  double weight() const { return weight_; }

  // Keeps `backlog` programs queued until `stop`; records when each
  // completed. Then waits for the rest and closes the session.
  absl::Status Run(const std::atomic<bool>& stop, int64_t backlog) {
    std::deque<client::Array> outstanding;
    client::Array x = *x_;
    while (!stop.load()) {
      CW_ASSIGN_OR_RETURN(std::vector<client::Array> y, step_->Execute({x}));
      x = y[0];
      outstanding.push_back(x);
      if (static_cast<int64_t>(outstanding.size()) >= backlog) {
        CW_RETURN_IF_ERROR(outstanding.front().Ready().AwaitFor(kWait));
        completions_.push_back(absl::Now());
        outstanding.pop_front();
      }
    }
    for (client::Array& a : outstanding) {
      CW_RETURN_IF_ERROR(a.Ready().AwaitFor(kWait));
    }
    return session_->Close();
  }

  int64_t CompletedWithin(absl::Time from, absl::Time to) const {
    return std::count_if(completions_.begin(), completions_.end(),
                         [&](absl::Time t) { return t >= from && t < to; });
  }

 private:
  Tenant() = default;

  double weight_ = 1;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::Session> session_;
  std::unique_ptr<client::Slice> slice_;
  std::unique_ptr<client::Executable> step_;
  std::unique_ptr<client::Array> x_;
  std::vector<absl::Time> completions_;  // Its Run thread's only.
};

std::string Join(const std::vector<double>& values) {
  return absl::StrJoin(values, ",", [](std::string* out, double v) {
    absl::StrAppend(out, absl::StrFormat("%.5f", v));
  });
}

absl::Status Run(const Options& options) {
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<cli::ChildProcess> head,
      cli::ChildProcess::Start(
          {CAUSEWAY_BINARY, "head", "--worker-timeout", "60",
           "--session-lease", "600", "--max-inflight-launches",
           absl::StrCat(options.window)}));
  CW_ASSIGN_OR_RETURN(std::string listening,
                      head->ReadLineStartingWith("head listening on ", kWait));
  const std::string address = listening.substr(listening.rfind(' ') + 1);
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<cli::ChildProcess> sim,
      cli::ChildProcess::Start(
          {CAUSEWAY_BINARY, "worker", "--head", address, "--island", "0",
           "--devices", absl::StrCat(kDevicesPerHost), "--device-kind", "sim",
           "--hosts", absl::StrCat(options.hosts), "--memory-per-device",
           "1G"}));
  for (int64_t i = 0; i < options.hosts; ++i) {
    CW_RETURN_IF_ERROR(
        sim->ReadLineStartingWith("worker host ", kWait, /*echo=*/false)
            .status());
  }
  const int64_t devices = options.hosts * kDevicesPerHost;
  const std::string program = StepProgram(devices, options.step_us);
  std::vector<std::unique_ptr<Tenant>> tenants;
  for (int64_t i = 0; i < options.clients; ++i) {
    const double weight = static_cast<double>(int64_t{1} << (i % 4));
    CW_ASSIGN_OR_RETURN(std::unique_ptr<Tenant> tenant,
                        Tenant::Open(address, i, weight, devices, program));
    tenants.push_back(std::move(tenant));
  }

  std::atomic<bool> stop = false;
  std::vector<absl::Status> statuses(tenants.size());
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  const absl::Time from = start + absl::Seconds(options.seconds) / 4;
  const absl::Time to = start + absl::Seconds(options.seconds) * 3 / 4;
  for (size_t i = 0; i < tenants.size(); ++i) {
    threads.emplace_back([&, i] {
      statuses[i] = tenants[i]->Run(stop, options.backlog);
    });
  }
  // The processes' CPU over the counting window.
  absl::SleepFor(from - absl::Now());
  const double head_cpu = bench::ProcessCpuSeconds(head->pid());
  const double sim_cpu = bench::ProcessCpuSeconds(sim->pid());
  absl::SleepFor(to - absl::Now());
  const double head_used = bench::ProcessCpuSeconds(head->pid()) - head_cpu;
  const double sim_used = bench::ProcessCpuSeconds(sim->pid()) - sim_cpu;
  absl::SleepFor(start + absl::Seconds(options.seconds) - absl::Now());
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : statuses) CW_RETURN_IF_ERROR(status);

  std::vector<int64_t> counts;
  int64_t total = 0;
  double weight_sum = 0;
  for (const auto& tenant : tenants) {
    counts.push_back(tenant->CompletedWithin(from, to));
    total += counts.back();
    weight_sum += tenant->weight();
  }
  if (total == 0) {
    return absl::DeadlineExceededError(
        "no program completed within the counting window: run longer "
        "(--seconds)");
  }
  std::vector<double> shares, wanted;
  double worst = 0;
  for (size_t i = 0; i < tenants.size(); ++i) {
    shares.push_back(static_cast<double>(counts[i]) / total);
    wanted.push_back(tenants[i]->weight() / weight_sum);
    worst = std::max(worst, std::abs(shares[i] - wanted[i]) / wanted[i]);
  }
  // The same per weight (the clients that share one summed).
  std::vector<double> weight_shares(4, 0), weight_wanted(4, 0);
  for (size_t i = 0; i < tenants.size(); ++i) {
    weight_shares[i % 4] += shares[i];
    weight_wanted[i % 4] += wanted[i];
  }
  double worst_weight = 0;
  for (size_t w = 0; w < 4; ++w) {
    if (weight_wanted[w] == 0) continue;
    worst_weight = std::max(
        worst_weight,
        std::abs(weight_shares[w] - weight_wanted[w]) / weight_wanted[w]);
  }
  const double window_s = absl::ToDoubleSeconds(to - from);
  std::printf(
      "{\"bench\":\"scale_tenancy\",\"hosts\":%lld,\"devices\":%lld,"
      "\"clients\":%lld,\"step_us\":%lld,\"window\":%lld,\"backlog\":%lld,"
      "\"window_s\":%.2f,\"programs\":[%s],\"total\":%lld,"
      "\"programs_per_s\":%.2f,\"shares\":[%s],\"wanted\":[%s],"
      "\"max_relative_error\":%.4f,\"weight_shares\":[%s],"
      "\"weight_wanted\":[%s],\"max_relative_error_per_weight\":%.4f,"
      "\"head_cpu_ms_per_program\":%.2f,\"sim_cpu_ms_per_program\":%.2f}\n",
      static_cast<long long>(options.hosts), static_cast<long long>(devices),
      static_cast<long long>(options.clients),
      static_cast<long long>(options.step_us),
      static_cast<long long>(options.window),
      static_cast<long long>(options.backlog), window_s,
      absl::StrJoin(counts, ",").c_str(), static_cast<long long>(total),
      total / window_s, Join(shares).c_str(), Join(wanted).c_str(), worst,
      Join(weight_shares).c_str(), Join(weight_wanted).c_str(), worst_weight,
      1000 * head_used / total, 1000 * sim_used / total);
  std::fflush(stdout);
  tenants.clear();
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
        !number("seconds", &options.seconds) &&
        !number("backlog", &options.backlog) &&
        !number("window", &options.window)) {
      std::fprintf(stderr,
                   "usage: %s [--hosts=512] [--clients=16] [--step-us=1000] "
                   "[--seconds=60] [--backlog=8] [--window=4]\n",
                   argv[0]);
      return 2;
    }
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
