// `causeway cluster`: a head and its workers as child processes on this
// machine, started and stopped together.
#ifndef CAUSEWAY_CLI_CLUSTER_COMMAND_H_
#define CAUSEWAY_CLI_CLUSTER_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway cluster ARGS` until SIGINT/SIGTERM (exit 0) or the head's
// death (exit 1); 2 for a usage error.
int ClusterCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_CLUSTER_COMMAND_H_
