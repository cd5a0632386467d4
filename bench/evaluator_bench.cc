// Times the evaluator on benchmark programs written by
// `tools/gen_corpus.py --bench-only --out DIR` (single partition each):
//
//   evaluator_bench DIR [google-benchmark flags]
//
// One benchmark per program directory, named after it. Inputs are the
// stacked in<i>.npy files (leading axis = partition, here 1). Each iteration
// is one exec::Evaluator::Run on the benchmark's thread: the evaluator on one
// device, what XLA's executable does in bench/xla_baseline.py. Run it
// pinned to one core (taskset) to compare with that. Reports wall time per
// step ("real_time") and the process's CPU time per step, every thread's
// ("cpu_time"): on a shared machine the second is what the step cost,
// however the core was shared.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "causeway/exec/cpu_isa.h"
#include "causeway/exec/evaluator.h"
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
  std::vector<Literal> args;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Drops the leading partition axis of a stacked input.
Literal Unstack(const Literal& stacked) {
  std::vector<int64_t> dims(stacked.shape().dims().begin() + 1,
                            stacked.shape().dims().end());
  return stacked.WithShape(hlo::Shape(stacked.shape().type(), dims));
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
  for (int i = 0;; ++i) {
    std::filesystem::path input = dir / ("in" + std::to_string(i) + ".npy");
    if (!std::filesystem::exists(input)) break;
    auto literal = hlo::ReadNpy(input.string());
    if (!literal.ok()) {
      std::fprintf(stderr, "%s\n", literal.status().ToString().c_str());
      return false;
    }
    out->args.push_back(Unstack(*literal));
  }
  return true;
}

void RunProgram(benchmark::State& state, BenchProgram* bench) {
  for (auto _ : state) {
    auto outputs = bench->evaluator->Run(bench->args, exec::RunContext());
    if (!outputs.ok()) {
      state.SkipWithError(outputs.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(outputs);
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
