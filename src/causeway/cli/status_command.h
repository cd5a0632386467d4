// `causeway status`: the status view of a running cluster.
#ifndef CAUSEWAY_CLI_STATUS_COMMAND_H_
#define CAUSEWAY_CLI_STATUS_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway status ARGS`: prints the head's status report; 1 when the
// head cannot be reached, 2 for a usage error.
int StatusCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_STATUS_COMMAND_H_
