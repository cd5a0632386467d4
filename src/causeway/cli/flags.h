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

// --token-file F, --tls-ca F, --tls-cert F, --tls-key F, and the
// connections' --keepalive-timeout S.
std::vector<FlagSpec> SecurityFlagSpecs();
inline constexpr char kSecurityFlagsHelp[] =
    R"(Security (the same flags on every command; docs/security.md):
  --token-file F    The cluster's shared secret. A head with one refuses
                    every call without it (UNAUTHENTICATED); workers prove
                    it to each other on the data plane and in collectives
                    (an HMAC challenge: it never crosses the wire there).
  --tls-cert F      TLS: this process's certificate (PEM) and its key. The
  --tls-key F       head's own; on a client or worker, the certificate it
                    presents to a head that requires one (mutual TLS).
  --tls-ca F        TLS: the CA (PEM) that signed the other side's
                    certificate (or that certificate itself). On a client
                    or worker: the head's certificate is checked against
                    it. On the head: every client and worker must present
                    a certificate signed by it (mutual TLS), or its TLS
                    handshake is refused before any call.

Connections to and from the head:
  --keepalive-timeout S
                    A connection whose peer does not answer a keepalive
                    ping within S seconds is broken (default 2; pings
                    every S/2): how soon a head sees a silent worker or
                    client gone, and they a silent head. Raise it where
                    processes are starved of CPU (hundreds of simulated
                    hosts on a few cores), not to hide a slow network.
)";
absl::StatusOr<transport::GrpcSecurity> SecurityFromFlags(
    const ParsedFlags& flags);
absl::StatusOr<transport::KeepaliveOptions> KeepaliveFromFlags(
    const ParsedFlags& flags);

// The command's specs plus the security flags.
std::vector<FlagSpec> WithSecurityFlags(std::vector<FlagSpec> specs);

// Secure by default when exposed (docs/security.md): a port on an address
// other than loopback (127.0.0.0/8, ::1, localhost) must be protected.
// InvalidArgument naming `flag`, its address and what it lacks (`needs`)
// when `address` is exposed and not `protected_`, unless the command was
// given --insecure (a flag without a value: {"--insecure", false}).
inline constexpr char kInsecureFlagHelp[] =
    R"(  --insecure        Listen on an address other than loopback without the
                    protection it needs (the head: TLS, and a token or
                    client certificates; the proxy: none exists): anyone
                    who reaches the port, or sees its traffic, can use
                    it. Without it such a start is refused, saying why.
                    The head's HTTP endpoint then also accepts the token
                    itself (`Bearer`, as Prometheus sends it) over plain
                    HTTP.
)";
absl::Status RequireProtectionWhenExposed(const ParsedFlags& flags,
                                          const std::string& flag,
                                          const std::string& address,
                                          bool protected_,
                                          const std::string& needs);

}  // namespace causeway::cli

#endif  // CAUSEWAY_CLI_FLAGS_H_
