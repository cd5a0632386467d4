// `causeway trace`: the recent work of a whole cluster (every session's,
// every worker's) as a Perfetto trace, fetched from the head's HTTP
// endpoint (/trace?seconds=N).
#ifndef CAUSEWAY_CLI_TRACE_COMMAND_H_
#define CAUSEWAY_CLI_TRACE_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// 0 once the file is written; 1 if the head cannot be reached, refuses or
// the file cannot be written; 2 for a usage error.
int TraceCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_TRACE_COMMAND_H_
