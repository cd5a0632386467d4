// A program on simulated ("sim") devices: it runs no kernels, it takes a
// modelled time (docs/sim_devices.md). Everything around it is the real
// worker path: the device's queue and gang order, input waits, the object
// store's accounting of its outputs (real shapes, the device's memory
// budget), notices and trace events. Only the step where a cpu device calls
// the evaluator differs (worker/device.cc).
//
// A launch's modelled time is
//
//   fixed        SimModel::program_time, plus every `causeway_sim_us="N"`
//                frontend attribute of the entry computation's instructions
//   + compute    flops / SimModel::peak_flops (a dot 2·M·N·K, every other
//                instruction one flop per output element, over every
//                computation once: a loop body counts once)
//   + memory     (entry parameters + result bytes) / memory_bandwidth
//   + per collective: collective_latency + a ring's 2(n-1)/n · bytes /
//                interconnect_bandwidth, n the launch's devices
//
// Collectives complete when every participant has arrived: each collective
// instruction of the module (every computation, once each, in module order)
// is one real call on the launch's collectives with zero operands of its
// shapes, so a launch waits for its peers, and fails with them, exactly as
// a cpu launch does. The outputs are zeros of the program's result shape.
//
// Immutable after Create; Run is thread-safe (a worker's devices share one
// SimProgram, each running its own partition).
#ifndef CAUSEWAY_WORKER_SIM_PROGRAM_H_
#define CAUSEWAY_WORKER_SIM_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::worker {

// What a sim device models. The defaults are a TPU v4 chip's published
// figures (bf16 peak, HBM bandwidth) and a ring over its interconnect.
struct SimModel {
  absl::Duration program_time;  // Every program's fixed time (default 0).
  double peak_flops = 275e12;
  double memory_bandwidth = 1.2e12;        // Bytes per second.
  double interconnect_bandwidth = 1.0e11;  // Bytes per second per device.
  absl::Duration collective_latency = absl::Microseconds(10);
};

class SimProgram {
 public:
  // InvalidArgument for a `causeway_sim_us` attribute that is not a
  // non-negative integer, naming the instruction. `module` must outlive
  // the SimProgram.
  static absl::StatusOr<std::unique_ptr<SimProgram>> Create(
      const hlo::Module& module, const SimModel& model);

  // The modelled time of one launch (see the header comment).
  absl::Duration time() const { return time_; }

  // Runs one launch as partition `context.partition_id`: meets the peers
  // at every collective (through `context.collectives`), then holds the
  // caller until `start + time()`, or until the last collective completed
  // if that is later. `start` is when the launch could begin on its device
  // (the device was free and the launch ready), so that a device thread
  // woken late does not stretch the modelled time. Sets `*end` to the
  // modelled end (when the device is free again). Returns zeros of the
  // root's shape. Stops early with kCancelled once `context.cancelled` is
  // set.
  absl::StatusOr<hlo::Literal> Run(const exec::RunContext& context,
                                   absl::Time start, absl::Time* end) const;

 private:
  SimProgram(const hlo::Module& module, absl::Duration time,
             std::vector<const hlo::Instruction*> collectives);

  const hlo::Module& module_;
  const absl::Duration time_;
  const std::vector<const hlo::Instruction*> collectives_;
  const hlo::Literal zeros_;  // The result; copies share its storage.
};

}  // namespace causeway::worker

#endif  // CAUSEWAY_WORKER_SIM_PROGRAM_H_
