// An SPMD program on N local CPU devices: one HLO module, compiled for N
// partitions, run by N device threads that meet in-process for
// collectives. What `causeway run` uses, and the simplest way to run a
// partitioned JAX program from C++.
#ifndef CAUSEWAY_EXEC_SPMD_PROGRAM_H_
#define CAUSEWAY_EXEC_SPMD_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/exec/evaluator.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"

namespace causeway::exec {

// Thread-safe: concurrent Run calls are executed one after another. Each
// partition runs on its own persistent thread, in the order runs arrive.
class SpmdProgram {
 public:
  struct Options {
    // How long a device waits in a collective for its peers.
    absl::Duration collective_timeout = absl::Seconds(60);
    Evaluator::Options evaluator;
  };

  // Parses, verifies and prepares `hlo_text` for `num_partitions`
  // devices. The module's num_partitions must equal `num_partitions`,
  // except that a module compiled for one partition that has no
  // collectives may run on any number (each device runs it
  // independently; partition-id tells them apart). replica_count must be
  // 1. Errors: InvalidArgument (parse errors with line:column, partition
  // mismatch), Unimplemented (unsupported ops, with name and line).
  static absl::StatusOr<std::unique_ptr<SpmdProgram>> Load(
      std::string_view hlo_text, int64_t num_partitions);
  static absl::StatusOr<std::unique_ptr<SpmdProgram>> Load(
      std::string_view hlo_text, int64_t num_partitions, Options options);
  // The same for a module already parsed.
  static absl::StatusOr<std::unique_ptr<SpmdProgram>> Create(
      std::unique_ptr<hlo::Module> module, int64_t num_partitions,
      Options options);

  ~SpmdProgram();  // Waits for a run in progress, then stops the threads.

  // Runs every partition on its own arguments (`per_partition_args[p]` are
  // the entry parameters of partition p, in order) and returns each
  // partition's outputs: the root value, a tuple root flattened one level
  // into its elements. If a partition fails, its peers' collectives are
  // cancelled and the error of the partition that failed first is
  // returned, prefixed with "partition P: ".
  absl::StatusOr<std::vector<std::vector<hlo::Literal>>> Run(
      std::vector<std::vector<hlo::Literal>> per_partition_args);

  const hlo::Module& module() const { return *module_; }
  int64_t num_partitions() const { return num_partitions_; }

 private:
  SpmdProgram(std::unique_ptr<hlo::Module> module,
              std::unique_ptr<Evaluator> evaluator, int64_t num_partitions,
              Options options);

  const std::unique_ptr<hlo::Module> module_;
  const std::unique_ptr<Evaluator> evaluator_;
  const int64_t num_partitions_;
  InProcessCollectives collectives_;
  absl::Mutex run_mu_;  // Held for a whole run: one run at a time.
  uint64_t next_run_id_ ABSL_GUARDED_BY(run_mu_) = 1;
  // One single-thread executor per device.
  std::vector<std::unique_ptr<ThreadPool>> devices_;
};

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_SPMD_PROGRAM_H_
