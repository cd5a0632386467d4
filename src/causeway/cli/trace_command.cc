#include "causeway/cli/trace_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/cli/exit_codes.h"
#include "causeway/cli/flags.h"
#include "causeway/cli/head_http_client.h"
#include "causeway/observe/http_server.h"
#include "causeway/transport/grpc_common.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace causeway::cli {
namespace {

constexpr char kTraceHelp[] = R"(Usage:
  causeway trace --head HOST:PORT --seconds N -o FILE [--token-file F]
                 [--tls-ca F [--tls-cert F --tls-key F]]

Writes the last N seconds of the cluster's work (every session's launches,
every device's ops, waits and transfers, host state changes) as Chrome
trace-event JSON to FILE: open it in ui.perfetto.dev or chrome://tracing.

  --head HOST:PORT  The head's HTTP endpoint (`http listening on ...`).
  --seconds N       How far back, 0 < N <= 3600 (default 10).
  -o, --output FILE Where to write it (`-` for stdout).
  --token-file F    The cluster's token (proven, never sent).
  --tls-ca F        HTTPS, as for `causeway top`: the head's CA, and the
  --tls-cert F      client certificate to present where the head
  --tls-key F       requires one.
)";

int Fail(const std::string& message) {
  PrintUserMessage(LogSeverity::kError, "causeway trace: %s\n", message.c_str());
  return kExitFailure;
}

}  // namespace

int TraceCommand(const std::vector<std::string>& args) {
  // -o is --output (the flag parser knows only long options).
  std::vector<std::string> long_args = args;
  for (std::string& arg : long_args) {
    if (arg == "-o") arg = "--output";
  }
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(
      long_args, {{"--head"},
                  {"--seconds"},
                  {"--output"},
                  {"--token-file"},
                  {"--tls-ca"},
                  {"--tls-cert"},
                  {"--tls-key"}});
  if (parsed.ok() && parsed->help) {
    std::printf("%s", kTraceHelp);
    return kExitOk;
  }
  absl::Status usage = parsed.status();
  std::string head, output;
  transport::GrpcSecurity security;
  double seconds = 10;
  if (usage.ok()) {
    absl::StatusOr<std::string> address = AddressFlag(*parsed, "--head");
    usage = address.status();
    if (usage.ok()) head = *address;
    if (usage.ok()) usage = observe::SplitHostPort(head).status();
  }
  if (usage.ok()) {
    if (std::optional<std::string> text = parsed->Get("--seconds");
        text.has_value() &&
        (!absl::SimpleAtod(*text, &seconds) ||
         !(seconds > 0 && seconds <= 3600))) {
      usage = absl::InvalidArgumentError(
          absl::StrCat("--seconds must be in (0, 3600], not '", *text, "'"));
    }
  }
  if (usage.ok()) {
    output = parsed->Get("--output").value_or("");
    if (output.empty()) usage = absl::InvalidArgumentError("missing -o FILE");
  }
  std::unique_ptr<httplib::Client> http;
  if (usage.ok()) usage = HeadHttpFromFlags(*parsed, head, &security, &http);
  if (usage.ok() && !parsed->positional.empty()) {
    usage = absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", parsed->positional.front(), "'"));
  }
  if (!usage.ok()) {
    PrintUserMessage(LogSeverity::kError, "causeway trace: %s\n(see causeway trace --help)\n",
                 std::string(usage.message()).c_str());
    return kExitUsage;
  }
  httplib::Client& client = *http;
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(60, 0);
  const httplib::Headers headers = HeadHttpHeaders(security);
  httplib::Result result =
      client.Get(absl::StrCat("/trace?seconds=", seconds).c_str(), headers);
  if (!result) {
    return Fail(absl::StrCat("cannot reach the head at ", head, ": ",
                             httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
    return Fail(absl::StrCat(
        "the head answered ", result->status, ": ",
        body.is_object() && body.contains("error") && body["error"].is_string()
            ? body["error"].get<std::string>()
            : result->body));
  }
  if (output == "-") {
    std::fwrite(result->body.data(), 1, result->body.size(), stdout);
    return kExitOk;
  }
  std::ofstream out(output, std::ios::binary);
  out << result->body;
  out.close();
  if (!out) return Fail(absl::StrCat("cannot write '", output, "'"));
  PrintUserMessage(LogSeverity::kInfo, "causeway trace: %zu bytes of the last %g s to %s\n",
               result->body.size(), seconds, output.c_str());
  return kExitOk;
}

}  // namespace causeway::cli
