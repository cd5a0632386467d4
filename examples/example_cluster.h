// Where an example runs: on an embedded cluster of its own (the default),
// or on a running cluster (`causeway cluster`, or a head and its workers)
// with
//
//   --cluster HOST:PORT [--token-file F] [--tls-ca F]
//
// The example's code sees a Client either way; its status view and trace
// come from the embedded cluster or, on a running one, from the head.
//
//   examples::ExampleClusterFlags flags;
//   for (int i = 1; i < argc; ++i) {
//     if (examples::TakeClusterFlag(argc, argv, i, flags)) continue;
//     ...
//   }
//   auto cluster = examples::ExampleCluster::Connect(flags, {.islands = 3});
#ifndef CAUSEWAY_EXAMPLES_EXAMPLE_CLUSTER_H_
#define CAUSEWAY_EXAMPLES_EXAMPLE_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "causeway/client/client.h"
#include "causeway/client/connect.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/trace/trace_recorder.h"
#include "causeway/transport/session_channel.h"

namespace causeway::examples {

struct ExampleClusterFlags {
  std::string cluster;  // HOST:PORT; empty: embedded.
  client::ConnectOptions connect;
  std::string error;  // A flag without its value, say.
};

// If argv[i] is one of the cluster flags ("--cluster X" or "--cluster=X",
// and likewise --token-file, --tls-ca), takes it (and its value: `i`
// moves past it) into `flags` and returns true. A flag without its value
// sets flags.error.
bool TakeClusterFlag(int argc, char** argv, int& i, ExampleClusterFlags& flags);

// The usage text of those flags.
inline constexpr char kClusterFlagsUsage[] =
    "[--cluster HOST:PORT [--token-file F] [--tls-ca F]]";

class ExampleCluster {
 public:
  // An embedded cluster of `embedded`'s shape, or a client of the running
  // cluster at flags.cluster (which must offer the devices the example
  // asks for: its slice requests wait for them otherwise).
  static absl::StatusOr<ExampleCluster> Connect(
      const ExampleClusterFlags& flags, cluster::LocalClusterOptions embedded);

  client::Client& client() { return *client_; }
  // The embedded cluster; null on a running one. For an example that
  // stops a host itself (elastic_training --kill-at-step).
  cluster::LocalCluster* local() { return local_.get(); }
  // "an embedded cluster" or "the cluster at HOST:PORT".
  const std::string& description() const { return description_; }

  // The cluster's status view and its trace (Chrome trace-event JSON).
  absl::StatusOr<transport::StatusReport> Status();
  absl::StatusOr<std::string> Trace();

 private:
  ExampleCluster() = default;

  std::shared_ptr<trace::TraceRecorder> recorder_;  // Embedded only.
  std::unique_ptr<cluster::LocalCluster> local_;    // Embedded only.
  std::unique_ptr<client::Client> client_;
  std::string description_;
};

}  // namespace causeway::examples

#endif  // CAUSEWAY_EXAMPLES_EXAMPLE_CLUSTER_H_
