// Command-line flags of the `causeway` commands that run or reach a
// cluster (head, worker, cluster, status): `--name VALUE` or
// `--name=VALUE`, each known flag declared once, a one-value flag given
// twice refused, and the security flags every connecting command shares.
#ifndef CAUSEWAY_CLI_FLAGS_H_
#define CAUSEWAY_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/transport/grpc_common.h"

namespace causeway::cli {

struct FlagSpec {
  std::string name;  // With the dashes: "--head".
  bool takes_value = true;
  bool repeatable = false;
};

struct ParsedFlags {
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> positional;
  bool help = false;  // --help or -h was given.

  bool Has(const std::string& name) const { return values.contains(name); }
  // The flag's value, if given.
  std::optional<std::string> Get(const std::string& name) const;
};

// InvalidArgument (a usage error, with the flag's name) for an unknown
// flag, a missing value, a value given to a switch, or a one-value flag
// given twice.
absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                       const std::vector<FlagSpec>& specs);

// Typed values, InvalidArgument naming the flag when malformed or out of
// [min, max]; `fallback` when the flag is absent.
absl::StatusOr<int64_t> IntFlag(const ParsedFlags& flags,
                                const std::string& name, int64_t fallback,
                                int64_t min, int64_t max);
// A positive number of seconds ("0.5").
absl::StatusOr<absl::Duration> SecondsFlag(const ParsedFlags& flags,
                                           const std::string& name,
                                           absl::Duration fallback);
// A byte count: a whole number, optionally with K, M, G or T (powers of
// 1024): "1G", "512M", "1073741824".
absl::StatusOr<int64_t> BytesFlag(const ParsedFlags& flags,
                                  const std::string& name, int64_t fallback);
// HOST:PORT, required.
absl::StatusOr<std::string> AddressFlag(const ParsedFlags& flags,
                                        const std::string& name);

// --token-file F, --tls-ca F, --tls-cert F, --tls-key F.
std::vector<FlagSpec> SecurityFlagSpecs();
inline constexpr char kSecurityFlagsHelp[] =
    R"(  --token-file F    The cluster's shared secret: every call carries the
                    token in F, and a head with one refuses anyone without
                    it (UNAUTHENTICATED).
  --tls-ca F        TLS, on a client or worker: trust the head certificate
                    signed by (or equal to) the PEM certificate in F.
  --tls-cert F      TLS, on the head: its certificate (PEM) and its key.
  --tls-key F       The head does not ask clients or workers for
                    certificates (no mutual TLS): they pass --tls-ca only.
)";
absl::StatusOr<transport::GrpcSecurity> SecurityFromFlags(
    const ParsedFlags& flags);

// The command's specs plus the security flags.
std::vector<FlagSpec> WithSecurityFlags(std::vector<FlagSpec> specs);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_FLAGS_H_
