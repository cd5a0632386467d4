// Minimal logging: CW_LOG(INFO) << ...; CW_CHECK(cond) << ... for programmer
// errors only. Thread-safe: each message is written with one call.
//
// Everything a process writes on stderr goes through here, in one of two
// formats chosen once per process (`causeway --log-format`, cli/main.cc):
//   text  CW_LOG: "E file.cc:12] message"; PrintUserMessage: as given.
//   json  one JSON object per line, for log collectors:
//         {"time":"2026-12-04T21:30:00.123456Z","level":"ERROR",
//          "process":"head","host":"node-3","pid":812,"message":"...",
//          "file":"head.cc","line":12}  (file and line: CW_LOG only).
#ifndef CAUSEWAY_BASE_LOGGING_H_
#define CAUSEWAY_BASE_LOGGING_H_

#include <sstream>
#include <string>

#include "absl/base/attributes.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace causeway {
namespace internal {

enum class LogSeverity { kInfo, kWarning, kError, kFatal };

// Collects one message and writes it (and aborts for kFatal) on destruction.
class LogMessage {
 public:
  LogMessage(const char* file, int line, LogSeverity severity);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

// Returns true when messages of `severity` are printed (CAUSEWAY_LOG_LEVEL).
bool LogEnabled(LogSeverity severity);

}  // namespace internal

using LogSeverity = internal::LogSeverity;
enum class LogFormat { kText, kJson };

// "text" or "json"; InvalidArgument naming both otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
// Sets the format of this process, and the name its JSON lines carry as
// "process" ("head", "worker"). Call once, before other threads log.
void SetLogFormat(LogFormat format, std::string process);
LogFormat GetLogFormat();

// A message a command writes on stderr for its user ("causeway head:
// cannot listen on ...\n"): in text as formatted, in json as one object
// (the message without its final newline). Printed whatever the level.
void PrintUserMessage(LogSeverity severity, const char* format, ...)
    ABSL_PRINTF_ATTRIBUTE(2, 3);
// A line another process wrote (a child whose output we pass on): text
// "[pid P] line"; json: the line itself when it is a JSON object already
// (a child of ours logging JSON), else wrapped as an INFO message with
// "child_pid".
void RelayChildLine(int pid, absl::string_view line);
// A message from a library's own logger (gRPC) in the current format.
void WriteLibraryLog(LogSeverity severity, const char* file, int line,
                     absl::string_view message);

}  // namespace causeway

#define CW_LOG_SEVERITY_INFO ::causeway::internal::LogSeverity::kInfo
#define CW_LOG_SEVERITY_WARNING ::causeway::internal::LogSeverity::kWarning
#define CW_LOG_SEVERITY_ERROR ::causeway::internal::LogSeverity::kError
#define CW_LOG_SEVERITY_FATAL ::causeway::internal::LogSeverity::kFatal

#define CW_LOG(severity)                                                  \
  if (!::causeway::internal::LogEnabled(CW_LOG_SEVERITY_##severity)) {    \
  } else                                                                  \
    ::causeway::internal::LogMessage(__FILE__, __LINE__,                  \
                                     CW_LOG_SEVERITY_##severity)          \
        .stream()

#define CW_CHECK(cond)                                                    \
  if (cond) {                                                             \
  } else                                                                  \
    ::causeway::internal::LogMessage(__FILE__, __LINE__,                  \
                                     CW_LOG_SEVERITY_FATAL)               \
            .stream()                                                     \
        << "Check failed: " #cond " "

#endif  // CAUSEWAY_BASE_LOGGING_H_
