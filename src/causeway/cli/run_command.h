// `causeway run`: one SPMD HLO program on N local CPU devices, with .npy
// files as inputs and outputs.
#ifndef CAUSEWAY_CLI_RUN_COMMAND_H_
#define CAUSEWAY_CLI_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway run ARGS` (the arguments after "run") and returns the
// process's exit status: 0 on success, 1 when the program or its inputs are
// wrong, 2 for a usage error. Writes its messages to stdout and stderr.
int RunCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_RUN_COMMAND_H_
