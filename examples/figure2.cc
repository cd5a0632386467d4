// The Pathways paper's Figure 2 on three islands of two CPU devices:
// f(v) = (b(a(v)), a(c(a(v)))) traced as one program graph.
//
//   build/bin/figure2 [--trace=FILE] [--cluster HOST:PORT [--token-file F]]
//
// prints "f([1, 2]) = ([3, 5], [2, 4])"; with --trace, writes the run's
// Chrome trace-event JSON (open it in ui.perfetto.dev). Embedded by
// default; with --cluster, on a running cluster with at least three
// islands of two devices (`causeway cluster --islands 3
// --hosts-per-island 1 --devices-per-host 2`).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "example_cluster.h"
#include "figure2_lib.h"

int main(int argc, char** argv) {
  using namespace causeway;
  std::string trace_path;
  examples::ExampleClusterFlags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (examples::TakeClusterFlag(argc, argv, i, flags)) continue;
    if (arg.rfind("--trace=", 0) == 0) {
      trace_path = arg.substr(8);
    } else {
      std::fprintf(stderr, "usage: %s [--trace=FILE] %s\n", argv[0],
                   examples::kClusterFlagsUsage);
      return 2;
    }
  }
  absl::StatusOr<examples::ExampleCluster> cluster =
      examples::ExampleCluster::Connect(
          flags, {.islands = 3, .hosts_per_island = 1, .devices_per_host = 2});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<examples::Figure2Result> result =
      examples::RunFigure2(cluster->client());
  if (!result.ok()) {
    std::fprintf(stderr, "figure 2 failed: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf("f([1, 2]) = %s\n", result->ToString().c_str());
  if (!trace_path.empty()) {
    absl::StatusOr<std::string> trace = cluster->Trace();
    std::ofstream out(trace_path);
    if (!trace.ok() || !(out << *trace)) {
      std::fprintf(stderr, "could not write the trace to %s\n",
                   trace_path.c_str());
      return 1;
    }
    std::printf("trace written to %s (open it in ui.perfetto.dev)\n",
                trace_path.c_str());
  }
  return 0;
}
