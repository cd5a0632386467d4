// The `causeway` command: a dispatcher to one file per command
// (cli/<command>_command.h).
#include <cstdio>
#include <string>
#include <vector>

#include "causeway/base/lock_order.h"
#include "causeway/cli/cluster_command.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/head_command.h"
#include "causeway/cli/proxy_command.h"
#include "causeway/cli/run_command.h"
#include "causeway/cli/status_command.h"
#include "causeway/cli/top_command.h"
#include "causeway/cli/trace_command.h"
#include "causeway/cli/worker_command.h"

namespace causeway::cli {
namespace {

constexpr char kMainHelp[] =
    R"(causeway: a single-controller runtime for XLA HLO programs.

Usage:
  causeway <command> [options]

Commands:
  run       Run one SPMD HLO program on N local CPU devices, with .npy
            files as inputs and outputs. See `causeway run --help`.
  head      A cluster's head: clients connect to it, workers register.
  cluster   A head and its workers as processes on this machine.
  worker    One host of a cluster: dials its head and runs what it sends.
  status    The status view of a running cluster.
  top       A live terminal view of a running cluster (its HTTP endpoint).
  trace     The cluster's recent work as a Perfetto trace file.
  proxy     Serves the IFRT proxy protocol: unmodified JAX on a cluster.

Options:
  --help    Show this help. `causeway <command> --help` for a command's.
)";

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kMainHelp, stderr);
    return kExitUsage;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kMainHelp, stdout);
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "run") return RunCommand(rest);
  if (command == "head") return HeadCommand(rest);
  if (command == "cluster") return ClusterCommand(rest);
  if (command == "worker") return WorkerCommand(rest);
  if (command == "status") return StatusCommand(rest);
  if (command == "top") return TopCommand(rest);
  if (command == "trace") return TraceCommand(rest);
  if (command == "proxy") return ProxyCommand(rest);
  std::fprintf(stderr, "causeway: unknown command '%s'\n\n%s", command.c_str(),
               kMainHelp);
  return kExitUsage;
}

}  // namespace
}  // namespace causeway::cli

int main(int argc, char** argv) {
  causeway::SkipAbseilLockOrderGraph();
  return causeway::cli::Main(argc, argv);
}
