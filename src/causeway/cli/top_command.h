// `causeway top`: a terminal view of a running cluster, from its head's
// HTTP endpoint (/api/status), repainted every second with plain ANSI
// escapes (works in any terminal, over ssh). `q` quits.
#ifndef CAUSEWAY_CLI_TOP_COMMAND_H_
#define CAUSEWAY_CLI_TOP_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway top ARGS` until `q`, SIGINT or SIGTERM (exit 0); with
// --once prints one screen and exits (1 if the head cannot be reached or
// refuses, 2 for a usage error).
int TopCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_TOP_COMMAND_H_
