// Separate hosts (docs/distributed.md): a ProcessClusterTest whose head and
// workers each run in a network namespace of their own, joined by veth
// pairs to a bridge (veth_network.h), the client in this process reaching
// the head across its own veth pair. For cli/separate_hosts_test.cc and
// bench/death_detection_bench.cc. Needs root and `ip netns`: SetUp skips,
// saying which is missing, elsewhere.
#ifndef CAUSEWAY_CLI_TESTING_SEPARATE_HOSTS_H_
#define CAUSEWAY_CLI_TESTING_SEPARATE_HOSTS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/cli/testing/process_cluster.h"
#include "causeway/cli/testing/veth_network.h"
#include "gtest/gtest.h"

namespace causeway::cli::testing {

// Host namespace 0 holds the head, 1.. the workers.
class SeparateHostsTest : public ProcessClusterTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<VethNetwork>> network =
        VethNetwork::Create(7);
    if (network.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << "separate hosts need network namespaces: "
                   << network.status().message();
    }
    ASSERT_TRUE(network.ok()) << network.status();
    network_ = *std::move(network);
  }
  void TearDown() override {
    // The processes first: they keep their namespaces alive.
    StopAll();
    network_.reset();
  }

  // The head, listening on its namespace's address.
  void StartHeadApart(std::vector<std::string> flags = {}) {
    // A test network of its own: no token (--insecure).
    flags.push_back("--insecure");
    StartHead(std::move(flags), absl::StrCat(network_->ip(0), ":0"),
              network_->Launcher(0));
  }

  // A 1-device worker in namespace `n` (1..), its data plane and Gloo on
  // that namespace's address.
  Worker& AddWorkerApart(int n, std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--data-plane-listen",
                               absl::StrCat(network_->ip(n), ":0"),
                               "--insecure"});
    Worker& worker = AddWorker(1, 0, std::move(flags), network_->Launcher(n));
    namespace_of_.emplace_back(worker.host, n);
    return worker;
  }

  // The namespace worker `host` runs in.
  int NamespaceOf(HostId host) const {
    for (const auto& [h, n] : namespace_of_) {
      if (h == host) return n;
    }
    return -1;
  }

  std::unique_ptr<VethNetwork> network_;
  std::vector<std::pair<HostId, int>> namespace_of_;
};

}  // namespace causeway::cli::testing

#endif  // CAUSEWAY_CLI_TESTING_SEPARATE_HOSTS_H_
