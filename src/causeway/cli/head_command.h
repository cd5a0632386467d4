// `causeway head`: a cluster's head process, serving clients and workers
// over gRPC.
#ifndef CAUSEWAY_CLI_HEAD_COMMAND_H_
#define CAUSEWAY_CLI_HEAD_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway head ARGS` until SIGINT/SIGTERM (exit 0); 1 when it
// cannot start (the address is taken, a TLS file is unreadable), 2 for a
// usage error.
int HeadCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_HEAD_COMMAND_H_
