// Elastic data-parallel training: the JAX-compiled MLP train step
// (mlp_lib.h) on a slice of a cluster, surviving the loss of the hosts
// under it. Every `snapshot_every` steps the parameters are copied to the
// host (SGD keeps no other optimizer state: parameters and the step number
// are the whole training state). When a step fails with DATA_LOSS (a host
// of the slice died), the run waits until the head has remapped the slice
// onto healthy devices, compiles the program for it again, uploads the last
// snapshot and redoes the steps since. Batch s is batch s mod the data's
// batches, so a run is a pure function of its data and step count: an
// interrupted run ends with the bit-identical loss of an uninterrupted one.
//
// Output, one line each (ElasticOptions::print):
//   training the data-parallel MLP for 20 steps on slice 1: devices 0..3 on host 0 (generation 1), a snapshot every 5 steps
//   step 0 loss 2.30258512
//   snapshot before step 5
//   step 7 failed (DATA_LOSS: ...); waiting for the slice to be remapped
//   recovery 1: step 7 failed; slice remapped to devices 4..7 on host 1 (generation 2), program reloaded, snapshot before step 5 restored; 0.084 s from the error to the next good step (remap 0.001 s, reload 0.002 s, restore 0.001 s, steps 0.080 s); error at unix 1764600000.123456, next good step at unix 1764600000.207456
//   step 5 loss 2.1 (redone)
//   final loss 1.98765433
#ifndef CAUSEWAY_EXAMPLES_ELASTIC_LIB_H_
#define CAUSEWAY_EXAMPLES_ELASTIC_LIB_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/client/client.h"
#include "causeway/transport/session_channel.h"
#include "mlp_lib.h"

namespace causeway::examples {

struct ElasticOptions {
  int64_t steps = 20;
  int64_t devices = 4;  // Must be the program's partition count.
  int64_t snapshot_every = 5;
  // Failures past this many fail the run with the last error.
  int64_t max_recoveries = 8;
  // How long a remap may take, and any one wait for a step's loss or a
  // snapshot, before the run fails with DeadlineExceeded.
  absl::Duration remap_timeout = absl::Seconds(60);
  absl::Duration step_timeout = absl::Seconds(60);
  // Called on the training thread the first time step `step` is launched
  // (not when it is redone), after its Execute and before its loss is
  // read, with the slice's mapping it was launched on. An error stops the
  // run. The example binary stops a host here (--kill-at-step) or pauses
  // for a test to kill a worker (--pause-at-step).
  std::function<absl::Status(int64_t step,
                             const transport::SliceInfo& mapping)>
      after_launch;
  // Receives each line of output (no newline); null: stdout, flushed.
  std::function<void(const std::string& line)> print;
};

struct Recovery {
  int64_t failed_step = 0;
  int64_t restored_step = 0;  // The snapshot's: training redid from here.
  absl::Status error;         // What the failed step's loss said.
  uint64_t generation = 0;    // The slice's mapping it went on with.
  absl::Time error_at;        // When the client saw the error.
  absl::Time good_at;         // When the next step completed after it.
  absl::Duration remap;       // Waiting for the head's new mapping.
  absl::Duration reload;      // Compile on the new mapping.
  absl::Duration restore;     // The snapshot's upload issued.
};

struct ElasticResult {
  std::vector<float> losses;  // Per step, as finally computed.
  float final_loss = 0;
  std::vector<Recovery> recoveries;
};

// Trains `options.steps` steps of `data` in a new session of `client`.
absl::StatusOr<ElasticResult> RunElasticTraining(client::Client& client,
                                                 const MlpData& data,
                                                 const ElasticOptions& options);

// "final loss 1.98765433": the loss with as many digits as tell every f32
// apart, so that equal lines mean bit-identical losses.
std::string FinalLossLine(float loss);

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_ELASTIC_LIB_H_
