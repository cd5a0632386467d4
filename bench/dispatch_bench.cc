// The Pathways paper's dispatch microbenchmark on a LocalCluster: a program
// that is one scalar all-reduce plus one scalar add, its output chained to
// its next input, run three ways on 1, 2, 4 and 8 devices of one island:
//
//   op-by-op   one Executable::Execute call per program;
//   chained    ProgramTraces of 128 programs, each submitted as one graph;
//   fused      one HLO module of 128 unrolled steps (XLA-style fusion of
//              the whole loop), counted as 128 programs per run.
//
// The baseline, same run, the same one-step module and device count, no
// runtime: "evaluator streamed" is one thread per device calling
// Evaluator::Run back to back (the evaluator's time with no dispatch at
// all). The runtime's overhead per chained program is its time minus that.
//
//   dispatch_bench [--devices=1,2,4,8] [--programs=4096] [--repeats=3]
//
// Prints one JSON object per line and a table. The all-reduce takes the
// max, so after k steps from 0 every device holds k (checked).
#include <algorithm>
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
#include "causeway/base/status.h"
#include "causeway/client/client.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/parser.h"

namespace causeway {
namespace {

using client::Array;
using client::Executable;

constexpr int64_t kChain = 128;

// `steps` x (all-reduce(max) + 1) on `devices` partitions, unrolled.
std::string StepsProgram(int64_t devices, int64_t steps) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < devices; ++d) group.push_back(d);
  std::string text = absl::StrCat(
      "HloModule dispatch_", steps, ", num_partitions=", devices, "\n\n",
      "%max (a: f32[], b: f32[]) -> f32[] {\n"
      "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %m = f32[] maximum(%a, %b)\n}\n\n",
      "ENTRY %main (x: f32[]) -> f32[] {\n",
      "  %x = f32[] parameter(0), sharding={replicated}\n",
      "  %one = f32[] constant(1)\n");
  std::string prev = "%x";
  for (int64_t i = 0; i < steps; ++i) {
    absl::StrAppend(&text, "  %r", i, " = f32[] all-reduce(", prev,
                    "), channel_id=", i + 1, ", replica_groups={{",
                    absl::StrJoin(group, ","),
                    "}}, use_global_device_ids=true, to_apply=%max\n");
    absl::StrAppend(&text, "  ", i + 1 == steps ? "ROOT " : "", "%y", i,
                    " = f32[] add(%r", i, ", %one)",
                    i + 1 == steps ? ", sharding={replicated}" : "", "\n");
    prev = absl::StrCat("%y", i);
  }
  return text + "}\n";
}

struct Result {
  std::string mode;
  int64_t devices = 0;
  int64_t programs = 0;
  double seconds = 0;
  double programs_per_second() const { return programs / seconds; }
  double micros_per_program() const { return seconds * 1e6 / programs; }
};

absl::Status CheckValue(const Array& array, float expected) {
  CW_ASSIGN_OR_RETURN(hlo::Literal value, array.ToHost().Await());
  if (value.data<float>()[0] != expected) {
    return absl::InternalError(absl::StrCat("expected ", expected, ", got ",
                                            value.data<float>()[0]));
  }
  return absl::OkStatus();
}

// The evaluator streamed: one thread per device runs the one-step module
// back to back (Evaluator::Run with in-process collectives), with nobody
// dispatching: the least a runtime could cost per program.
absl::StatusOr<Result> EvaluatorStreamed(int64_t devices, int64_t programs) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                      hlo::ParseModule(StepsProgram(devices, 1)));
  CW_ASSIGN_OR_RETURN(std::unique_ptr<exec::Evaluator> evaluator,
                      exec::Evaluator::Create(*module));
  exec::InProcessCollectives collectives;
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
          context.collectives = &collectives;
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
  CW_RETURN_IF_ERROR(run(programs / 10, 1));  // Warm up.
  absl::Time start = absl::Now();
  CW_RETURN_IF_ERROR(run(programs, 1 + programs));
  return Result{"evaluator streamed", devices, programs,
                absl::ToDoubleSeconds(absl::Now() - start)};
}

absl::StatusOr<std::vector<Result>> Runtime(int64_t devices,
                                            int64_t programs) {
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<cluster::LocalCluster> cluster,
      cluster::LocalCluster::Create({.islands = 1,
                                     .hosts_per_island = 1,
                                     .devices_per_host = devices}));
  std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster);
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client->OpenSession({.name = "dispatch_bench"}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(devices));
  CW_RETURN_IF_ERROR(slice.Ready().Await().status());
  CW_ASSIGN_OR_RETURN(Executable step,
                      session.Compile(StepsProgram(devices, 1), slice));
  CW_ASSIGN_OR_RETURN(Executable fused,
                      session.Compile(StepsProgram(devices, kChain), slice));
  const hlo::Literal zero =
      hlo::Literal::Scalar(hlo::PrimitiveType::kF32, 0.0f);
  const client::Sharding replicated = client::Sharding::Replicated();
  std::vector<Result> results;

  auto op_by_op = [&](int64_t n) -> absl::StatusOr<double> {
    CW_ASSIGN_OR_RETURN(Array x, session.FromHost(zero, slice, replicated));
    CW_RETURN_IF_ERROR(x.Ready().Await());
    absl::Time start = absl::Now();
    for (int64_t i = 0; i < n; ++i) {
      CW_ASSIGN_OR_RETURN(std::vector<Array> y, step.Execute({x}));
      x = y[0];
    }
    CW_RETURN_IF_ERROR(x.Ready().Await());
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_RETURN_IF_ERROR(CheckValue(x, static_cast<float>(n)));
    return seconds;
  };
  auto chained = [&](int64_t n) -> absl::StatusOr<double> {
    CW_ASSIGN_OR_RETURN(Array x, session.FromHost(zero, slice, replicated));
    CW_RETURN_IF_ERROR(x.Ready().Await());
    absl::Time start = absl::Now();
    for (int64_t done = 0; done < n; done += kChain) {
      client::ProgramTrace trace(session);
      for (int64_t i = 0; i < kChain; ++i) {
        CW_ASSIGN_OR_RETURN(std::vector<Array> y, trace.Execute(step, {x}));
        x = y[0];
      }
      CW_RETURN_IF_ERROR(trace.Submit());
    }
    CW_RETURN_IF_ERROR(x.Ready().Await());
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_RETURN_IF_ERROR(CheckValue(x, static_cast<float>(n)));
    return seconds;
  };
  auto fused_runs = [&](int64_t n) -> absl::StatusOr<double> {
    CW_ASSIGN_OR_RETURN(Array x, session.FromHost(zero, slice, replicated));
    CW_RETURN_IF_ERROR(x.Ready().Await());
    absl::Time start = absl::Now();
    for (int64_t done = 0; done < n; done += kChain) {
      CW_ASSIGN_OR_RETURN(std::vector<Array> y, fused.Execute({x}));
      x = y[0];
    }
    CW_RETURN_IF_ERROR(x.Ready().Await());
    double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    CW_RETURN_IF_ERROR(CheckValue(x, static_cast<float>(n)));
    return seconds;
  };
  const int64_t n = (programs + kChain - 1) / kChain * kChain;
  for (auto& [mode, fn] :
       std::vector<std::pair<std::string,
                             std::function<absl::StatusOr<double>(int64_t)>>>{
           {"op-by-op", op_by_op}, {"chained", chained}, {"fused", fused_runs}}) {
    CW_RETURN_IF_ERROR(fn(n / 8).status());  // Warm up.
    CW_ASSIGN_OR_RETURN(double seconds, fn(n));
    results.push_back(Result{mode, devices, n, seconds});
  }
  return results;
}

int Main(int argc, char** argv) {
  std::vector<int64_t> device_counts = {1, 2, 4, 8};
  int64_t programs = 4096;
  int64_t repeats = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--devices=", 0) == 0) {
      device_counts.clear();
      for (absl::string_view part : absl::StrSplit(arg.substr(10), ',')) {
        int64_t d;
        if (!absl::SimpleAtoi(part, &d) || d < 1) return 2;
        device_counts.push_back(d);
      }
    } else if (arg.rfind("--programs=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(11), &programs)) return 2;
    } else if (arg.rfind("--repeats=", 0) == 0) {
      if (!absl::SimpleAtoi(arg.substr(10), &repeats)) return 2;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--devices=1,2,4,8] [--programs=N] "
                   "[--repeats=R]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<Result> table;
  for (int64_t devices : device_counts) {
    // The best of `repeats` runs of each mode (the machine is shared).
    std::vector<Result> best;
    for (int64_t r = 0; r < repeats; ++r) {
      absl::StatusOr<Result> streamed = EvaluatorStreamed(devices, programs);
      absl::StatusOr<std::vector<Result>> runtime = Runtime(devices, programs);
      if (!streamed.ok() || !runtime.ok()) {
        std::fprintf(stderr, "%d devices: %s %s\n", static_cast<int>(devices),
                     streamed.status().ToString().c_str(),
                     runtime.status().ToString().c_str());
        return 1;
      }
      std::vector<Result> all = *runtime;
      all.insert(all.begin(), *streamed);
      if (best.empty()) {
        best = all;
      } else {
        for (size_t i = 0; i < all.size(); ++i) {
          if (all[i].seconds < best[i].seconds) best[i] = all[i];
        }
      }
    }
    for (const Result& result : best) {
      std::printf(
          "{\"bench\":\"dispatch\",\"mode\":\"%s\",\"devices\":%lld,"
          "\"programs\":%lld,\"seconds\":%.6f,\"programs_per_second\":%.1f,"
          "\"us_per_program\":%.2f}\n",
          result.mode.c_str(), static_cast<long long>(result.devices),
          static_cast<long long>(result.programs), result.seconds,
          result.programs_per_second(), result.micros_per_program());
      table.push_back(result);
    }
    const Result& streamed = best[0];
    const Result& chained = best[2];
    std::printf(
        "{\"bench\":\"dispatch_overhead\",\"devices\":%lld,"
        "\"chained_us_per_program\":%.2f,"
        "\"evaluator_streamed_us_per_program\":%.2f,"
        "\"overhead_vs_evaluator_streamed_us\":%.2f}\n",
        static_cast<long long>(devices), chained.micros_per_program(),
        streamed.micros_per_program(),
        chained.micros_per_program() - streamed.micros_per_program());
    std::fflush(stdout);
  }
  std::printf(
      "\n| devices | evaluator streamed | op-by-op | chained (128) | "
      "fused (128) | overhead per chained program vs streamed |\n"
      "|---|---|---|---|---|---|\n");
  for (size_t i = 0; i + 3 < table.size(); i += 4) {
    std::printf(
        "| %lld | %.0f/s | %.0f/s | %.0f/s | %.0f/s | %.1f us |\n",
        static_cast<long long>(table[i].devices),
        table[i].programs_per_second(), table[i + 1].programs_per_second(),
        table[i + 2].programs_per_second(), table[i + 3].programs_per_second(),
        table[i + 2].micros_per_program() - table[i].micros_per_program());
  }
  return 0;
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) { return causeway::Main(argc, argv); }
