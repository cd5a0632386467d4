// `causeway proxy`: serves the IFRT proxy protocol in front of a cluster,
// so that unmodified JAX (JAX_PLATFORMS=proxy) runs on it (docs/jax.md).
#ifndef CAUSEWAY_CLI_PROXY_COMMAND_H_
#define CAUSEWAY_CLI_PROXY_COMMAND_H_

#include <string>
#include <vector>

namespace causeway::cli {

// Runs `causeway proxy ARGS` until SIGINT/SIGTERM (exit 0); 1 when it cannot
// reach the head or listen; 2 for a usage error.
int ProxyCommand(const std::vector<std::string>& args);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_PROXY_COMMAND_H_
