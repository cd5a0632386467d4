// The paper's Figure 7 against a running cluster: a chain of S stages, each
// a program on its own slice of 4 devices (one host's, on a cluster of S
// hosts x 4), the output of one stage copied to the next stage's slice.
//
//   figure7_bench --cluster=HOST:PORT --stages=S --program=FILE
//                 [--chains=N] [--warmup=N] [--modes=parallel,sequential]
//                 [--head-pid=P] [--keepalive-timeout=S]
//
// FILE is an HLO module on 4 partitions with one parameter and one result
// of the same shape and sharding (bench/scale_fig7.py writes one). Modes:
//   parallel    the whole chain (S programs and S-1 copies) is one
//               ProgramTrace, submitted at once: the head plans and sends
//               every stage before the first has run (parallel
//               asynchronous dispatch);
//   sequential  each stage's program and copy are dispatched only once the
//               previous stage's output is ready: no stage's dispatch work
//               overlaps another stage's run.
// Each mode runs `warmup` chains, then `chains` chains one after the other,
// and prints one JSON line: programs (S x chains), seconds, programs per
// second, the head's CPU seconds (with --head-pid) and the most hosts one
// stage's slice spans. Sim devices compute
// nothing: the result's shape is checked, not its value.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <memory>
#include <set>
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
#include "flags.h"
#include "process_files.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/client/program_trace.h"

namespace causeway {
namespace {

using bench::ProcessCpuSeconds;
using bench::ReadFile;
using client::Array;
using client::Executable;

constexpr int64_t kDevicesPerStage = 4;

struct Options {
  std::string cluster;
  std::string program;
  int64_t stages = 0;
  int64_t chains = 3;
  int64_t warmup = 1;
  std::vector<std::string> modes = {"parallel", "sequential"};
  int64_t head_pid = 0;
  // As the cluster's `--keepalive-timeout` (sim clusters of many hosts).
  client::ConnectOptions connect;
};

// The stages' slices and their programs.
struct Chain {
  std::vector<client::Slice> slices;
  std::vector<Executable> programs;
  // The most hosts one stage's devices are on (1: every stage on one
  // host, as in the paper's figure).
  int64_t hosts_per_stage = 0;
};

absl::StatusOr<Chain> MakeChain(client::Client& client,
                                client::Session& session,
                                const std::string& text, int64_t stages) {
  Chain chain;
  for (int64_t s = 0; s < stages; ++s) {
    CW_ASSIGN_OR_RETURN(client::Slice slice,
                        session.CreateSlice(kDevicesPerStage));
    chain.slices.push_back(std::move(slice));
  }
  for (int64_t s = 0; s < stages; ++s) {
    CW_ASSIGN_OR_RETURN(transport::SliceInfo info,
                        chain.slices[s].Ready().AwaitFor(absl::Seconds(120)));
    std::set<HostId> hosts;
    for (DeviceId device : info.devices) {
      hosts.insert(client.topology()->HostOf(device));
    }
    chain.hosts_per_stage = std::max<int64_t>(
        chain.hosts_per_stage, static_cast<int64_t>(hosts.size()));
    CW_ASSIGN_OR_RETURN(Executable program,
                        session.Compile(text, chain.slices[s]));
    if (program.parameter_shapes().size() != 1 ||
        program.output_shapes().size() != 1) {
      return absl::InvalidArgumentError(
          "the stage program must have one parameter and one result");
    }
    chain.programs.push_back(std::move(program));
  }
  return chain;
}

// Runs the chain once from `x` in `mode`; its last stage's output.
absl::StatusOr<Array> RunChain(client::Session& session, const Chain& chain,
                               Array x, const std::string& mode) {
  const int64_t stages = static_cast<int64_t>(chain.programs.size());
  if (mode == "parallel") {
    client::ProgramTrace trace(session);
    for (int64_t s = 0; s < stages; ++s) {
      CW_ASSIGN_OR_RETURN(std::vector<Array> y,
                          trace.Execute(chain.programs[s], {x}));
      x = y[0];
      if (s + 1 < stages) {
        CW_ASSIGN_OR_RETURN(
            x, trace.Copy(x, chain.slices[s + 1],
                          chain.programs[s + 1].parameter_shardings()[0]));
      }
    }
    CW_RETURN_IF_ERROR(trace.Submit());
    return x;
  }
  for (int64_t s = 0; s < stages; ++s) {
    CW_ASSIGN_OR_RETURN(std::vector<Array> y, chain.programs[s].Execute({x}));
    x = y[0];
    if (s + 1 < stages) {
      CW_ASSIGN_OR_RETURN(
          x, session.Copy(x, chain.slices[s + 1],
                          chain.programs[s + 1].parameter_shardings()[0]));
    }
    // The next stage is dispatched only once this one's output is there.
    CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(600)));
  }
  return x;
}

absl::Status Run(const Options& options) {
  CW_ASSIGN_OR_RETURN(std::string text, ReadFile(options.program));
  CW_ASSIGN_OR_RETURN(std::unique_ptr<client::Client> client,
                      client::Connect(options.cluster, options.connect));
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client->OpenSession({.name = "figure7_bench"}));
  CW_ASSIGN_OR_RETURN(Chain chain,
                      MakeChain(*client, session, text, options.stages));
  const hlo::Literal zeros(chain.programs[0].parameter_shapes()[0]);
  for (const std::string& mode : options.modes) {
    auto chains = [&](int64_t n) -> absl::StatusOr<double> {
      CW_ASSIGN_OR_RETURN(
          Array x, session.FromHost(zeros, chain.slices[0],
                                    chain.programs[0].parameter_shardings()[0]));
      CW_RETURN_IF_ERROR(x.Ready().AwaitFor(absl::Seconds(60)));
      const absl::Time start = absl::Now();
      Array last = x;
      for (int64_t i = 0; i < n; ++i) {
        CW_ASSIGN_OR_RETURN(last, RunChain(session, chain, x, mode));
        CW_RETURN_IF_ERROR(last.Ready().AwaitFor(absl::Seconds(600)));
      }
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      CW_ASSIGN_OR_RETURN(hlo::Literal value,
                          last.ToHost().AwaitFor(absl::Seconds(60)));
      if (!value.shape().Compatible(zeros.shape())) {
        return absl::InternalError(absl::StrCat(
            mode, ": the chain's result is ", value.shape().ToString(),
            ", want ", zeros.shape().ToString()));
      }
      return seconds;
    };
    if (options.warmup > 0) CW_RETURN_IF_ERROR(chains(options.warmup).status());
    const double head_cpu =
        options.head_pid > 0 ? ProcessCpuSeconds(options.head_pid) : 0;
    CW_ASSIGN_OR_RETURN(double seconds, chains(options.chains));
    const double head =
        options.head_pid > 0 ? ProcessCpuSeconds(options.head_pid) - head_cpu
                             : 0;
    const int64_t programs = options.stages * options.chains;
    std::printf(
        "{\"bench\":\"figure7\",\"mode\":\"%s\",\"stages\":%lld,"
        "\"programs\":%lld,\"seconds\":%.6f,\"programs_per_second\":%.3f,"
        "\"head_cpu_s\":%.3f,\"hosts_per_stage\":%lld}\n",
        mode.c_str(), static_cast<long long>(options.stages),
        static_cast<long long>(programs), seconds, programs / seconds, head,
        static_cast<long long>(chain.hosts_per_stage));
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Options options;
  auto usage = [&] {
    std::fprintf(stderr,
                 "usage: %s --cluster=HOST:PORT --stages=S --program=FILE "
                 "[--chains=N] [--warmup=N] [--modes=parallel,sequential] "
                 "[--head-pid=P] [--keepalive-timeout=S]\n",
                 argv[0]);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](const char* name, int64_t* value, int64_t least) {
      return bench::IntFlag(arg, name, value, least);
    };
    if (arg.rfind("--cluster=", 0) == 0) {
      options.cluster = arg.substr(10);
    } else if (arg.rfind("--program=", 0) == 0) {
      options.program = arg.substr(10);
    } else if (arg.rfind("--modes=", 0) == 0) {
      options.modes = absl::StrSplit(arg.substr(8), ',');
      for (const std::string& mode : options.modes) {
        if (mode != "parallel" && mode != "sequential") {
          std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
          return usage();
        }
      }
    } else if (arg.rfind("--keepalive-timeout=", 0) == 0) {
      if (!bench::SecondsFlag(arg, "keepalive-timeout",
                              &options.connect.keepalive_timeout)) {
        return usage();
      }
    } else if (!number("stages", &options.stages, 1) &&
               !number("chains", &options.chains, 1) &&
               !number("warmup", &options.warmup, 0) &&
               !number("head-pid", &options.head_pid, 1)) {
      return usage();
    }
  }
  if (options.cluster.empty() || options.program.empty() ||
      options.stages == 0) {
    return usage();
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
