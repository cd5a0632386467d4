// The `causeway` command: a dispatcher to one file per command
// (cli/<command>_command.h).
#include <grpc/support/log.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "causeway/base/futex_hash.h"
#include "causeway/base/lock_order.h"
#include "causeway/base/logging.h"

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
  --log-format text|json
            Taken by every command, anywhere among its options: how the
            process writes its messages on stderr. json: one JSON object
            per line with time, level, process, host, pid and message
            (docs/operate.md); a cluster passes it to its members.
)";

// Takes `--log-format F` / `--log-format=F` out of `args`: every command
// has it, so no command's own flags see it.
absl::StatusOr<LogFormat> TakeLogFormat(std::vector<std::string>& args) {
  LogFormat format = LogFormat::kText;
  for (size_t i = 0; i < args.size();) {
    std::string value;
    size_t taken = 0;
    if (args[i] == "--log-format") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError("--log-format needs text or json");
      }
      value = args[i + 1];
      taken = 2;
    } else if (absl::StartsWith(args[i], "--log-format=")) {
      value = args[i].substr(sizeof("--log-format=") - 1);
      taken = 1;
    } else {
      ++i;
      continue;
    }
    absl::StatusOr<LogFormat> parsed = ParseLogFormat(value);
    if (!parsed.ok()) return parsed.status();
    format = *parsed;
    args.erase(args.begin() + i, args.begin() + i + taken);
  }
  return format;
}

LogSeverity FromGrpc(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG:
    case GPR_LOG_SEVERITY_INFO:
      return LogSeverity::kInfo;
    case GPR_LOG_SEVERITY_ERROR:
      return LogSeverity::kError;
  }
  return LogSeverity::kError;
}

// gRPC's own messages, in the process's format.
void GrpcLog(gpr_log_func_args* args) {
  WriteLibraryLog(FromGrpc(args->severity), args->file, args->line,
                  args->message);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<LogFormat> format = TakeLogFormat(args);
  const std::string command = args.empty() ? "causeway" : args[0];
  SetLogFormat(format.value_or(LogFormat::kText), command);
  gpr_set_log_function(GrpcLog);
  if (!format.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway: %s\n",
                     std::string(format.status().message()).c_str());
    return kExitUsage;
  }
  if (args.empty()) {
    PrintUserMessage(LogSeverity::kError, "%s", kMainHelp);
    return kExitUsage;
  }
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
  PrintUserMessage(LogSeverity::kError, "causeway: unknown command '%s'\n\n%s",
                   command.c_str(), kMainHelp);
  return kExitUsage;
}

}  // namespace
}  // namespace causeway::cli

int main(int argc, char** argv) {
  causeway::SkipAbseilLockOrderGraph();
  // Before any thread starts; an older kernel has nothing to size.
  causeway::SizeFutexHash(causeway::kFutexHashSlots).IgnoreError();
  return causeway::cli::Main(argc, argv);
}
