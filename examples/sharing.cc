// Three sessions share one island of 4 CPU devices, each wanting 2: the
// third waits in the queue and runs as soon as the first one ends.
//
//   build/bin/sharing
//
// prints the timeline.
#include <cstdio>
#include <memory>

#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "sharing_lib.h"

int main() {
  using namespace causeway;
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 1,
                                     .hosts_per_island = 1,
                                     .devices_per_host = 4});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  absl::StatusOr<examples::SharingResult> result = examples::RunSharing(*client);
  if (!result.ok()) {
    std::fprintf(stderr, "sharing failed: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf("one island of 4 devices; sessions A, B, C each want 2\n%s",
              result->ToString().c_str());
  return 0;
}
