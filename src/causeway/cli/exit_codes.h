// Exit statuses shared by every `causeway` command.
#ifndef CAUSEWAY_CLI_EXIT_CODES_H_
#define CAUSEWAY_CLI_EXIT_CODES_H_

namespace causeway::cli {

inline constexpr int kExitOk = 0;
// The program, its inputs or the cluster refused the request; the message
// says why.
inline constexpr int kExitFailure = 1;
// The command line itself is wrong.
inline constexpr int kExitUsage = 2;
// The command ran past its --timeout and was stopped (as timeout(1)).
inline constexpr int kExitTimeout = 124;
// SIGINT or SIGTERM stopped the command (128 + SIGINT, as shells report).
inline constexpr int kExitInterrupted = 130;

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_EXIT_CODES_H_
