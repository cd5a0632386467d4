// The Causeway side of the Figure 5 benchmark (bench/figure5_bench.py runs
// it next to JAX multi-controller): programs that JAX compiled
// (bench/figure5_jax.py writes them), fed output to input, on a slice of
// every device of a running cluster, one client (this process, through
// client::Connect).
//
// A program's parameters are x (f32[N], one element per device) and w
// (f32[n, n], replicated, every element 1/n); its output is the next x.
// After P programs every element of x is P exactly, which is checked.
//
//   figure5_bench --cluster=HOST:PORT --devices=N
//                 --programs=FILE:COUNT[,FILE:COUNT...]
//                 [--modes=chained,opbyop] [--warmup=N] [--sim]
//                 [--head-pid=P] [--worker-pids=P,P...]
//                 [--keepalive-timeout=S]
//
// --sim: the cluster's devices are sim devices (docs/sim_devices.md),
// whose outputs are zeros: the final x is checked for its shape only.
// --head-pid / --worker-pids: those processes' CPU seconds (user + system,
// from /proc) during the measured run are reported too.
// --keepalive-timeout: as the cluster's (`causeway cluster
// --keepalive-timeout`), for clusters whose processes are starved of CPU.
//
// Modes: "chained" submits ProgramTraces of 128 programs, each one graph
// (the paper's Pathways -C); "opbyop" calls Executable::Execute once per
// program (one request per program on the session stream, nothing waits).
//
// Prints one JSON object per program and mode:
//   {"bench":"figure5","mode":...,"file":...,"devices":N,"programs":P,
//    "seconds":S,"client_cpu_s":C,"head_cpu_s":H,"worker_cpu_s":W}
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/program_trace.h"
#include "flags.h"
#include "process_files.h"

namespace causeway {
namespace {

using bench::ProcessCpuSeconds;
using bench::ReadFile;
using client::Array;
using client::Executable;

constexpr int64_t kChain = 128;

struct Job {
  std::string file;
  int64_t programs = 0;
};

struct Options {
  std::vector<std::string> modes = {"chained", "opbyop"};
  int64_t warmup = kChain;
  bool sim = false;
  int64_t head_pid = 0;
  std::vector<int64_t> worker_pids;
};

double ProcessesCpuSeconds(const std::vector<int64_t>& pids) {
  double total = 0;
  for (int64_t pid : pids) total += ProcessCpuSeconds(pid);
  return total;
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// w: every element 1/n, of the module's second parameter's shape (n x n).
absl::StatusOr<hlo::Literal> Weights(const hlo::Shape& shape) {
  if (shape.dims().size() != 2 || shape.dims()[0] != shape.dims()[1] ||
      shape.type() != hlo::PrimitiveType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter 1 must be f32[n,n], is ", shape.ToString()));
  }
  hlo::Literal w(shape);
  for (float& v : w.mutable_data<float>()) {
    v = 1.0f / static_cast<float>(shape.dims()[0]);
  }
  return w;
}

void Print(const std::string& mode, const Job& job, int64_t devices,
           double seconds, double cpu, double head_cpu, double worker_cpu) {
  std::printf(
      "{\"bench\":\"figure5\",\"mode\":\"%s\",\"file\":\"%s\",\"devices\":%lld,"
      "\"programs\":%lld,\"seconds\":%.6f,\"client_cpu_s\":%.6f,"
      "\"head_cpu_s\":%.6f,\"worker_cpu_s\":%.6f}\n",
      mode.c_str(), job.file.c_str(), static_cast<long long>(devices),
      static_cast<long long>(job.programs), seconds, cpu, head_cpu,
      worker_cpu);
  std::fflush(stdout);
}

absl::Status OnCluster(client::Client& client, const Job& job, int64_t devices,
                       const Options& options) {
  CW_ASSIGN_OR_RETURN(std::string text, ReadFile(job.file));
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client.OpenSession({.name = "figure5_bench"}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(devices));
  CW_RETURN_IF_ERROR(slice.Ready().AwaitFor(absl::Seconds(60)).status());
  CW_ASSIGN_OR_RETURN(Executable step, session.Compile(text, slice));
  if (step.parameter_shapes().size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(job.file, ": expected 2 parameters"));
  }
  CW_ASSIGN_OR_RETURN(hlo::Literal w_value, Weights(step.parameter_shapes()[1]));
  CW_ASSIGN_OR_RETURN(Array w, session.FromHost(w_value, slice,
                                                step.parameter_shardings()[1]));
  const hlo::Literal zeros(step.parameter_shapes()[0]);
  // Runs `n` programs in `mode` from x = 0; the seconds they took.
  auto run = [&](const std::string& mode, int64_t n) -> absl::StatusOr<double> {
    CW_ASSIGN_OR_RETURN(Array x, session.FromHost(zeros, slice,
                                                  step.parameter_shardings()[0]));
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(60)));
    CW_RETURN_IF_ERROR(w.Ready().AwaitFor(absl::Seconds(60)));
    const absl::Time start = absl::Now();
    if (mode == "chained") {
      for (int64_t done = 0; done < n; done += kChain) {
        client::ProgramTrace trace(session);
        for (int64_t i = 0; i < kChain && done + i < n; ++i) {
          CW_ASSIGN_OR_RETURN(std::vector<Array> y, trace.Execute(step, {x, w}));
          x = y[0];
        }
        CW_RETURN_IF_ERROR(trace.Submit());
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        CW_ASSIGN_OR_RETURN(std::vector<Array> y, step.Execute({x, w}));
        x = y[0];
      }
    }
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(600)));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_ASSIGN_OR_RETURN(hlo::Literal value, x.ToHost().AwaitFor(absl::Seconds(60)));
    if (options.sim) {
      // Sim devices compute nothing: the value is zeros, its shape is right.
      if (!value.shape().Compatible(zeros.shape())) {
        return absl::InternalError(
            absl::StrCat(job.file, " (", mode, "): got ",
                         value.shape().ToString(), ", want ",
                         zeros.shape().ToString()));
      }
      return seconds;
    }
    for (float v : value.data<float>()) {
      if (v != static_cast<float>(n)) {
        return absl::InternalError(absl::StrCat(job.file, " (", mode,
                                                "): got ", v, ", want ", n));
      }
    }
    return seconds;
  };
  for (const std::string& mode : options.modes) {
    if (options.warmup > 0) CW_RETURN_IF_ERROR(run(mode, options.warmup).status());
    const double cpu = ProcessCpuSeconds();
    const double head_cpu =
        options.head_pid > 0 ? ProcessCpuSeconds(options.head_pid) : 0;
    const double worker_cpu = ProcessesCpuSeconds(options.worker_pids);
    CW_ASSIGN_OR_RETURN(double seconds, run(mode, job.programs));
    Print(mode, job, devices, seconds, ProcessCpuSeconds() - cpu,
          options.head_pid > 0 ? ProcessCpuSeconds(options.head_pid) - head_cpu
                               : 0,
          ProcessesCpuSeconds(options.worker_pids) - worker_cpu);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::string cluster;
  int64_t devices = 0;
  std::vector<Job> jobs;
  Options options;
  client::ConnectOptions connect;
  std::vector<std::string>& modes = options.modes;
  auto usage = [&] {
    std::fprintf(stderr,
                 "usage: %s --cluster=HOST:PORT --devices=N "
                 "--programs=FILE:COUNT[,...] [--modes=chained,opbyop] "
                 "[--warmup=N] [--sim] [--head-pid=P] [--worker-pids=P,...] "
                 "[--keepalive-timeout=S]\n",
                 argv[0]);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--cluster=", 0) == 0) {
      cluster = arg.substr(10);
    } else if (arg.rfind("--devices=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(10), &devices) || devices < 1) {
        return usage();
      }
    } else if (arg.rfind("--programs=", 0) == 0) {
      for (absl::string_view part : absl::StrSplit(arg.substr(11), ',')) {
        std::pair<std::string, std::string> fc =
            absl::StrSplit(part, absl::MaxSplits(':', 1));
        Job job{fc.first, 0};
        if (job.file.empty() || !absl::SimpleAtoi(fc.second, &job.programs) ||
            job.programs < 1) {
          std::fprintf(stderr, "bad --programs entry '%s'\n",
                       std::string(part).c_str());
          return usage();
        }
        jobs.push_back(std::move(job));
      }
    } else if (arg.rfind("--modes=", 0) == 0) {
      modes = absl::StrSplit(arg.substr(8), ',');
      for (const std::string& mode : modes) {
        if (mode != "chained" && mode != "opbyop") {
          std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
          return usage();
        }
      }
    } else if (arg.rfind("--warmup=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(9), &options.warmup) ||
          options.warmup < 0) {
        return usage();
      }
    } else if (arg == "--sim") {
      options.sim = true;
    } else if (arg.rfind("--keepalive-timeout=", 0) == 0) {
      if (!bench::SecondsFlag(arg, "keepalive-timeout",
                              &connect.keepalive_timeout)) {
        return usage();
      }
    } else if (arg.rfind("--head-pid=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(11), &options.head_pid)) return usage();
    } else if (arg.rfind("--worker-pids=", 0) == 0) {
      for (absl::string_view pid :
           absl::StrSplit(arg.substr(14), ',', absl::SkipEmpty())) {
        int64_t value = 0;
        if (!absl::SimpleAtoi(pid, &value)) return usage();
        options.worker_pids.push_back(value);
      }
    } else {
      return usage();
    }
  }
  if (devices == 0 || jobs.empty() || cluster.empty()) return usage();
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Connect(cluster, connect);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  for (const Job& job : jobs) {
    absl::Status status = OnCluster(**client, job, devices, options);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
