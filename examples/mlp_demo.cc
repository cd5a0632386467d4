// Trains the JAX-compiled, 4-partition data-parallel MLP train step on a
// 4-device slice, and compares the loss curve with JAX's own run of the
// same steps on the same data. The parameters stay on the devices from step
// to step; only each step's batch is uploaded (examples/mlp_lib.h).
//
// Usage: mlp_demo DIR [--steps N] [--cluster HOST:PORT [--token-file F]]
// DIR is written by tools/mlp_demo_reference.py (see its docstring).
// Embedded by default (one host of four devices); with --cluster, on a
// running cluster with four free devices on one island (spread over
// several worker processes, the all-reduces go through Gloo).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/base/status.h"
#include "causeway/client/session.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/npy.h"
#include "example_cluster.h"
#include "mlp_lib.h"

namespace causeway {
namespace {

using examples::kMlpNumParams;
using hlo::Literal;

constexpr int64_t kPartitions = 4;

double MaxAbsDiff(const Literal& a, const Literal& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.shape().ElementCount(); ++i) {
    worst = std::max(worst, std::abs(a.GetAsDouble(i) - b.GetAsDouble(i)));
  }
  return worst;
}

absl::Status RunDemo(const std::string& dir, int64_t steps,
                     const examples::ExampleClusterFlags& flags) {
  CW_ASSIGN_OR_RETURN(examples::MlpData data, examples::LoadMlpData(dir));
  if (!data.jax_loss.has_value()) {
    return absl::NotFoundError("mlp_demo needs JAX's losses: " + dir +
                               "/loss.npy");
  }
  const Literal& jax_loss = *data.jax_loss;
  CW_ASSIGN_OR_RETURN(
      examples::ExampleCluster cluster,
      examples::ExampleCluster::Connect(
          flags, {.devices_per_host = kPartitions}));
  CW_ASSIGN_OR_RETURN(client::Session session,
                      cluster.client().OpenSession({.name = "mlp_demo"}));
  CW_ASSIGN_OR_RETURN(client::Slice slice, session.CreateSlice(kPartitions));
  CW_ASSIGN_OR_RETURN(client::Executable step_program,
                      session.Compile(data.program, slice));
  const std::vector<client::Sharding>& shardings =
      step_program.parameter_shardings();
  std::vector<client::Array> params;
  for (int i = 0; i < kMlpNumParams; ++i) {
    CW_ASSIGN_OR_RETURN(client::Array array,
                        session.FromHost(data.params[i], slice, shardings[i]));
    params.push_back(std::move(array));
  }
  steps = std::min<int64_t>(steps, data.num_batches());

  std::printf(
      "training the 4-partition data-parallel MLP on a %lld-device "
      "slice of %s for %lld steps\n",
      static_cast<long long>(kPartitions), cluster.description().c_str(),
      static_cast<long long>(steps));
  auto start = std::chrono::steady_clock::now();
  double loss = 0;
  for (int64_t step = 0; step < steps; ++step) {
    CW_ASSIGN_OR_RETURN(
        std::vector<client::Array> out,
        examples::LaunchMlpStep(session, step_program, params, data, step));
    params.assign(out.begin(), out.begin() + kMlpNumParams);
    if (step % 25 == 0 || step == steps - 1) {
      // Every device computed the loss: they must agree.
      CW_ASSIGN_OR_RETURN(std::vector<Literal> losses,
                          out[kMlpNumParams].ShardsToHost().Await());
      for (const Literal& other : losses) {
        if (!(other == losses[0])) {
          return absl::InternalError("partitions disagree on the loss");
        }
      }
      loss = losses[0].GetAsDouble(0);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      std::printf("step %4lld  loss %.6f  (jax %.6f)  %.1f steps/s\n",
                  static_cast<long long>(step), loss,
                  jax_loss.GetAsDouble(step), (step + 1) / seconds);
    }
  }
  double jax_final = jax_loss.GetAsDouble(steps - 1);
  std::printf("final loss: causeway %.6f  jax %.6f  (|diff| %.2e)\n", loss,
              jax_final, std::abs(loss - jax_final));
  if (steps == jax_loss.shape().dim(0)) {
    double worst = 0;
    for (int i = 0; i < kMlpNumParams; ++i) {
      CW_ASSIGN_OR_RETURN(
          Literal final_param,
          hlo::ReadNpy(dir + "/final_param" + std::to_string(i) + ".npy"));
      CW_ASSIGN_OR_RETURN(Literal trained, params[i].ToHost().Await());
      worst = std::max(worst, MaxAbsDiff(trained, final_param));
    }
    std::printf("final parameters: max |causeway - jax| = %.2e\n", worst);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace causeway

int main(int argc, char** argv) {
  using namespace causeway;
  std::string dir;
  int64_t steps = 1 << 30;
  examples::ExampleClusterFlags flags;
  bool bad = false;
  for (int i = 1; i < argc && !bad; ++i) {
    const std::string arg = argv[i];
    if (examples::TakeClusterFlag(argc, argv, i, flags)) continue;
    if (arg == "--steps" && i + 1 < argc) {
      char* end = nullptr;
      steps = std::strtoll(argv[++i], &end, 10);
      bad = *end != '\0' || steps < 1;
    } else if (dir.empty() && !arg.empty() && arg[0] != '-') {
      dir = arg;
    } else {
      bad = true;
    }
  }
  if (bad || dir.empty() || !flags.error.empty()) {
    if (!flags.error.empty()) std::fprintf(stderr, "%s\n", flags.error.c_str());
    std::fprintf(stderr, "usage: mlp_demo DIR [--steps N] %s\n",
                 examples::kClusterFlagsUsage);
    return 2;
  }
  absl::Status status = RunDemo(dir, steps, flags);
  if (!status.ok()) {
    std::fprintf(stderr, "mlp_demo: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
