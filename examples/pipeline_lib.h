// Pipeline-parallel training of an MLP on Causeway (GPipe).
//
// The model has S stages (one dense layer each; tanh after all but the
// last, mean squared error after the last). Stage s runs on its own
// virtual slice of `devices_per_stage` devices, pinned to island s, and is
// data-parallel inside the slice: each micro-batch is split over the
// devices, each device accumulates the weight gradients of its own rows,
// and the update all-reduces them once per step (not once per
// micro-batch). A training step is ONE traced program graph: the forward
// pass of M micro-batches through all stages, the backward passes
// (micro-batches in the order the last stage finishes them) with gradients
// accumulated on each stage, then the SGD update. Activations and
// gradients cross islands between stages (the trace inserts the copies).
//
// The stage programs are built with the C++ HLO builder (ForwardProgram,
// BackwardProgram, LastStageProgram, UpdateProgram).
#ifndef CAUSEWAY_EXAMPLES_PIPELINE_LIB_H_
#define CAUSEWAY_EXAMPLES_PIPELINE_LIB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "causeway/client/client.h"
#include "causeway/hlo/literal.h"

namespace causeway::examples {

// Parameters: w[s] f32[din, dout], b[s] f32[dout].
struct MlpParameters {
  std::vector<hlo::Literal> w;
  std::vector<hlo::Literal> b;
  int64_t num_stages() const { return static_cast<int64_t>(w.size()); }
};

// What tools/gen_pipeline.py writes: the initial model, one batch per step,
// the learning rate, and JAX's one-device run (parameters after all steps
// and the loss of each step).
struct PipelineData {
  MlpParameters initial;
  std::vector<hlo::Literal> inputs;   // Per step: f32[B, sizes[0]].
  std::vector<hlo::Literal> targets;  // Per step: f32[B, sizes[S]].
  float learning_rate = 0.1f;
  MlpParameters reference_final;
  std::vector<float> reference_losses;
};
absl::StatusOr<PipelineData> LoadPipelineData(const std::string& dir);

// A random model and data of the given layer sizes, for benchmarks.
PipelineData RandomPipelineData(const std::vector<int64_t>& sizes,
                                int64_t batch, int64_t steps, uint64_t seed);

struct PipelineOptions {
  int64_t micro_batches = 4;      // M; must divide the batch.
  int64_t devices_per_stage = 2;  // Must divide the micro-batch size.
  float learning_rate = 0.1f;
  bool pin_islands = true;  // Stage s on island s.
  std::string session_name = "pipeline";
};

// The HLO text of the stage programs, for micro-batches of `rows` rows per
// device, on `devices` devices:
//   forward(w, b, x) = tanh(x @ w + b)
//   backward(w, b, x, gy, acc_w, acc_b) =
//       (gx, acc_w + x^T gz, acc_b + sum gz)
//       where gz = gy * (1 - tanh(x @ w + b)^2), gx = gz @ w^T, and acc_w,
//       acc_b are this device's own accumulators (the arrays are
//       f32[devices * din, dout] and f32[devices * dout], split over the
//       devices)
//   last(w, b, x, t, acc_w, acc_b, acc_loss): the same for the linear
//       output layer and loss = scale * sum((x @ w + b - t)^2)
//       (all-reduced), returning (gx, acc_w', acc_b', acc_loss + loss)
//   update(w, b, acc_w, acc_b) =
//       (w - lr * all_reduce(acc_w), b - lr * all_reduce(acc_b))
absl::StatusOr<std::string> ForwardProgram(int64_t din, int64_t dout,
                                           int64_t rows, int64_t devices);
absl::StatusOr<std::string> BackwardProgram(int64_t din, int64_t dout,
                                            int64_t rows, int64_t devices);
absl::StatusOr<std::string> LastStageProgram(int64_t din, int64_t dout,
                                             int64_t rows, int64_t devices,
                                             float scale);
absl::StatusOr<std::string> UpdateProgram(int64_t din, int64_t dout,
                                          int64_t devices, float lr);

class PipelineTrainer {
 public:
  // Opens a session on `client`, asks for one slice per stage, compiles
  // the stage programs and uploads `initial`. `batch` rows per step.
  static absl::StatusOr<std::unique_ptr<PipelineTrainer>> Create(
      client::Client& client, const MlpParameters& initial, int64_t batch,
      PipelineOptions options);

  // Submits one training step as one program graph and returns its loss
  // (a scalar array; not waited on). `inputs` f32[B, din0], `targets`
  // f32[B, dout_last].
  absl::StatusOr<client::Array> Step(const hlo::Literal& inputs,
                                     const hlo::Literal& targets);

  // The current parameters, fetched from the devices.
  absl::StatusOr<MlpParameters> Parameters();
  // Waits until every stage's parameters are updated by the steps
  // submitted so far (the end of the last step on every stage).
  absl::Status WaitForParameters();

  // Runs `steps` steps of each listed stage's share of training (forward
  // and backward of every micro-batch on its slice, inputs already there,
  // then the update), submitted back to back like the pipeline's steps,
  // with no data flowing between the stages, and waits for the last: the
  // baselines of the pipeline benchmark. One stage alone gives its step
  // time; all stages at once show what running the stages side by side
  // costs on this hardware, before any pipeline dependency. The trainer's
  // parameters are left as they were.
  absl::Status RunStagesAlone(absl::Span<const int64_t> stages, int64_t steps);

  client::Session& session() { return session_; }
  int64_t num_stages() const { return static_cast<int64_t>(stages_.size()); }
  int64_t micro_batches() const { return options_.micro_batches; }

 private:
  struct Stage {
    client::Slice slice;
    client::Executable forward;  // Or `last` for the last stage.
    client::Executable backward;
    client::Executable update;
    client::Array w, b;
    client::Array zero_w, zero_b;
    int64_t din = 0, dout = 0;
  };
  PipelineTrainer(client::Session session, PipelineOptions options,
                  int64_t batch)
      : session_(std::move(session)), options_(options), batch_(batch) {}

  client::Session session_;
  const PipelineOptions options_;
  const int64_t batch_;
  std::vector<Stage> stages_;
  client::Array zero_loss_;
};

struct PipelineRunResult {
  std::vector<float> losses;  // Per step.
  MlpParameters final_parameters;
  double seconds = 0;
};

// Trains `steps` steps (all of `data`'s steps when 0) and returns the
// losses and final parameters. `progress`, if given, is called after each
// step with (step, loss, steps per second so far).
absl::StatusOr<PipelineRunResult> TrainPipeline(
    client::Client& client, const PipelineData& data, PipelineOptions options,
    int64_t steps = 0,
    std::function<void(int64_t, float, double)> progress = nullptr);

// The largest absolute difference between two models' parameters.
absl::StatusOr<double> MaxParameterDifference(const MlpParameters& a,
                                              const MlpParameters& b);

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_PIPELINE_LIB_H_
