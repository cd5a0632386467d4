#include "causeway/cli/status_command.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/transport/grpc_session_channel.h"

namespace causeway::cli {
namespace {

constexpr char kStatusHelp[] = R"(Usage:
  causeway status --head HOST:PORT [--json] [--timeout S] [--token-file F]
                  [--tls-ca F [--tls-cert F --tls-key F]]

Prints what the head knows: for every device the op it runs, the ops
queued behind it and what each waits for; slices, sessions, hosts and their
health. No session is opened.

  --head HOST:PORT  The cluster's head.
  --json            The same, machine-readable.
  --timeout S       How long to wait for the head (default 10).
)";

}  // namespace

int StatusCommand(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      args, WithSecurityFlags({{"--head"},
                               {"--json", /*takes_value=*/false},
                               {"--timeout"}}));
  if (parsed.ok() && parsed->help) {
    std::printf("%s%s", kStatusHelp, kSecurityFlagsHelp);
    return kExitOk;
  }
  transport::GrpcClientOptions options;
  absl::StatusOr<std::string> head =
      parsed.ok() ? AddressFlag(*parsed, "--head")
                  : absl::StatusOr<std::string>(parsed.status());
  absl::Status usage = head.status();
  if (usage.ok()) {
    absl::StatusOr<absl::Duration> timeout =
        SecondsFlag(*parsed, "--timeout", absl::Seconds(10));
    usage = timeout.status();
    if (usage.ok()) options.connect_timeout = *timeout;
  }
  if (usage.ok()) {
    absl::StatusOr<transport::GrpcSecurity> security = SecurityFromFlags(*parsed);
    usage = security.status();
    if (usage.ok()) options.security = *security;
  }
  if (usage.ok()) {
    absl::StatusOr<transport::KeepaliveOptions> keepalive =
        KeepaliveFromFlags(*parsed);
    usage = keepalive.status();
    if (usage.ok()) options.keepalive = *keepalive;
  }
  if (usage.ok() && !parsed->positional.empty()) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!usage.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway status: %s\n(see causeway status --help)\n",
                 std::string(usage.message()).c_str());
    return kExitUsage;
  }
  const absl::Duration timeout = options.connect_timeout;
  absl::StatusOr<std::shared_ptr<transport::GrpcHeadConnection>> connection =
      transport::GrpcHeadConnection::Connect(*head, std::move(options));
  absl::StatusOr<transport::GrpcHeadConnection::ClusterStatus> status =
      connection.ok() ? (*connection)->GetClusterStatus(timeout)
                      : absl::StatusOr<transport::GrpcHeadConnection::
                                           ClusterStatus>(connection.status());
  if (!status.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway status: %s\n",
                 std::string(status.status().message()).c_str());
    return kExitFailure;
  }
  const std::string& text =
      parsed->Has("--json") ? status->report.json : status->report.text;
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return kExitOk;
}

}  // namespace causeway::cli
