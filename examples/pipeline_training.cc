// Pipeline-parallel training (GPipe) of a 4-stage MLP on 4 islands × 2
// CPU devices, checked against JAX's one-device run.
//
//   build/bin/pipeline_training [DATA_DIR] [--micro-batches=M]
//                               [--trace=FILE] [--status]
//                               [--cluster HOST:PORT [--token-file F]]
//
// Embedded by default; with --cluster, on a running cluster with at least
// 4 islands of two devices (`causeway cluster --islands 4
// --hosts-per-island 1 --devices-per-host 2`).
// DATA_DIR defaults to examples/data/pipeline (tools/gen_pipeline.py writes
// it). Prints a progress line per step (step, loss, steps/s), the status
// view once mid-run with --status, and the largest difference between the
// trained parameters and JAX's; exits 1 if it exceeds 1e-4.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "example_cluster.h"
#include "pipeline_lib.h"

int main(int argc, char** argv) {
  using namespace causeway;
  std::string dir = "examples/data/pipeline";
  std::string trace_path;
  bool show_status = false;
  examples::PipelineOptions options;
  examples::ExampleClusterFlags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (examples::TakeClusterFlag(argc, argv, i, flags)) continue;
    if (arg.rfind("--trace=", 0) == 0) {
      trace_path = arg.substr(8);
    } else if (arg.rfind("--micro-batches=", 0) == 0 &&
               absl::SimpleAtoi(arg.substr(16), &options.micro_batches)) {
    } else if (arg == "--status") {
      show_status = true;
    } else if (!arg.empty() && arg[0] != '-') {
      dir = arg;
    } else {
      std::fprintf(stderr,
                   "usage: %s [DATA_DIR] [--micro-batches=M] [--trace=FILE] "
                   "[--status] %s\n",
                   argv[0], examples::kClusterFlagsUsage);
      return 2;
    }
  }
  absl::StatusOr<examples::PipelineData> data =
      examples::LoadPipelineData(dir);
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 1;
  }
  options.learning_rate = data->learning_rate;
  absl::StatusOr<examples::ExampleCluster> cluster =
      examples::ExampleCluster::Connect(
          flags, {.islands = 4, .hosts_per_island = 1, .devices_per_host = 2});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  const int64_t steps = static_cast<int64_t>(data->inputs.size());
  std::printf("4 stages on 4 islands x 2 devices, %lld micro-batches, %lld "
              "steps\n",
              static_cast<long long>(options.micro_batches),
              static_cast<long long>(steps));
  auto progress = [&](int64_t step, float loss, double steps_per_second) {
    std::printf("\rstep %lld/%lld  loss %.6f  %.1f steps/s",
                static_cast<long long>(step + 1),
                static_cast<long long>(steps), loss, steps_per_second);
    std::fflush(stdout);
    if (show_status && step == steps / 2) {
      absl::StatusOr<transport::StatusReport> status = cluster->Status();
      std::string text =
          status.ok() ? status->text : status.status().ToString();
      if (!text.empty() && text.back() != '\n') text += '\n';
      std::printf("\n--- status at step %lld ---\n%s---\n",
                  static_cast<long long>(step + 1), text.c_str());
    }
  };
  absl::StatusOr<examples::PipelineRunResult> run =
      examples::TrainPipeline(cluster->client(), *data, options, 0, progress);
  std::printf("\n");
  if (!run.ok()) {
    std::fprintf(stderr, "training failed: %s\n",
                 run.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<double> diff = examples::MaxParameterDifference(
      run->final_parameters, data->reference_final);
  if (!diff.ok()) {
    std::fprintf(stderr, "%s\n", diff.status().ToString().c_str());
    return 1;
  }
  std::printf("losses (Causeway / JAX):");
  for (size_t i = 0; i < run->losses.size(); ++i) {
    std::printf(" %.6f/%.6f", run->losses[i],
                i < data->reference_losses.size() ? data->reference_losses[i]
                                                  : 0.0f);
  }
  std::printf("\nlargest parameter difference from JAX on one device: %.3g\n",
              *diff);
  if (!trace_path.empty()) {
    absl::StatusOr<std::string> trace = cluster->Trace();
    std::ofstream out(trace_path);
    if (!trace.ok() || !(out << *trace)) {
      std::fprintf(stderr, "could not write the trace to %s\n",
                   trace_path.c_str());
      return 1;
    }
    std::printf("trace written to %s (open it in ui.perfetto.dev)\n",
                trace_path.c_str());
  }
  return *diff <= 1e-4 ? 0 : 1;
}
