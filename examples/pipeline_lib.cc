#include "pipeline_lib.h"

#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/status.h"
#include "causeway/hlo/builder.h"
#include "causeway/hlo/npy.h"
#include "causeway/hlo/printer.h"

namespace causeway::examples {
namespace {

using client::Array;
using client::Executable;
using client::ProgramTrace;
using client::Sharding;
using hlo::ComputationBuilder;
using hlo::DotDimensionNumbers;
using hlo::Literal;
using hlo::ModuleBuilder;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::XlaOp;

constexpr PrimitiveType kF32 = PrimitiveType::kF32;

hlo::Sharding Replicated() { return Sharding::Replicated().hlo(); }

// Rows split over the devices (replicated when there is one device).
hlo::Sharding Rows(int64_t devices) {
  if (devices == 1) return Replicated();
  return Sharding::TiledByDims({devices, 1})->hlo();
}

// A vector split over the devices (replicated when there is one device).
hlo::Sharding Split(int64_t devices) {
  if (devices == 1) return Replicated();
  return Sharding::TiledByDims({devices})->hlo();
}

hlo::Sharding TupleOf(std::vector<hlo::Sharding> elements) {
  hlo::Sharding sharding;
  sharding.kind = hlo::Sharding::Kind::kTuple;
  sharding.tuple_elements = std::move(elements);
  return sharding;
}

DotDimensionNumbers Contract(int64_t lhs, int64_t rhs) {
  DotDimensionNumbers dims;
  dims.lhs_contracting_dims = {lhs};
  dims.rhs_contracting_dims = {rhs};
  return dims;
}

// A module under construction: its scalar add (for reductions and
// all-reduces) and its entry.
struct Program {
  explicit Program(const std::string& name, int64_t devices)
      : module(name), devices(devices) {
    module.set_num_partitions(devices);
    add = module.NewComputation("add");
    add.Add(add.Parameter(Shape::Scalar(kF32)),
            add.Parameter(Shape::Scalar(kF32)));
    main = module.NewEntry("main");
  }

  XlaOp Scalar(float value) { return main.ConstantScalar(kF32, value); }
  XlaOp Fill(float value, std::vector<int64_t> dims) {
    return main.Broadcast(Scalar(value), std::move(dims), {});
  }
  // The sum over the devices of the slice (a no-op on one device).
  XlaOp SumOverDevices(XlaOp x) {
    if (devices == 1) return x;
    std::vector<int64_t> group;
    for (int64_t d = 0; d < devices; ++d) group.push_back(d);
    return main.AllReduce(
        x, add, hlo::CollectiveOptions::Spmd({group}, next_channel++));
  }
  // x @ w + b for x [rows, din], w [din, dout], b [dout].
  XlaOp Dense(XlaOp x, XlaOp w, XlaOp b, int64_t rows, int64_t dout) {
    return main.Add(main.Dot(x, w, Contract(1, 0)),
                    main.Broadcast(b, {rows, dout}, {1}));
  }
  // The input gradient of a dense layer, and its weight and bias gradients
  // from this device's rows added to this device's accumulators (summed
  // over the devices once per step, by the update).
  std::vector<XlaOp> DenseBackward(XlaOp x, XlaOp w, XlaOp gz, XlaOp acc_w,
                                   XlaOp acc_b) {
    XlaOp gw = main.Dot(x, gz, Contract(0, 0));
    XlaOp gb = main.Reduce(gz, Scalar(0), add, {0});
    XlaOp gx = main.Dot(gz, w, Contract(1, 1));
    return {gx, main.Add(acc_w, gw), main.Add(acc_b, gb)};
  }

  absl::StatusOr<std::string> Finish(XlaOp root,
                                     std::vector<hlo::Sharding> parameters,
                                     hlo::Sharding result) && {
    main.SetRoot(root);
    CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> built,
                        std::move(module).Build());
    hlo::Computation* entry = built->mutable_entry();
    for (size_t i = 0; i < parameters.size(); ++i) {
      entry->parameters()[i]->sharding = parameters[i];
    }
    entry->mutable_root()->sharding = std::move(result);
    return hlo::PrintModule(*built);
  }

  ModuleBuilder module;
  const int64_t devices;
  ComputationBuilder add;
  ComputationBuilder main;
  int64_t next_channel = 1;
};

// Rows [start, start + count) of a 2-D f32 literal.
Literal Rows(const Literal& matrix, int64_t start, int64_t count) {
  const int64_t cols = matrix.shape().dim(1);
  Literal out = Literal::Uninitialized(Shape(kF32, {count, cols}));
  std::memcpy(out.mutable_data<float>().data(),
              matrix.data<float>().data() + start * cols,
              static_cast<size_t>(count * cols) * sizeof(float));
  return out;
}

absl::StatusOr<Literal> Read(const std::string& dir, const std::string& name) {
  return hlo::ReadNpy(absl::StrCat(dir, "/", name));
}

}  // namespace

absl::StatusOr<std::string> ForwardProgram(int64_t din, int64_t dout,
                                           int64_t rows, int64_t devices) {
  Program p(absl::StrCat("forward_", din, "x", dout), devices);
  XlaOp w = p.main.Parameter(Shape(kF32, {din, dout}), "w");
  XlaOp b = p.main.Parameter(Shape(kF32, {dout}), "b");
  XlaOp x = p.main.Parameter(Shape(kF32, {rows, din}), "x");
  XlaOp y = p.main.Tanh(p.Dense(x, w, b, rows, dout));
  return std::move(p).Finish(y, {Replicated(), Replicated(), Rows(devices)},
                             Rows(devices));
}

absl::StatusOr<std::string> BackwardProgram(int64_t din, int64_t dout,
                                            int64_t rows, int64_t devices) {
  Program p(absl::StrCat("backward_", din, "x", dout), devices);
  XlaOp w = p.main.Parameter(Shape(kF32, {din, dout}), "w");
  XlaOp b = p.main.Parameter(Shape(kF32, {dout}), "b");
  XlaOp x = p.main.Parameter(Shape(kF32, {rows, din}), "x");
  XlaOp gy = p.main.Parameter(Shape(kF32, {rows, dout}), "gy");
  XlaOp acc_w = p.main.Parameter(Shape(kF32, {din, dout}), "acc_w");
  XlaOp acc_b = p.main.Parameter(Shape(kF32, {dout}), "acc_b");
  // Recomputes the activation rather than keeping it (rematerialization).
  XlaOp y = p.main.Tanh(p.Dense(x, w, b, rows, dout));
  XlaOp gz =
      p.main.Mul(gy, p.main.Sub(p.Fill(1, {rows, dout}), p.main.Mul(y, y)));
  std::vector<XlaOp> out = p.DenseBackward(x, w, gz, acc_w, acc_b);
  return std::move(p).Finish(
      p.main.Tuple(out),
      {Replicated(), Replicated(), Rows(devices), Rows(devices), Rows(devices),
       Split(devices)},
      TupleOf({Rows(devices), Rows(devices), Split(devices)}));
}

absl::StatusOr<std::string> LastStageProgram(int64_t din, int64_t dout,
                                             int64_t rows, int64_t devices,
                                             float scale) {
  Program p(absl::StrCat("last_", din, "x", dout), devices);
  XlaOp w = p.main.Parameter(Shape(kF32, {din, dout}), "w");
  XlaOp b = p.main.Parameter(Shape(kF32, {dout}), "b");
  XlaOp x = p.main.Parameter(Shape(kF32, {rows, din}), "x");
  XlaOp t = p.main.Parameter(Shape(kF32, {rows, dout}), "t");
  XlaOp acc_w = p.main.Parameter(Shape(kF32, {din, dout}), "acc_w");
  XlaOp acc_b = p.main.Parameter(Shape(kF32, {dout}), "acc_b");
  XlaOp acc_loss = p.main.Parameter(Shape::Scalar(kF32), "acc_loss");
  XlaOp diff = p.main.Sub(p.Dense(x, w, b, rows, dout), t);
  XlaOp loss = p.SumOverDevices(p.main.Mul(
      p.main.Reduce(p.main.Mul(diff, diff), p.Scalar(0), p.add, {0, 1}),
      p.Scalar(scale)));
  XlaOp gout = p.main.Mul(diff, p.Fill(2 * scale, {rows, dout}));
  std::vector<XlaOp> out = p.DenseBackward(x, w, gout, acc_w, acc_b);
  out.push_back(p.main.Add(acc_loss, loss));
  return std::move(p).Finish(
      p.main.Tuple(out),
      {Replicated(), Replicated(), Rows(devices), Rows(devices), Rows(devices),
       Split(devices), Replicated()},
      TupleOf({Rows(devices), Rows(devices), Split(devices), Replicated()}));
}

absl::StatusOr<std::string> UpdateProgram(int64_t din, int64_t dout,
                                          int64_t devices, float lr) {
  Program p(absl::StrCat("update_", din, "x", dout), devices);
  XlaOp w = p.main.Parameter(Shape(kF32, {din, dout}), "w");
  XlaOp b = p.main.Parameter(Shape(kF32, {dout}), "b");
  XlaOp acc_w = p.main.Parameter(Shape(kF32, {din, dout}), "acc_w");
  XlaOp acc_b = p.main.Parameter(Shape(kF32, {dout}), "acc_b");
  XlaOp gw = p.SumOverDevices(acc_w);
  XlaOp gb = p.SumOverDevices(acc_b);
  XlaOp new_w = p.main.Sub(w, p.main.Mul(gw, p.Fill(lr, {din, dout})));
  XlaOp new_b = p.main.Sub(b, p.main.Mul(gb, p.Fill(lr, {dout})));
  return std::move(p).Finish(
      p.main.Tuple({new_w, new_b}),
      {Replicated(), Replicated(), Rows(devices), Split(devices)},
      TupleOf({Replicated(), Replicated()}));
}

absl::StatusOr<PipelineData> LoadPipelineData(const std::string& dir) {
  PipelineData data;
  for (int s = 0;; ++s) {
    absl::StatusOr<Literal> w = Read(dir, absl::StrCat("init_w", s, ".npy"));
    if (!w.ok()) {
      if (s == 0) return w.status();
      break;
    }
    CW_ASSIGN_OR_RETURN(Literal b,
                        Read(dir, absl::StrCat("init_b", s, ".npy")));
    CW_ASSIGN_OR_RETURN(Literal fw,
                        Read(dir, absl::StrCat("final_w", s, ".npy")));
    CW_ASSIGN_OR_RETURN(Literal fb,
                        Read(dir, absl::StrCat("final_b", s, ".npy")));
    data.initial.w.push_back(*std::move(w));
    data.initial.b.push_back(std::move(b));
    data.reference_final.w.push_back(std::move(fw));
    data.reference_final.b.push_back(std::move(fb));
  }
  CW_ASSIGN_OR_RETURN(Literal inputs, Read(dir, "inputs.npy"));
  CW_ASSIGN_OR_RETURN(Literal targets, Read(dir, "targets.npy"));
  CW_ASSIGN_OR_RETURN(Literal lr, Read(dir, "lr.npy"));
  CW_ASSIGN_OR_RETURN(Literal losses, Read(dir, "losses.npy"));
  if (inputs.shape().rank() != 3 || targets.shape().rank() != 3 ||
      inputs.shape().dim(0) != targets.shape().dim(0) ||
      inputs.shape().dim(1) != targets.shape().dim(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": inputs.npy and targets.npy must be [steps, batch, features] "
        "with the same steps and batch, got ",
        inputs.shape().ToString(false), " and ",
        targets.shape().ToString(false)));
  }
  const int64_t steps = inputs.shape().dim(0);
  const int64_t batch = inputs.shape().dim(1);
  for (int64_t i = 0; i < steps; ++i) {
    Literal in2d =
        inputs.WithShape(Shape(kF32, {steps * batch, inputs.shape().dim(2)}));
    Literal t2d =
        targets.WithShape(Shape(kF32, {steps * batch, targets.shape().dim(2)}));
    data.inputs.push_back(Rows(in2d, i * batch, batch));
    data.targets.push_back(Rows(t2d, i * batch, batch));
  }
  data.learning_rate = lr.data<float>()[0];
  for (float loss : losses.data<float>()) data.reference_losses.push_back(loss);
  return data;
}

PipelineData RandomPipelineData(const std::vector<int64_t>& sizes,
                                int64_t batch, int64_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  auto random = [&](std::vector<int64_t> dims, float scale) {
    Literal literal(Shape(kF32, std::move(dims)));
    for (float& v : literal.mutable_data<float>()) v = scale * normal(rng);
    return literal;
  };
  PipelineData data;
  for (size_t s = 0; s + 1 < sizes.size(); ++s) {
    data.initial.w.push_back(
        random({sizes[s], sizes[s + 1]}, 1.0f / std::sqrt(float(sizes[s]))));
    data.initial.b.push_back(random({sizes[s + 1]}, 0.1f));
  }
  for (int64_t i = 0; i < steps; ++i) {
    data.inputs.push_back(random({batch, sizes.front()}, 1));
    data.targets.push_back(random({batch, sizes.back()}, 1));
  }
  return data;
}

absl::StatusOr<std::unique_ptr<PipelineTrainer>> PipelineTrainer::Create(
    client::Client& client, const MlpParameters& initial, int64_t batch,
    PipelineOptions options) {
  const int64_t num_stages = initial.num_stages();
  const int64_t m = options.micro_batches;
  const int64_t devices = options.devices_per_stage;
  if (num_stages < 2) {
    return absl::InvalidArgumentError("a pipeline needs at least 2 stages");
  }
  if (m < 1 || batch % m != 0 || (batch / m) % devices != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch of ", batch, " rows must split into ", m,
        " micro-batches whose rows split over ", devices, " devices"));
  }
  const int64_t rows = batch / m / devices;
  CW_ASSIGN_OR_RETURN(client::Session session,
                      client.OpenSession({.name = options.session_name}));
  std::unique_ptr<PipelineTrainer> trainer(
      new PipelineTrainer(std::move(session), options, batch));
  client::Session& s = trainer->session_;
  const int64_t dout_last = initial.w.back().shape().dim(1);
  const float scale = 1.0f / static_cast<float>(batch * dout_last);
  const Sharding replicated = Sharding::Replicated();
  for (int64_t i = 0; i < num_stages; ++i) {
    Stage stage;
    stage.din = initial.w[i].shape().dim(0);
    stage.dout = initial.w[i].shape().dim(1);
    client::SliceOptions slice;
    slice.num_devices = devices;
    if (options.pin_islands) slice.island = IslandId(i);
    CW_ASSIGN_OR_RETURN(stage.slice, s.CreateSlice(std::move(slice)));
    const bool last = i == num_stages - 1;
    std::string forward_text, backward_text;
    if (last) {
      CW_ASSIGN_OR_RETURN(forward_text, LastStageProgram(stage.din, stage.dout,
                                                         rows, devices, scale));
    } else {
      CW_ASSIGN_OR_RETURN(forward_text,
                          ForwardProgram(stage.din, stage.dout, rows, devices));
      CW_ASSIGN_OR_RETURN(
          backward_text, BackwardProgram(stage.din, stage.dout, rows, devices));
      CW_ASSIGN_OR_RETURN(stage.backward,
                          s.Compile(backward_text, stage.slice));
    }
    CW_ASSIGN_OR_RETURN(stage.forward, s.Compile(forward_text, stage.slice));
    CW_ASSIGN_OR_RETURN(
        std::string update_text,
        UpdateProgram(stage.din, stage.dout, devices, options.learning_rate));
    CW_ASSIGN_OR_RETURN(stage.update, s.Compile(update_text, stage.slice));
    CW_ASSIGN_OR_RETURN(stage.w,
                        s.FromHost(initial.w[i], stage.slice, replicated));
    CW_ASSIGN_OR_RETURN(stage.b,
                        s.FromHost(initial.b[i], stage.slice, replicated));
    // Accumulators: one [din, dout] and one [dout] per device, stacked.
    CW_ASSIGN_OR_RETURN(
        stage.zero_w,
        s.FromHost(Literal(Shape(kF32, {devices * stage.din, stage.dout})),
                   stage.slice, *Sharding::FromHlo(Rows(devices))));
    CW_ASSIGN_OR_RETURN(
        stage.zero_b,
        s.FromHost(Literal(Shape(kF32, {devices * stage.dout})), stage.slice,
                   *Sharding::FromHlo(Split(devices))));
    if (last) {
      CW_ASSIGN_OR_RETURN(
          trainer->zero_loss_,
          s.FromHost(Literal(Shape::Scalar(kF32)), stage.slice, replicated));
    }
    trainer->stages_.push_back(std::move(stage));
  }
  return trainer;
}

absl::StatusOr<Array> PipelineTrainer::Step(const Literal& inputs,
                                            const Literal& targets) {
  const int64_t num_stages = this->num_stages();
  const int64_t m = options_.micro_batches;
  const int64_t mb = batch_ / m;
  if (inputs.shape().rank() != 2 || inputs.shape().dim(0) != batch_ ||
      targets.shape().rank() != 2 || targets.shape().dim(0) != batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step takes inputs and targets of ", batch_,
                     " rows, got ", inputs.shape().ToString(false), " and ",
                     targets.shape().ToString(false)));
  }
  Stage& first = stages_.front();
  Stage& last = stages_.back();
  const Sharding rows(*Sharding::FromHlo(Rows(options_.devices_per_stage)));
  // acts[s][k]: the input of stage s for micro-batch k.
  std::vector<std::vector<Array>> acts(num_stages, std::vector<Array>(m));
  std::vector<Array> micro_targets(m);
  for (int64_t k = 0; k < m; ++k) {
    CW_ASSIGN_OR_RETURN(acts[0][k], session_.FromHost(Rows(inputs, k * mb, mb),
                                                      first.slice, rows));
    CW_ASSIGN_OR_RETURN(
        micro_targets[k],
        session_.FromHost(Rows(targets, k * mb, mb), last.slice, rows));
  }

  ProgramTrace trace(session_);
  // Forward: every micro-batch through every stage but the last.
  for (int64_t k = 0; k < m; ++k) {
    for (int64_t s = 0; s + 1 < num_stages; ++s) {
      Stage& stage = stages_[s];
      CW_ASSIGN_OR_RETURN(
          std::vector<Array> out,
          trace.Execute(stage.forward, {stage.w, stage.b, acts[s][k]}));
      acts[s + 1][k] = out[0];  // Crosses to the next stage's island.
    }
  }
  // The last stage: loss and backward, micro-batch by micro-batch.
  // grads[s][k]: the gradient of stage s's output for micro-batch k.
  std::vector<std::vector<Array>> grads(num_stages, std::vector<Array>(m));
  std::vector<Array> acc_w(num_stages), acc_b(num_stages);
  for (int64_t s = 0; s < num_stages; ++s) {
    acc_w[s] = stages_[s].zero_w;
    acc_b[s] = stages_[s].zero_b;
  }
  Array loss = zero_loss_;
  for (int64_t k = 0; k < m; ++k) {
    CW_ASSIGN_OR_RETURN(
        std::vector<Array> out,
        trace.Execute(last.forward, {last.w, last.b, acts[num_stages - 1][k],
                                     micro_targets[k], acc_w[num_stages - 1],
                                     acc_b[num_stages - 1], loss}));
    grads[num_stages - 2][k] = out[0];
    acc_w[num_stages - 1] = out[1];
    acc_b[num_stages - 1] = out[2];
    loss = out[3];
  }
  // Backward through the other stages, micro-batches in the order the last
  // stage finishes them: stage s can start micro-batch 0's backward while
  // the stages after it still work on the later ones. (Reverse order would
  // hold every stage back until the last stage had finished all of them.)
  for (int64_t k = 0; k < m; ++k) {
    for (int64_t s = num_stages - 2; s >= 0; --s) {
      Stage& stage = stages_[s];
      CW_ASSIGN_OR_RETURN(
          std::vector<Array> out,
          trace.Execute(stage.backward, {stage.w, stage.b, acts[s][k],
                                         grads[s][k], acc_w[s], acc_b[s]}));
      if (s > 0) grads[s - 1][k] = out[0];
      acc_w[s] = out[1];
      acc_b[s] = out[2];
    }
  }
  // The update, stage by stage.
  for (int64_t s = 0; s < num_stages; ++s) {
    Stage& stage = stages_[s];
    CW_ASSIGN_OR_RETURN(
        std::vector<Array> out,
        trace.Execute(stage.update, {stage.w, stage.b, acc_w[s], acc_b[s]}));
    stage.w = out[0];
    stage.b = out[1];
  }
  CW_RETURN_IF_ERROR(trace.Submit());
  return loss;
}

absl::StatusOr<MlpParameters> PipelineTrainer::Parameters() {
  MlpParameters params;
  for (Stage& stage : stages_) {
    CW_ASSIGN_OR_RETURN(Literal w, stage.w.ToHost().Await());
    CW_ASSIGN_OR_RETURN(Literal b, stage.b.ToHost().Await());
    params.w.push_back(std::move(w));
    params.b.push_back(std::move(b));
  }
  return params;
}

absl::Status PipelineTrainer::WaitForParameters() {
  for (Stage& stage : stages_) {
    CW_RETURN_IF_ERROR(stage.w.Ready().Await());
    CW_RETURN_IF_ERROR(stage.b.Ready().Await());
  }
  return absl::OkStatus();
}

absl::Status PipelineTrainer::RunStagesAlone(
    absl::Span<const int64_t> stage_indices, int64_t steps) {
  const int64_t mb = batch_ / options_.micro_batches;
  const Sharding rows(*Sharding::FromHlo(Rows(options_.devices_per_stage)));
  // Per listed stage: its inputs (on its slice) and its parameters, which
  // these steps update among themselves (the trainer's stay as they are).
  struct Alone {
    Stage* stage;
    bool last;
    Array x, gy, w, b;
  };
  std::vector<Alone> alone;
  for (int64_t stage_index : stage_indices) {
    if (stage_index < 0 || stage_index >= num_stages()) {
      return absl::InvalidArgumentError(absl::StrCat("no stage ", stage_index));
    }
    Stage& stage = stages_[stage_index];
    CW_ASSIGN_OR_RETURN(Array x,
                        session_.FromHost(Literal(Shape(kF32, {mb, stage.din})),
                                          stage.slice, rows));
    CW_ASSIGN_OR_RETURN(
        Array gy, session_.FromHost(Literal(Shape(kF32, {mb, stage.dout})),
                                    stage.slice, rows));
    alone.push_back(
        {&stage, stage_index == num_stages() - 1, x, gy, stage.w, stage.b});
  }
  for (int64_t step = 0; step < steps; ++step) {
    ProgramTrace trace(session_);
    // Activations are held to the end of the step, as the pipeline holds
    // them until their backward pass.
    std::vector<Array> activations;
    for (Alone& a : alone) {
      const Stage& stage = *a.stage;
      Array acc_w = stage.zero_w, acc_b = stage.zero_b, loss = zero_loss_;
      for (int64_t k = 0; k < options_.micro_batches; ++k) {
        if (a.last) {
          CW_ASSIGN_OR_RETURN(
              std::vector<Array> out,
              trace.Execute(stage.forward,
                            {a.w, a.b, a.x, a.gy, acc_w, acc_b, loss}));
          acc_w = out[1];
          acc_b = out[2];
          loss = out[3];
        } else {
          CW_ASSIGN_OR_RETURN(std::vector<Array> y,
                              trace.Execute(stage.forward, {a.w, a.b, a.x}));
          activations.push_back(y[0]);
        }
      }
      if (!a.last) {
        for (int64_t k = 0; k < options_.micro_batches; ++k) {
          CW_ASSIGN_OR_RETURN(
              std::vector<Array> out,
              trace.Execute(stage.backward,
                            {a.w, a.b, a.x, a.gy, acc_w, acc_b}));
          acc_w = out[1];
          acc_b = out[2];
        }
      }
      CW_ASSIGN_OR_RETURN(
          std::vector<Array> out,
          trace.Execute(stage.update, {a.w, a.b, acc_w, acc_b}));
      a.w = out[0];
      a.b = out[1];
    }
    CW_RETURN_IF_ERROR(trace.Submit());
  }
  for (Alone& a : alone) {
    CW_RETURN_IF_ERROR(a.w.Ready().Await());
    CW_RETURN_IF_ERROR(a.b.Ready().Await());
  }
  return absl::OkStatus();
}

absl::StatusOr<PipelineRunResult> TrainPipeline(
    client::Client& client, const PipelineData& data, PipelineOptions options,
    int64_t steps, std::function<void(int64_t, float, double)> progress) {
  if (data.inputs.empty()) {
    return absl::InvalidArgumentError("no training data");
  }
  if (steps <= 0 || steps > static_cast<int64_t>(data.inputs.size())) {
    steps = static_cast<int64_t>(data.inputs.size());
  }
  const int64_t batch = data.inputs[0].shape().dim(0);
  CW_ASSIGN_OR_RETURN(
      std::unique_ptr<PipelineTrainer> trainer,
      PipelineTrainer::Create(client, data.initial, batch, options));
  PipelineRunResult result;
  const absl::Time start = absl::Now();
  // One step stays in flight while the previous one's loss is read.
  std::optional<Array> pending;
  auto finish = [&](int64_t step, const Array& loss) -> absl::Status {
    CW_ASSIGN_OR_RETURN(Literal value, loss.ToHost().Await());
    result.losses.push_back(value.data<float>()[0]);
    if (progress) {
      double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      progress(step, result.losses.back(), (step + 1) / seconds);
    }
    return absl::OkStatus();
  };
  for (int64_t i = 0; i < steps; ++i) {
    CW_ASSIGN_OR_RETURN(Array loss,
                        trainer->Step(data.inputs[i], data.targets[i]));
    if (pending.has_value()) CW_RETURN_IF_ERROR(finish(i - 1, *pending));
    pending = loss;
  }
  CW_RETURN_IF_ERROR(finish(steps - 1, *pending));
  CW_ASSIGN_OR_RETURN(result.final_parameters, trainer->Parameters());
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::StatusOr<double> MaxParameterDifference(const MlpParameters& a,
                                              const MlpParameters& b) {
  if (a.num_stages() != b.num_stages()) {
    return absl::InvalidArgumentError("the models have different depths");
  }
  double worst = 0;
  auto compare = [&](const Literal& x, const Literal& y) -> absl::Status {
    if (!x.shape().Compatible(y.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes differ: ", x.shape().ToString(false), " vs ",
                       y.shape().ToString(false)));
    }
    for (int64_t i = 0; i < x.shape().ElementCount(); ++i) {
      worst = std::max(worst, std::abs(x.GetAsDouble(i) - y.GetAsDouble(i)));
    }
    return absl::OkStatus();
  };
  for (int64_t s = 0; s < a.num_stages(); ++s) {
    CW_RETURN_IF_ERROR(compare(a.w[s], b.w[s]));
    CW_RETURN_IF_ERROR(compare(a.b[s], b.b[s]));
  }
  return worst;
}

}  // namespace causeway::examples
