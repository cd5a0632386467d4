#include "causeway/cli/flags.h"


#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::cli {
namespace {

absl::Status Usage(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

std::optional<std::string> ParsedFlags::Get(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

absl::StatusOr<ParsedFlags> ParseFlags(const std::vector<std::string>& args,
                                       const std::vector<FlagSpec>& specs) {
  ParsedFlags parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      parsed.positional.push_back(arg);
      continue;
    }
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == arg) spec = &s;
    }
    if (spec == nullptr) return Usage(absl::StrCat("unknown option '", arg, "'"));
    if (!spec->takes_value) {
      if (value.has_value()) return Usage(absl::StrCat(arg, " takes no value"));
      if (parsed.Has(arg)) return Usage(absl::StrCat(arg, " given twice"));
      parsed.values[arg].push_back("");
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) return Usage(absl::StrCat(arg, " needs a value"));
      value = args[++i];
    }
    if (!spec->repeatable && parsed.Has(arg)) {
      return Usage(absl::StrCat(arg, " given twice ('", *parsed.Get(arg),
                                "' and '", *value, "')"));
    }
    parsed.values[arg].push_back(*value);
  }
  return parsed;
}

absl::StatusOr<int64_t> IntFlag(const ParsedFlags& flags,
                                const std::string& name, int64_t fallback,
                                int64_t min, int64_t max) {
  std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return Usage(absl::StrCat(name, " must be a whole number from ", min,
                              " to ", max, ", got '", *text, "'"));
  }
  return value;
}

absl::StatusOr<absl::Duration> SecondsFlag(const ParsedFlags& flags,
                                           const std::string& name,
                                           absl::Duration fallback) {
  std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return fallback;
  double seconds = 0;
  if (!absl::SimpleAtod(*text, &seconds) || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > 1e6) {
    return Usage(absl::StrCat(name, " must be a positive number of seconds, "
                              "got '", *text, "'"));
  }
  return absl::Seconds(seconds);
}

absl::StatusOr<int64_t> BytesFlag(const ParsedFlags& flags,
                                  const std::string& name, int64_t fallback) {
  std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return fallback;
  std::string digits = *text;
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift != 0) digits.pop_back();
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value <= 0 ||
      value > (int64_t{1} << (62 - shift))) {
    return Usage(absl::StrCat(name, " must be a positive byte count such as "
                              "1073741824 or 1G, got '", *text, "'"));
  }
  return value << shift;
}

absl::StatusOr<std::string> AddressFlag(const ParsedFlags& flags,
                                        const std::string& name) {
  std::optional<std::string> text = flags.Get(name);
  if (!text.has_value()) return Usage(absl::StrCat("missing ", name, " HOST:PORT"));
  const size_t colon = text->rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(text->substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return Usage(absl::StrCat(name, " must be HOST:PORT, got '", *text, "'"));
  }
  return *text;
}

std::vector<FlagSpec> SecurityFlagSpecs() {
  return {{"--token-file"}, {"--tls-ca"}, {"--tls-cert"}, {"--tls-key"},
          {"--keepalive-timeout"}};
}

std::vector<FlagSpec> WithSecurityFlags(std::vector<FlagSpec> specs) {
  for (FlagSpec& spec : SecurityFlagSpecs()) specs.push_back(std::move(spec));
  return specs;
}

absl::StatusOr<transport::KeepaliveOptions> KeepaliveFromFlags(
    const ParsedFlags& flags) {
  const transport::KeepaliveOptions defaults;
  CW_ASSIGN_OR_RETURN(
      absl::Duration timeout,
      SecondsFlag(flags, "--keepalive-timeout", defaults.timeout));
  // At least 1 s: pings every half of it, and a server accepts pings no
  // more often than every 500 ms (grpc_common.h).
  if (timeout < absl::Seconds(1) || timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--keepalive-timeout must be from 1 to 3600 seconds, got ",
        absl::FormatDuration(timeout)));
  }
  return transport::KeepaliveOptions::WithTimeout(timeout);
}

absl::StatusOr<transport::GrpcSecurity> SecurityFromFlags(
    const ParsedFlags& flags) {
  transport::GrpcSecurity security;
  if (std::optional<std::string> path = flags.Get("--token-file")) {
    CW_ASSIGN_OR_RETURN(security.token, transport::ReadTokenFile(*path));
  }
  security.tls_ca_file = flags.Get("--tls-ca").value_or("");
  security.tls_cert_file = flags.Get("--tls-cert").value_or("");
  security.tls_key_file = flags.Get("--tls-key").value_or("");
  // A command that runs exposed on purpose also talks to its head so.
  security.allow_clear_text = flags.Has("--insecure");
  return security;
}

absl::Status RequireProtectionWhenExposed(const ParsedFlags& flags,
                                          const std::string& flag,
                                          const std::string& address,
                                          bool protected_,
                                          const std::string& needs) {
  const std::string host = address.substr(0, address.rfind(':'));
  if (protected_ || transport::IsLoopbackHost(host) ||
      flags.Has("--insecure")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", address, " is reachable from other machines, and without ",
      needs, " anyone who reaches it could use it: give ", needs,
      " (docs/security.md), listen on loopback, or pass --insecure to run "
      "it unprotected anyway"));
}

}  // namespace causeway::cli
