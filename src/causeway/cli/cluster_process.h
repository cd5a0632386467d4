// A `causeway cluster` in a child process of ours: for tests, benchmarks
// and demos that need a real multi-process cluster. Started with the
// command's flags, ready once it printed `head listening on HOST:PORT`
// (every worker registered), stopped with SIGTERM (which stops every
// member) when this object goes, even when a test fails.
//
//   auto cluster = cli::ClusterProcess::Start(CAUSEWAY_BINARY,
//       {"--islands", "3", "--hosts-per-island", "1",
//        "--devices-per-host", "2"});
//   auto client = client::Connect((*cluster)->address());
//
// Not thread-safe: one owner.
#ifndef CAUSEWAY_CLI_CLUSTER_PROCESS_H_
#define CAUSEWAY_CLI_CLUSTER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/cli/child_process.h"

namespace causeway::cli {

class ClusterProcess {
 public:
  // Runs `binary cluster flags...` and waits up to `timeout` for it to be
  // ready; why not otherwise (its exit status, or DeadlineExceeded).
  static absl::StatusOr<std::unique_ptr<ClusterProcess>> Start(
      const std::string& binary, std::vector<std::string> flags,
      absl::Duration timeout = absl::Seconds(60));
  ~ClusterProcess();  // Stop().

  // The head's "HOST:PORT".
  const std::string& address() const { return address_; }
  // Every worker's pid by its host id, as the cluster started them (one
  // that died since, or was killed, stays listed).
  const std::map<HostId, pid_t>& workers() const { return workers_; }
  // Stops every member (SIGTERM; SIGKILL after a grace period); its wait
  // status. Idempotent.
  int Stop();

 private:
  ClusterProcess(std::unique_ptr<ChildProcess> process, std::string address,
                 std::map<HostId, pid_t> workers)
      : process_(std::move(process)),
        address_(std::move(address)),
        workers_(std::move(workers)) {}

  std::unique_ptr<ChildProcess> process_;
  std::string address_;
  std::map<HostId, pid_t> workers_;
  int status_ = -1;
};

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_CLUSTER_PROCESS_H_
