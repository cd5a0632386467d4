// Times the evaluator on benchmark programs written by
// `tools/gen_corpus.py --bench-only --out DIR` (single partition each) or
// bench/train_step_program.py (4 partitions):
//
//   evaluator_bench DIR [google-benchmark flags]
//
// One benchmark per program directory, named after it. Inputs are the
// stacked in<i>.npy files (leading axis = partition). Each iteration of a
// one-partition program is one exec::Evaluator::Run on the benchmark's
// thread: the evaluator on one device, what XLA's executable does in
// bench/xla_baseline.py. Run it pinned to one core (taskset) to compare
// with that. A program of N partitions runs each iteration as N Runs on N
// threads of their own meeting in one exec::InProcessCollectives, as a
// worker's device threads do. Reports wall time per step ("real_time") and
// the process's CPU time per step, every thread's ("cpu_time"): on a
// shared machine the second is what the step cost, however the cores were
// shared.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "causeway/exec/cpu_isa.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace causeway {
namespace {

using hlo::Literal;

struct BenchProgram {
  std::unique_ptr<hlo::Module> module;
  std::unique_ptr<exec::Evaluator> evaluator;
  // args[p]: partition p's arguments.
  std::vector<std::vector<Literal>> args;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Row `partition` of a stacked input (its leading axis dropped).
Literal Unstack(const Literal& stacked, int64_t partition) {
  std::vector<int64_t> dims(stacked.shape().dims().begin() + 1,
                            stacked.shape().dims().end());
  const hlo::Shape shape(stacked.shape().type(), dims);
  if (stacked.shape().dim(0) == 1) return stacked.WithShape(shape);
  Literal row = Literal::Uninitialized(shape);
  const int64_t bytes = row.size_bytes();
  std::memcpy(row.mutable_untyped_data(),
              static_cast<const char*>(stacked.untyped_data()) +
                  partition * bytes,
              static_cast<size_t>(bytes));
  return row;
}

bool LoadProgram(const std::filesystem::path& dir, BenchProgram* out) {
  auto module = hlo::ParseModule(ReadFile(dir / "program.hlo"));
  absl::Status loaded = module.status();
  if (loaded.ok()) loaded = hlo::VerifyModule(**module);
  if (loaded.ok()) {
    auto evaluator = exec::Evaluator::Create(**module);
    loaded = evaluator.status();
    if (loaded.ok()) {
      out->module = *std::move(module);
      out->evaluator = *std::move(evaluator);
    }
  }
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), loaded.ToString().c_str());
    return false;
  }
  const int64_t partitions = out->module->num_partitions();
  out->args.resize(partitions);
  for (int i = 0;; ++i) {
    std::filesystem::path input = dir / ("in" + std::to_string(i) + ".npy");
    if (!std::filesystem::exists(input)) break;
    auto literal = hlo::ReadNpy(input.string());
    if (!literal.ok()) {
      std::fprintf(stderr, "%s\n", literal.status().ToString().c_str());
      return false;
    }
    if (literal->shape().rank() < 1 ||
        literal->shape().dim(0) != partitions) {
      std::fprintf(stderr, "%s: leading axis is not the %lld partitions\n",
                   input.c_str(), static_cast<long long>(partitions));
      return false;
    }
    for (int64_t p = 0; p < partitions; ++p) {
      out->args[p].push_back(Unstack(*literal, p));
    }
  }
  return true;
}

void RunProgram(benchmark::State& state, BenchProgram* bench) {
  const int64_t partitions = static_cast<int64_t>(bench->args.size());
  if (partitions == 1) {
    for (auto _ : state) {
      auto outputs = bench->evaluator->Run(bench->args[0], exec::RunContext());
      if (!outputs.ok()) {
        state.SkipWithError(outputs.status().ToString().c_str());
        break;
      }
      benchmark::DoNotOptimize(outputs);
    }
    return;
  }
  exec::InProcessCollectives collectives;
  uint64_t run_id = 0;
  for (auto _ : state) {
    ++run_id;
    std::vector<absl::Status> statuses(partitions);
    std::vector<std::thread> threads;
    for (int64_t p = 0; p < partitions; ++p) {
      threads.emplace_back([&, p] {
        exec::RunContext context;
        context.partition_id = p;
        context.run_id = run_id;
        context.collectives = &collectives;
        statuses[p] = bench->evaluator->Run(bench->args[p], context).status();
        if (!statuses[p].ok()) collectives.Cancel(statuses[p]);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& status : statuses) {
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        return;
      }
    }
  }
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: evaluator_bench DIR [benchmark flags]\n");
    return 2;
  }
  std::filesystem::path root = argv[1];
  static std::vector<std::unique_ptr<causeway::BenchProgram>> programs;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (std::filesystem::exists(entry.path() / "program.hlo")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    auto bench = std::make_unique<causeway::BenchProgram>();
    if (!causeway::LoadProgram(dir, bench.get())) return 1;
    benchmark::RegisterBenchmark(dir.filename().c_str(), causeway::RunProgram,
                                 bench.get())
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0)
        ->MeasureProcessCPUTime()
        ->UseRealTime();
    programs.push_back(std::move(bench));
  }
  argv[1] = argv[0];
  int bench_argc = argc - 1;
  benchmark::Initialize(&bench_argc, argv + 1);
  benchmark::AddCustomContext(
      "cpu_isa",
      std::string(causeway::exec::CpuIsaName(causeway::exec::ActiveCpuIsa())));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
