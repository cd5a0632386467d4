// Pipeline training step time against the GPipe ideal, on a LocalCluster:
// S stages on S islands (devices_per_stage each), M micro-batches. The ideal
// step time is (M + S - 1) / M x (one stage's step time measured alone),
// the bottleneck (slowest) stage's, measured in the same run.
//
//   pipeline_bench [--stages=4] [--hidden=256] [--batch=64]
//                  [--micro-batches=4] [--devices-per-stage=2] [--steps=10]
//                  [--trace=FILE]
//
// Prints one JSON object per line. The ideal assumes the stages run in
// parallel: it needs at least stages x devices_per_stage cores.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/client/local_client.h"
#include "causeway/runtime/local_cluster.h"
#include "causeway/runtime/trace_recorder.h"
#include "pipeline_lib.h"

namespace causeway {
namespace {

struct Flags {
  int64_t stages = 4;
  int64_t hidden = 256;
  int64_t batch = 64;
  int64_t micro_batches = 4;
  int64_t devices_per_stage = 2;
  int64_t steps = 10;
  std::string trace;  // Chrome trace of the measured steps, if set.
};

bool ParseFlag(const std::string& arg, const std::string& name,
               int64_t* value) {
  const std::string prefix = "--" + name + "=";
  return arg.rfind(prefix, 0) == 0 &&
         absl::SimpleAtoi(arg.substr(prefix.size()), value) && *value > 0;
}

absl::Status Run(const Flags& flags) {
  std::vector<int64_t> sizes(flags.stages + 1, flags.hidden);
  const int64_t warmup = 2;
  examples::PipelineData data = examples::RandomPipelineData(
      sizes, flags.batch, flags.steps + warmup, /*seed=*/7);
  auto recorder = std::make_shared<runtime::TraceRecorder>();
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<runtime::LocalCluster> cluster,
      runtime::LocalCluster::Create(
          {.islands = flags.stages,
           .hosts_per_island = 1,
           .devices_per_host = flags.devices_per_stage,
           .event_sink = recorder}));
  std::unique_ptr<client::Client> client = client::ConnectLocal(*cluster);
  examples::PipelineOptions options;
  options.micro_batches = flags.micro_batches;
  options.devices_per_stage = flags.devices_per_stage;
  options.learning_rate = 0.01f;
  CW_ASSIGN_OR_RETURN(std::unique_ptr<examples::PipelineTrainer> trainer,
                      examples::PipelineTrainer::Create(
                          *client, data.initial, flags.batch, options));

  // Each stage alone (same run): the best of 5 after a warm-up.
  std::vector<double> stage_ms;
  for (int64_t s = 0; s < flags.stages; ++s) {
    CW_RETURN_IF_ERROR(trainer->RunStageAlone(s));
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
      absl::Time start = absl::Now();
      CW_RETURN_IF_ERROR(trainer->RunStageAlone(s));
      best = std::min(best,
                      absl::ToDoubleMilliseconds(absl::Now() - start));
    }
    stage_ms.push_back(best);
  }
  const double bottleneck = *std::max_element(stage_ms.begin(), stage_ms.end());
  const double ideal = static_cast<double>(flags.micro_batches +
                                           flags.stages - 1) /
                       flags.micro_batches * bottleneck;

  // Pipelined steps: warm up, then submit `steps` steps and wait for the
  // last one's loss.
  for (int64_t i = 0; i < warmup; ++i) {
    CW_ASSIGN_OR_RETURN(client::Array loss,
                        trainer->Step(data.inputs[i], data.targets[i]));
    CW_RETURN_IF_ERROR(loss.Ready().Await());
    CW_RETURN_IF_ERROR(trainer->WaitForParameters());
  }
  recorder->Clear();
  absl::Time start = absl::Now();
  client::Array loss;
  absl::Duration submitting;  // The client's own time in Step().
  for (int64_t i = warmup; i < warmup + flags.steps; ++i) {
    absl::Time before = absl::Now();
    CW_ASSIGN_OR_RETURN(loss, trainer->Step(data.inputs[i], data.targets[i]));
    submitting += absl::Now() - before;
  }
  CW_RETURN_IF_ERROR(loss.Ready().Await());
  // A step ends when every stage has applied its update.
  CW_RETURN_IF_ERROR(trainer->WaitForParameters());
  const double step_ms =
      absl::ToDoubleMilliseconds(absl::Now() - start) / flags.steps;

  if (!flags.trace.empty()) {
    CW_ASSIGN_OR_RETURN(std::string trace, recorder->ExportChromeTrace());
    std::ofstream(flags.trace) << trace;
  }
  std::vector<std::string> per_stage;
  for (double ms : stage_ms) per_stage.push_back(absl::StrCat(ms));
  std::printf(
      "{\"bench\":\"pipeline\",\"stages\":%lld,\"micro_batches\":%lld,"
      "\"devices_per_stage\":%lld,\"hidden\":%lld,\"batch\":%lld,"
      "\"cores\":%u,\"stage_alone_ms\":[%s],\"ideal_step_ms\":%.3f,"
      "\"measured_step_ms\":%.3f,\"measured_over_ideal\":%.3f,"
      "\"client_submit_ms_per_step\":%.3f}\n",
      static_cast<long long>(flags.stages),
      static_cast<long long>(flags.micro_batches),
      static_cast<long long>(flags.devices_per_stage),
      static_cast<long long>(flags.hidden), static_cast<long long>(flags.batch),
      std::thread::hardware_concurrency(),
      absl::StrJoin(per_stage, ",").c_str(), ideal, step_ms, step_ms / ideal,
      absl::ToDoubleMilliseconds(submitting) / flags.steps);
  return absl::OkStatus();
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) {
  causeway::Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!causeway::ParseFlag(arg, "stages", &flags.stages) &&
        !causeway::ParseFlag(arg, "hidden", &flags.hidden) &&
        !causeway::ParseFlag(arg, "batch", &flags.batch) &&
        !causeway::ParseFlag(arg, "micro-batches", &flags.micro_batches) &&
        !causeway::ParseFlag(arg, "devices-per-stage",
                             &flags.devices_per_stage) &&
        !causeway::ParseFlag(arg, "steps", &flags.steps) &&
        arg.rfind("--trace=", 0) != 0) {
      std::fprintf(stderr,
                   "usage: %s [--stages=4] [--hidden=256] [--batch=64] "
                   "[--micro-batches=4] [--devices-per-stage=2] "
                   "[--steps=10]\n",
                   argv[0]);
      return 2;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--trace=", 0) == 0) flags.trace = arg.substr(8);
  }
  absl::Status status = causeway::Run(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
