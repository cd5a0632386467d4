// The Pathways paper's Figure 2 on a local cluster of three islands of two
// CPU devices: f(v) = (b(a(v)), a(c(a(v)))) traced as one program graph.
//
//   build/bin/figure2 [--trace=FILE]
//
// prints "f([1, 2]) = ([3, 5], [2, 4])"; with --trace, writes the run's
// Chrome trace-event JSON (open it in ui.perfetto.dev).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "causeway/client/local_client.h"
#include "causeway/cluster/local_cluster.h"
#include "causeway/trace/trace_recorder.h"
#include "figure2_lib.h"

int main(int argc, char** argv) {
  using namespace causeway;
  std::string trace_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--trace=", 0) == 0) {
      trace_path = arg.substr(8);
    } else {
      std::fprintf(stderr, "usage: %s [--trace=FILE]\n", argv[0]);
      return 2;
    }
  }
  auto recorder = std::make_shared<trace::TraceRecorder>();
  absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> cluster =
      cluster::LocalCluster::Create({.islands = 3,
                                     .hosts_per_island = 1,
                                     .devices_per_host = 2,
                                     .event_sink = recorder});
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<client::Client> client = client::ConnectLocal(**cluster);
  absl::StatusOr<examples::Figure2Result> result =
      examples::RunFigure2(*client);
  if (!result.ok()) {
    std::fprintf(stderr, "figure 2 failed: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  std::printf("f([1, 2]) = %s\n", result->ToString().c_str());
  if (!trace_path.empty()) {
    absl::StatusOr<std::string> trace = recorder->ExportChromeTrace();
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
