// The Pathways paper's dispatch microbenchmark across processes: a head
// (`causeway head`) and N worker processes (`causeway worker`, one device
// each) on loopback, a client in this process (client::Connect), and
// programs chained output to input: ProgramTraces of 128 programs, each
// submitted as one graph (what the paper's "chained" mode measures).
//
// Baselines, same run, same module, same N: "evaluator streamed" is one
// thread per device calling Evaluator::Run back to back with nothing
// dispatching (the least any runtime could cost per program), and
// "embedded" is the same chained loop on a LocalCluster of N hosts in this
// process (in-process channels instead of gRPC). The overhead per chained
// program is its time minus the evaluator streamed.
//
// The program is `y = x + 1` on every device (replicated, N partitions) by
// default. With --collectives it is the paper's scalar all-reduce (max)
// plus add, which needs collectives across the worker processes.
//
//   distributed_dispatch_bench [--workers=2,4] [--programs=4096]
//                              [--repeats=3] [--collectives]
//                              [--causeway=PATH,PATH...] [--http]
//
// --causeway names the `causeway` binaries whose head and workers run the
// processes mode (default: this build's); with several, each round runs
// the processes mode once with each, in turn (A/B of two builds in the same
// run, on the same load).
//
// --http measures what the head's HTTP endpoint costs dispatch
// (docs/operate.md): each binary's processes mode runs three times a round,
// the head without --http-listen, with it and nobody asking, and with a
// scraper in this process fetching /, /api/status and /metrics every
// 100 ms each for the whole timed run.
//
// Prints one JSON object per line and a table; the last value is checked.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/synchronization/notification.h"
#include "causeway/base/status.h"
#include "causeway/cli/child_process.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/parser.h"
#include "httplib.h"

namespace causeway {
namespace {

using client::Array;
using client::Executable;

constexpr int64_t kChain = 128;

// One step on `devices` partitions: x + 1, after an all-reduce(max) of x
// when `collectives`.
std::string StepProgram(int64_t devices, bool collectives) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < devices; ++d) group.push_back(d);
  std::string text = absl::StrCat("HloModule step, num_partitions=", devices,
                                  "\n\n");
  if (collectives) {
    absl::StrAppend(&text,
                    "%max (a: f32[], b: f32[]) -> f32[] {\n"
                    "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                    "  ROOT %m = f32[] maximum(%a, %b)\n}\n\n");
  }
  absl::StrAppend(&text, "ENTRY %main (x: f32[]) -> f32[] {\n",
                  "  %x = f32[] parameter(0), sharding={replicated}\n",
                  "  %one = f32[] constant(1)\n");
  std::string input = "%x";
  if (collectives) {
    absl::StrAppend(&text, "  %r = f32[] all-reduce(%x), channel_id=1, "
                           "replica_groups={{",
                    absl::StrJoin(group, ","),
                    "}}, use_global_device_ids=true, to_apply=%max\n");
    input = "%r";
  }
  absl::StrAppend(&text, "  ROOT %y = f32[] add(", input,
                  ", %one), sharding={replicated}\n}\n");
  return text;
}

struct Result {
  std::string mode;
  int64_t workers = 0;
  int64_t programs = 0;
  double seconds = 0;
  // CPU time of the timed run (user + system), per process kind, in
  // microseconds per program: where the time goes on a machine with fewer
  // cores than processes.
  double head_cpu_us = 0;
  double worker_cpu_us = 0;  // All workers together.
  double client_cpu_us = 0;
  int64_t http_requests = 0;  // Answered 200 during the run (--http).
  double micros_per_program() const { return seconds * 1e6 / programs; }
};

// CPU seconds (user + system) process `pid` has used so far.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses.
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(text.rfind(')') + 2), ' ');
  int64_t user = 0, system = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &user) ||
      !absl::SimpleAtoi(fields[12], &system)) {
    return 0;
  }
  return static_cast<double>(user + system) / sysconf(_SC_CLK_TCK);
}

// The CPU time `pids` use while `run` runs.
struct CpuMeter {
  std::vector<pid_t> pids;
  std::vector<double> start;
  void Start() {
    start.clear();
    for (pid_t pid : pids) start.push_back(CpuSeconds(pid));
  }
  // Seconds used by each since Start.
  std::vector<double> Used() const {
    std::vector<double> used;
    for (size_t i = 0; i < pids.size(); ++i) {
      used.push_back(CpuSeconds(pids[i]) - start[i]);
    }
    return used;
  }
};

// One thread per device runs the step back to back (no runtime at all).
absl::StatusOr<Result> EvaluatorStreamed(int64_t devices, int64_t programs,
                                        bool collectives) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                      hlo::ParseModule(StepProgram(devices, collectives)));
  CW_ASSIGN_OR_RETURN(std::unique_ptr<exec::Evaluator> evaluator,
                      exec::Evaluator::Create(*module));
  exec::InProcessCollectives shared;
  auto run = [&](int64_t n, uint64_t first_run) -> absl::Status {
    std::vector<absl::Status> statuses(devices);
    std::vector<std::thread> threads;
    for (int64_t p = 0; p < devices; ++p) {
      threads.emplace_back([&, p] {
        hlo::Literal x = hlo::Literal::Scalar(hlo::PrimitiveType::kF32, 0.0f);
        for (int64_t i = 0; i < n; ++i) {
          exec::RunContext context;
          context.partition_id = p;
          context.run_id = first_run + i;
          context.collectives = &shared;
          absl::StatusOr<hlo::Literal> y =
              evaluator->Run(std::span<const hlo::Literal>(&x, 1), context);
          if (!y.ok()) {
            statuses[p] = y.status();
            return;
          }
          x = *std::move(y);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& status : statuses) CW_RETURN_IF_ERROR(status);
    return absl::OkStatus();
  };
  CW_RETURN_IF_ERROR(run(programs / 10, 1));
  const absl::Time start = absl::Now();
  CW_RETURN_IF_ERROR(run(programs, 1 + programs));
  return Result{"evaluator streamed", devices, programs,
                absl::ToDoubleSeconds(absl::Now() - start)};
}

// Chained programs on a slice of every device `client` has. `meter`, if
// given, measures the head (first) and workers during the timed run.
// `during`, if given, is started before the timed run and told to stop
// after it (it returns what it counted).
using Background = std::function<std::function<int64_t()>()>;
absl::StatusOr<Result> Chained(client::Client& client, const std::string& mode,
                               int64_t devices, int64_t programs,
                               bool collectives, CpuMeter* meter = nullptr,
                               Background during = nullptr) {
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client.OpenSession({.name = "dispatch_bench"}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(devices));
  CW_RETURN_IF_ERROR(slice.Ready().AwaitFor(absl::Seconds(60)).status());
  CW_ASSIGN_OR_RETURN(Executable step,
                      session.Compile(StepProgram(devices, collectives), slice));
  const hlo::Literal zero = hlo::Literal::Scalar(hlo::PrimitiveType::kF32, 0.0f);
  auto run = [&](int64_t n) -> absl::StatusOr<double> {
    CW_ASSIGN_OR_RETURN(Array x, session.FromHost(zero, slice,
                                                  client::Sharding::Replicated()));
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(60)));
    const absl::Time start = absl::Now();
    for (int64_t done = 0; done < n; done += kChain) {
      client::ProgramTrace trace(session);
      for (int64_t i = 0; i < kChain; ++i) {
        CW_ASSIGN_OR_RETURN(std::vector<Array> y, trace.Execute(step, {x}));
        x = y[0];
      }
      CW_RETURN_IF_ERROR(trace.Submit());
    }
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(600)));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_ASSIGN_OR_RETURN(hlo::Literal value, x.ToHost().AwaitFor(absl::Seconds(60)));
    if (value.data<float>()[0] != static_cast<float>(n)) {
      return absl::InternalError(absl::StrCat(
          mode, ": expected ", n, ", got ", value.data<float>()[0]));
    }
    return seconds;
  };
  CW_RETURN_IF_ERROR(run(kChain * 4).status());  // Warm up.
  CpuMeter self{{getpid()}, {}};
  self.Start();
  if (meter != nullptr) meter->Start();
  std::function<int64_t()> stop = during ? during() : nullptr;
  absl::StatusOr<double> timed = run(programs);
  const int64_t counted = stop ? stop() : 0;
  CW_ASSIGN_OR_RETURN(double seconds, std::move(timed));
  Result result{mode, devices, programs, seconds};
  result.http_requests = counted;
  const double per_program = 1e6 / static_cast<double>(programs);
  result.client_cpu_us = self.Used()[0] * per_program;
  if (meter != nullptr) {
    std::vector<double> used = meter->Used();
    result.head_cpu_us = used[0] * per_program;
    for (size_t i = 1; i < used.size(); ++i) {
      result.worker_cpu_us += used[i] * per_program;
    }
  }
  return result;
}

absl::StatusOr<Result> Embedded(int64_t workers, int64_t programs,
                                bool collectives) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<cluster::LocalCluster> cluster,
                      cluster::LocalCluster::Create(
                          {.hosts_per_island = workers, .devices_per_host = 1}));
  std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster);
  return Chained(*client, "embedded chained", workers, programs, collectives);
}

enum class Http { kOff, kIdle, kScraped };
const char* ProcessesMode(Http http) {
  switch (http) {
    case Http::kOff:
      return "processes chained";
    case Http::kIdle:
      return "processes, http on";
    case Http::kScraped:
      return "processes, scraped 100ms";
  }
  return "";
}

// Fetches /, /api/status and /metrics from `address` every 100 ms each
// until the returned function is called; it returns how many answered 200.
std::function<int64_t()> StartScraper(const std::string& address) {
  auto stop = std::make_shared<absl::Notification>();
  auto answered = std::make_shared<int64_t>(0);
  auto thread = std::make_shared<std::thread>([address, stop, answered] {
    httplib::Client http("http://" + address);
    http.set_keep_alive(true);
    do {
      for (const char* path : {"/", "/api/status", "/metrics"}) {
        httplib::Result result = http.Get(path);
        if (result && result->status == 200) ++*answered;
      }
    } while (!stop->WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  });
  return [stop, answered, thread] {
    stop->Notify();
    thread->join();
    return *answered;
  };
}

// A head and `workers` worker processes, stopped on return.
absl::StatusOr<Result> Processes(const std::string& binary, int64_t workers,
                                 int64_t programs, bool collectives,
                                 Http http = Http::kOff) {
  std::vector<std::string> head_argv = {binary, "head"};
  if (http != Http::kOff) {
    head_argv.insert(head_argv.end(), {"--http-listen", "127.0.0.1:0"});
  }
  CW_ASSIGN_OR_RETURN(std::unique_ptr<cli::ChildProcess> head,
                      cli::ChildProcess::Start(head_argv));
  std::string http_address;
  if (http != Http::kOff) {
    CW_ASSIGN_OR_RETURN(std::string http_line,
                        head->ReadLineStartingWith("http listening on ",
                                                   absl::Seconds(30)));
    http_address = http_line.substr(std::string("http listening on ").size());
  }
  CW_ASSIGN_OR_RETURN(std::string line,
                      head->ReadLineStartingWith("head listening on ",
                                                 absl::Seconds(30)));
  const std::string address = line.substr(std::string("head listening on ").size());
  std::vector<std::unique_ptr<cli::ChildProcess>> members;
  for (int64_t w = 0; w < workers; ++w) {
    CW_ASSIGN_OR_RETURN(
        std::unique_ptr<cli::ChildProcess> worker,
        cli::ChildProcess::Start({binary, "worker", "--head", address,
                                  "--island", "0", "--devices", "1",
                                  "--memory-per-device", "256M"}));
    CW_RETURN_IF_ERROR(
        worker->ReadLineStartingWith("worker host ", absl::Seconds(30))
            .status());
    members.push_back(std::move(worker));
  }
  CW_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> client,
                      client::Connect(address));
  CpuMeter meter;
  meter.pids.push_back(head->pid());
  for (const auto& member : members) meter.pids.push_back(member->pid());
  Background scraper;
  if (http == Http::kScraped) {
    scraper = [http_address] { return StartScraper(http_address); };
  }
  absl::StatusOr<Result> result =
      Chained(*client, ProcessesMode(http), workers, programs, collectives,
              &meter, scraper);
  if (result.ok() && http == Http::kScraped && result->http_requests == 0) {
    return absl::InternalError("the scraper got no answer from the head");
  }
  client.reset();
  for (auto& member : members) member->Stop(absl::Seconds(10));
  head->Stop(absl::Seconds(10));
  return result;
}

int Main(int argc, char** argv) {
  std::vector<int64_t> worker_counts = {2, 4};
  int64_t programs = 4096;
  int64_t repeats = 3;
  bool collectives = false;
  std::vector<std::string> binaries = {CAUSEWAY_BINARY};
  bool http = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--workers=", 0) == 0) {
      worker_counts.clear();
      for (absl::string_view part : absl::StrSplit(arg.substr(10), ',')) {
        int64_t n;
        if (!absl::SimpleAtoi(part, &n) || n < 1) return 2;
        worker_counts.push_back(n);
      }
    } else if (arg.rfind("--programs=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(11), &programs) || programs < kChain) {
        return 2;
      }
      programs = programs / kChain * kChain;
    } else if (arg.rfind("--repeats=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(10), &repeats) || repeats < 1) return 2;
    } else if (arg == "--collectives") {
      collectives = true;
    } else if (arg == "--http") {
      http = true;
    } else if (arg.rfind("--causeway=", 0) == 0) {
      binaries = absl::StrSplit(arg.substr(11), ',', absl::SkipEmpty());
      if (binaries.empty()) return 2;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--workers=2,4] [--programs=N] [--repeats=R] "
                   "[--collectives] [--causeway=PATH,...] [--http]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::vector<Http> http_modes =
      http ? std::vector<Http>{Http::kOff, Http::kIdle, Http::kScraped}
           : std::vector<Http>{Http::kOff};
  std::printf("| workers | causeway | mode | evaluator streamed | embedded chained | "
              "processes chained | overhead per program: embedded / "
              "processes |\n|---|---|---|---|---|---|---|\n");
  for (int64_t workers : worker_counts) {
    // Each mode's median over `repeats` rounds; the modes (and binaries)
    // alternate within a round so that all see the same machine load.
    // us[0]: streamed, us[1]: embedded, us[2 + b * modes + m]: processes
    // of binary b in http mode m.
    std::vector<std::vector<double>> us(2 + binaries.size() * http_modes.size());
    for (int64_t r = 0; r < repeats; ++r) {
      std::vector<std::pair<std::string, absl::StatusOr<Result>>> results;
      results.emplace_back("", EvaluatorStreamed(workers, programs, collectives));
      results.emplace_back("", Embedded(workers, programs, collectives));
      for (const std::string& binary : binaries) {
        for (Http mode : http_modes) {
          results.emplace_back(
              binary, Processes(binary, workers, programs, collectives, mode));
        }
      }
      for (size_t i = 0; i < results.size(); ++i) {
        const auto& [binary, result] = results[i];
        if (!result.ok()) {
          std::fprintf(stderr, "%lld workers: %s\n",
                       static_cast<long long>(workers),
                       result.status().ToString().c_str());
          return 1;
        }
        std::printf(
            "{\"bench\":\"distributed_dispatch\",\"mode\":\"%s\","
            "\"causeway\":\"%s\",\"workers\":%lld,\"programs\":%lld,"
            "\"collectives\":%s,\"us_per_program\":%.2f,"
            "\"client_cpu_us\":%.2f,\"head_cpu_us\":%.2f,"
            "\"workers_cpu_us\":%.2f,\"http_requests\":%lld}\n",
            result->mode.c_str(), binary.c_str(),
            static_cast<long long>(workers), static_cast<long long>(programs),
            collectives ? "true" : "false", result->micros_per_program(),
            result->client_cpu_us, result->head_cpu_us, result->worker_cpu_us,
            static_cast<long long>(result->http_requests));
        us[i].push_back(result->micros_per_program());
      }
      std::fflush(stdout);
    }
    std::vector<double> medians;
    for (std::vector<double>& v : us) {
      std::sort(v.begin(), v.end());
      medians.push_back(v[v.size() / 2]);
    }
    for (size_t b = 0; b < binaries.size(); ++b) {
      for (size_t m = 0; m < http_modes.size(); ++m) {
        const double processes = medians[2 + b * http_modes.size() + m];
        std::printf(
            "| %lld | %s | %s | %.1f us | %.1f us | %.1f us | %.1f / %.1f us "
            "|\n",
            static_cast<long long>(workers), binaries[b].c_str(),
            ProcessesMode(http_modes[m]), medians[0], medians[1], processes,
            medians[1] - medians[0], processes - medians[0]);
      }
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
