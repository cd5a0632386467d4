// Pipeline training step time against the GPipe ideal, on a LocalCluster:
// S stages on S islands (devices_per_stage each), M micro-batches. The ideal
// step time is (M + S - 1) / M x (one stage's step time measured alone),
// the bottleneck (slowest) stage's, measured in the same run.
//
//   pipeline_bench [--stages=4] [--hidden=256] [--batch=64]
//                  [--micro-batches=4] [--devices-per-stage=2] [--steps=10]
//                  [--rounds=5] [--trace=FILE]
//
// Each round times `steps` steps of every stage alone, then of all stages
// side by side (each stage's work of a step, with no data flowing between
// them), then `steps` pipelined steps; each is submitted back to back and
// timed to the end of its last step, and the figures are medians over the
// rounds. The ideal assumes
// the stages run in parallel at their speed alone: it needs at least
// stages x devices_per_stage cores. The side-by-side time shows how far
// running the stages together slows them on this machine (shared cores,
// caches and memory bandwidth) before any pipeline dependency; the
// pipeline's time over (M + S - 1) / M x that time is what the schedule
// itself costs. Prints one JSON object.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/trace/trace_recorder.h"
#include "pipeline_lib.h"

namespace causeway {
namespace {

struct Flags {
  int64_t stages = 4;
  int64_t hidden = 256;
  int64_t batch = 64;
  int64_t micro_batches = 4;
  int64_t devices_per_stage = 2;
  int64_t steps = 10;  // Pipelined steps per round.
  int64_t rounds = 5;
  std::string trace;  // Chrome trace of the measured steps, if set.
};

bool ParseFlag(const std::string& arg, const std::string& name,
               int64_t* value) {
  const std::string prefix = "--" + name + "=";
  return arg.rfind(prefix, 0) == 0 &&
         absl::SimpleAtoi(arg.substr(prefix.size()), value) && *value > 0;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The calling thread's CPU time.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

absl::Status Run(const Flags& flags) {
  std::vector<int64_t> sizes(flags.stages + 1, flags.hidden);
  const int64_t warmup = 2;
  examples::PipelineData data = examples::RandomPipelineData(
      sizes, flags.batch, warmup + flags.rounds * flags.steps, /*seed=*/7);
  auto recorder = std::make_shared<trace::TraceRecorder>();
  CW_ASSIGN_OR_RETURN(std::unique_ptr<cluster::LocalCluster> cluster,
                      cluster::LocalCluster::Create(
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
                      examples::PipelineTrainer::Create(*client, data.initial,
                                                        flags.batch, options));

  // Rounds alternate the baselines and the pipeline, so that slow phases of
  // a shared machine fall on both; every figure is the median over rounds.
  std::vector<int64_t> all_stages;
  for (int64_t s = 0; s < flags.stages; ++s) all_stages.push_back(s);
  auto time_ms = [](auto&& fn) -> absl::StatusOr<double> {
    absl::Time start = absl::Now();
    CW_RETURN_IF_ERROR(fn());
    return absl::ToDoubleMilliseconds(absl::Now() - start);
  };
  // Warm-up: every program once, and two pipelined steps.
  CW_RETURN_IF_ERROR(trainer->RunStagesAlone(all_stages, 1));
  int64_t next_batch = 0;
  for (int64_t i = 0; i < warmup; ++i, ++next_batch) {
    CW_ASSIGN_OR_RETURN(client::Array loss,
                        trainer->Step(data.inputs[i], data.targets[i]));
    CW_RETURN_IF_ERROR(loss.Ready().Await());
    CW_RETURN_IF_ERROR(trainer->WaitForParameters());
  }
  std::vector<std::vector<double>> stage_ms(flags.stages);
  std::vector<double> side_by_side_ms, step_ms, submit_ms, submit_cpu_ms;
  for (int64_t round = 0; round < flags.rounds; ++round) {
    for (int64_t s = 0; s < flags.stages; ++s) {
      CW_ASSIGN_OR_RETURN(double ms, time_ms([&] {
                            return trainer->RunStagesAlone({s}, flags.steps);
                          }));
      stage_ms[s].push_back(ms / flags.steps);
    }
    CW_ASSIGN_OR_RETURN(double side_by_side, time_ms([&] {
                          return trainer->RunStagesAlone(all_stages,
                                                         flags.steps);
                        }));
    side_by_side_ms.push_back(side_by_side / flags.steps);

    // Pipelined: submit `steps` steps, then wait for the last one's loss
    // and for every stage's update (the end of a step).
    if (round + 1 == flags.rounds) recorder->Clear();
    absl::Time start = absl::Now();
    client::Array loss;
    absl::Duration submitting;  // The client's own time in Step().
    double cpu_ms = 0;          // Its CPU time there.
    for (int64_t i = 0; i < flags.steps; ++i, ++next_batch) {
      absl::Time before = absl::Now();
      const double cpu_before = ThreadCpuMs();
      CW_ASSIGN_OR_RETURN(loss, trainer->Step(data.inputs[next_batch],
                                              data.targets[next_batch]));
      cpu_ms += ThreadCpuMs() - cpu_before;
      submitting += absl::Now() - before;
    }
    CW_RETURN_IF_ERROR(loss.Ready().Await());
    CW_RETURN_IF_ERROR(trainer->WaitForParameters());
    step_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start) /
                      flags.steps);
    submit_ms.push_back(absl::ToDoubleMilliseconds(submitting) / flags.steps);
    submit_cpu_ms.push_back(cpu_ms / flags.steps);
  }

  std::vector<double> stage_median;
  for (std::vector<double>& times : stage_ms) {
    stage_median.push_back(Median(times));
  }
  const double bottleneck =
      *std::max_element(stage_median.begin(), stage_median.end());
  const double fill =
      static_cast<double>(flags.micro_batches + flags.stages - 1) /
      flags.micro_batches;
  const double ideal = fill * bottleneck;
  const double measured = Median(step_ms);
  const double side_by_side = Median(side_by_side_ms);

  if (!flags.trace.empty()) {
    CW_ASSIGN_OR_RETURN(std::string trace, recorder->ExportChromeTrace());
    std::ofstream(flags.trace) << trace;
  }
  std::vector<std::string> per_stage;
  for (double ms : stage_median)
    per_stage.push_back(absl::StrFormat("%.3f", ms));
  std::printf(
      "{\"bench\":\"pipeline\",\"stages\":%lld,\"micro_batches\":%lld,"
      "\"devices_per_stage\":%lld,\"hidden\":%lld,\"batch\":%lld,"
      "\"cores\":%u,\"rounds\":%lld,\"steps_per_round\":%lld,"
      "\"stage_alone_ms\":[%s],\"ideal_step_ms\":%.3f,"
      "\"measured_step_ms\":%.3f,\"measured_over_ideal\":%.3f,"
      "\"stages_side_by_side_ms\":%.3f,"
      "\"measured_over_side_by_side_ideal\":%.3f,"
      "\"client_submit_ms_per_step\":%.3f,"
      "\"client_submit_cpu_ms_per_step\":%.3f}\n",
      static_cast<long long>(flags.stages),
      static_cast<long long>(flags.micro_batches),
      static_cast<long long>(flags.devices_per_stage),
      static_cast<long long>(flags.hidden), static_cast<long long>(flags.batch),
      std::thread::hardware_concurrency(), static_cast<long long>(flags.rounds),
      static_cast<long long>(flags.steps),
      absl::StrJoin(per_stage, ",").c_str(), ideal, measured, measured / ideal,
      side_by_side, measured / (fill * side_by_side), Median(submit_ms),
      Median(submit_cpu_ms));
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
        !causeway::ParseFlag(arg, "rounds", &flags.rounds) &&
        arg.rfind("--trace=", 0) != 0) {
      std::fprintf(stderr,
                   "usage: %s [--stages=4] [--hidden=256] [--batch=64] "
                   "[--micro-batches=4] [--devices-per-stage=2] "
                   "[--steps=10] [--rounds=5] [--trace=FILE]\n",
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
