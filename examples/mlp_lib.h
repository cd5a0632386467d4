// The JAX-compiled data-parallel MLP that mlp_demo and elastic_training
// train: its program and data as tools/mlp_demo_reference.py writes them,
// and one train step on a slice through the client API.
//
// A data directory holds
//   program.hlo        the 4-partition train step: parameters w1,b1,w2,b2,
//                      w3,b3 (replicated), x, y (batch split over the
//                      partitions); outputs the new w1..b3 and the loss;
//   param<i>.npy       the initial parameters, i = 0..5;
//   x.npy, y.npy       the batches: x f32[batches, 64, 64], y s32[batches, 64];
//   loss.npy           JAX's loss at each step (optional);
//   final_param<i>.npy JAX's parameters after the last batch (optional).
// examples/data/mlp holds 8 batches (small enough for the tests); `make
// demo` writes 300 into build/demo/mlp.
#ifndef CAUSEWAY_EXAMPLES_MLP_LIB_H_
#define CAUSEWAY_EXAMPLES_MLP_LIB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/client/session.h"
#include "causeway/hlo/literal.h"

namespace causeway::examples {

inline constexpr int kMlpNumParams = 6;

struct MlpData {
  std::string program;               // program.hlo
  std::vector<hlo::Literal> params;  // The initial parameters (global).
  hlo::Literal x;                    // [batches, batch, features]
  hlo::Literal y;                    // [batches, batch]
  std::optional<hlo::Literal> jax_loss;  // f32[batches], if loss.npy exists.

  int64_t num_batches() const { return x.shape().dim(0); }
};

// Reads `dir`; NotFound naming the file that is missing, InvalidArgument
// when x and y do not hold the same number of batches.
absl::StatusOr<MlpData> LoadMlpData(const std::string& dir);

// Element `index` of `batches`' leading axis: x[index] for x of shape
// [batches, ...].
hlo::Literal Batch(const hlo::Literal& batches, int64_t index);

// One train step: uploads batch `batch` of `data` onto the program's slice
// (split by its input shardings) and runs `program` on `params` (the
// kMlpNumParams parameter arrays) and that batch. Returns the new
// parameters followed by the loss (replicated f32[]), at once; errors of
// the run surface in those arrays.
absl::StatusOr<std::vector<client::Array>> LaunchMlpStep(
    client::Session& session, const client::Executable& program,
    const std::vector<client::Array>& params, const MlpData& data,
    int64_t batch);

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_MLP_LIB_H_
