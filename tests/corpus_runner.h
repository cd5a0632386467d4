// What the corpus tests share: the corpus itself (its index, manifests and
// stacked arrays) and running a program on the runtime the way
// `causeway run` runs stacked inputs: on a slice of a LocalCluster, one
// buffer per device in (Session::FromShards), every device's buffer out
// (Array::ShardsToHost).
#ifndef CAUSEWAY_TESTS_CORPUS_RUNNER_H_
#define CAUSEWAY_TESTS_CORPUS_RUNNER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/cli/cluster_process.h"
#include "causeway/client/client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::corpus {

// The corpus directory: CAUSEWAY_CORPUS_DIR from the environment (e.g. one
// written by gen_corpus.py --bench-only), else the committed one.
std::filesystem::path CorpusDir();

// The programs the corpus's index (programs.txt, written by gen_corpus.py)
// lists, in order; an error when the index is missing or unreadable.
absl::StatusOr<std::vector<std::string>> ListedPrograms(
    const std::filesystem::path& root);

// The corpus directories holding a program.hlo, sorted.
std::vector<std::string> ProgramDirectories(const std::filesystem::path& root);

// One line of the manifest: `input FILE DTYPE [SHAPE]` or
// `output FILE DTYPE [SHAPE] RTOL ATOL`. SHAPE is one partition's shard.
struct ArraySpec {
  std::string file;
  hlo::PrimitiveType type = hlo::PrimitiveType::kInvalid;
  std::vector<int64_t> shard_dims;
  double rtol = 0;
  double atol = 0;
};

struct Manifest {
  std::string name;
  std::string description;
  int64_t partitions = 0;
  std::vector<ArraySpec> inputs;
  std::vector<ArraySpec> outputs;
};

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path);
absl::StatusOr<Manifest> ParseManifest(const std::string& text,
                                       const std::string& path);
std::string DimsText(const std::vector<int64_t>& dims);

// Splits a stacked array (leading axis = partition) into one literal per
// partition, checking it against the manifest's dtype and shard shape.
absl::StatusOr<std::vector<hlo::Literal>> Unstack(const hlo::Literal& stacked,
                                                  const ArraySpec& spec,
                                                  int64_t partitions);

// Reads every input of the program in `dir` as per-partition shards:
// inputs[i][p] is partition p's argument i.
absl::StatusOr<std::vector<std::vector<hlo::Literal>>> ReadInputs(
    const std::filesystem::path& dir, const Manifest& manifest);

// Runs programs on one LocalCluster, kept for the whole test binary (and
// grown when a program needs more devices). With CAUSEWAY_CORPUS_CLUSTER=1
// in the environment, the fused runner uses a multi-process cluster
// instead (`causeway cluster`: a head and kClusterHosts worker processes
// of one device each, started once for the binary, stopped by Stop), so that every
// partition of a program runs in a process of its own and collectives go
// over Gloo; a run whose slice is not spread over at least two processes
// fails. Not thread-safe: gtest runs tests one at a time.
class Runner {
 public:
  // The runner whose devices run fusion bodies as fused loops (as
  // production does), or, with false, op by op.
  static Runner& Get(bool fused_loops = true);

  // Runs `hlo_text` on `partitions` devices with inputs[i][p] as partition
  // p's argument i; returns outputs[o][p], output o of partition p.
  absl::StatusOr<std::vector<std::vector<hlo::Literal>>> Run(
      const std::string& hlo_text, int64_t partitions,
      std::vector<std::vector<hlo::Literal>> inputs);

  // Stops what Run started: the multi-process cluster (SIGTERM to every
  // member, waited for) or the LocalCluster. The test binary calls it once
  // every test has run, so that no process outlives it; a later Run starts
  // afresh.
  void Stop();

  // The worker processes of the multi-process cluster (the corpus's
  // largest programs have 8 partitions).
  static constexpr int64_t kClusterHosts = 8;

 private:
  explicit Runner(bool fused_loops) : fused_loops_(fused_loops) {}
  absl::Status EnsureDevices(int64_t devices);

  const bool fused_loops_;
  std::unique_ptr<cli::ClusterProcess> processes_;  // Multi-process only.
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::unique_ptr<client::Client> client_;
  int64_t devices_ = 0;
};

}  // namespace causeway::corpus

#endif  // CAUSEWAY_TESTS_CORPUS_RUNNER_H_
