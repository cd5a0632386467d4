#include "causeway/base/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace causeway {
namespace internal {
namespace {

const char* SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "I";
    case LogSeverity::kWarning:
      return "W";
    case LogSeverity::kError:
      return "E";
    case LogSeverity::kFatal:
      return "F";
  }
  return "?";
}

const char* SeverityName(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "INFO";
    case LogSeverity::kWarning:
      return "WARNING";
    case LogSeverity::kError:
      return "ERROR";
    case LogSeverity::kFatal:
      return "FATAL";
  }
  return "UNKNOWN";
}

int MinLevel() {
  static const int level = [] {
    const char* env = std::getenv("CAUSEWAY_LOG_LEVEL");
    return env == nullptr ? 1 : std::atoi(env);  // Default: warnings and up.
  }();
  return level;
}

const char* BaseName(const char* file) {
  const char* base = std::strrchr(file, '/');
  return base ? base + 1 : file;
}

}  // namespace
}  // namespace internal

namespace {

// Set once, before other threads log (SetLogFormat's contract).
std::atomic<LogFormat> format{LogFormat::kText};
std::string& ProcessName() {
  static std::string* name = new std::string("causeway");
  return *name;
}
std::string& HostName() {
  static std::string* name = new std::string();
  return *name;
}

// One write per message: lines of different threads never interleave.
void WriteStderr(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

std::string JsonLine(LogSeverity severity, absl::string_view message,
                     const char* file, int line) {
  nlohmann::json object = {
      {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                                absl::UTCTimeZone())},
      {"level", internal::SeverityName(severity)},
      {"process", ProcessName()},
      {"host", HostName()},
      {"pid", static_cast<int64_t>(getpid())},
      {"message", std::string(message)}};
  if (file != nullptr) {
    object["file"] = internal::BaseName(file);
    object["line"] = line;
  }
  return absl::StrCat(
      object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "\n");
}

absl::string_view WithoutFinalNewline(absl::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "--log-format must be 'text' or 'json', not '", name, "'"));
}

void SetLogFormat(LogFormat new_format, std::string process) {
  ProcessName() = std::move(process);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) HostName() = host;
  format.store(new_format);
}

LogFormat GetLogFormat() { return format.load(); }

void PrintUserMessage(LogSeverity severity, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string text(size > 0 ? size : 0, '\0');
  if (size > 0) std::vsnprintf(text.data(), text.size() + 1, fmt, args);
  va_end(args);
  if (GetLogFormat() == LogFormat::kJson) {
    WriteStderr(JsonLine(severity, WithoutFinalNewline(text), nullptr, 0));
  } else {
    WriteStderr(text);
  }
}

void RelayChildLine(int pid, absl::string_view line) {
  if (GetLogFormat() == LogFormat::kText) {
    WriteStderr(absl::StrCat("[pid ", pid, "] ", line, "\n"));
    return;
  }
  const nlohmann::json parsed = nlohmann::json::parse(std::string(line), nullptr, false);
  if (parsed.is_object()) {
    WriteStderr(absl::StrCat(WithoutFinalNewline(line), "\n"));
    return;
  }
  nlohmann::json object = nlohmann::json::parse(
      JsonLine(LogSeverity::kInfo, WithoutFinalNewline(line), nullptr, 0));
  object["child_pid"] = pid;
  WriteStderr(absl::StrCat(
      object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "\n"));
}

void WriteLibraryLog(LogSeverity severity, const char* file, int line,
                     absl::string_view message) {
  if (GetLogFormat() == LogFormat::kJson) {
    WriteStderr(JsonLine(severity, WithoutFinalNewline(message), file, line));
  } else {
    WriteStderr(absl::StrCat(internal::SeverityLetter(severity), " ",
                             internal::BaseName(file), ":", line, "] ",
                             WithoutFinalNewline(message), "\n"));
  }
}

namespace internal {

bool LogEnabled(LogSeverity severity) {
  return static_cast<int>(severity) >= MinLevel();
}

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : severity_(severity), file_(file), line_(line) {
  if (GetLogFormat() == LogFormat::kText) {
    stream_ << SeverityLetter(severity) << " " << BaseName(file) << ":" << line
            << "] ";
  }
}

LogMessage::~LogMessage() {
  if (GetLogFormat() == LogFormat::kJson) {
    WriteStderr(JsonLine(severity_, stream_.str(), file_, line_));
  } else {
    stream_ << "\n";
    WriteStderr(stream_.str());
  }
  if (severity_ == LogSeverity::kFatal) std::abort();
}

}  // namespace internal
}  // namespace causeway
