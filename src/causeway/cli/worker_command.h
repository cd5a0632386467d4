// `causeway worker`: one host of a cluster, dialling its head.
#ifndef CAUSEWAY_CLI_WORKER_COMMAND_H_
#define CAUSEWAY_CLI_WORKER_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway worker ARGS` until stopped (SIGINT, SIGTERM: exit 0) or
// until no head answers for the retry window (exit 1); 2 for a usage
// error.
int WorkerCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_WORKER_COMMAND_H_
