// Three sessions share one island of 4 CPU devices, each wanting 2: the
// third waits in the queue and runs as soon as the first one ends.
//
//   build/bin/sharing [--cluster HOST:PORT [--token-file F]]
//
// prints the timeline. Embedded by default; with --cluster, on a running
// cluster whose island 0 has 4 devices and no other sessions (`causeway
// cluster --islands 1 --hosts-per-island 2 --devices-per-host 2`).
#include <cstdio>
#include <memory>

#include "example_cluster.h"
#include "sharing_lib.h"

int main(int argc, char** argv) {
  using namespace causeway;
  examples::ExampleClusterFlags flags;
  for (int i = 1; i < argc; ++i) {
    if (examples::TakeClusterFlag(argc, argv, i, flags)) continue;
    std::fprintf(stderr, "usage: %s %s\n", argv[0],
                 examples::kClusterFlagsUsage);
    return 2;
  }
  absl::StatusOr<examples::ExampleCluster> cluster =
      examples::ExampleCluster::Connect(
          flags, {.islands = 1, .hosts_per_island = 1, .devices_per_host = 4});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<examples::SharingResult> result =
      examples::RunSharing(cluster->client());
  if (!result.ok()) {
    std::fprintf(stderr, "sharing failed: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf("one island of 4 devices; sessions A, B, C each want 2\n%s",
              result->ToString().c_str());
  return 0;
}
