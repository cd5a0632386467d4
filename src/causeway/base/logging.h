// Minimal logging: CW_LOG(INFO) << ...; CW_CHECK(cond) << ... for programmer
// errors only. Thread-safe: each message is written with one call.
#ifndef CAUSEWAY_BASE_LOGGING_H_
#define CAUSEWAY_BASE_LOGGING_H_

#include <sstream>

namespace causeway::internal {

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
  std::ostringstream stream_;
};

// Returns true when messages of `severity` are printed (CAUSEWAY_LOG_LEVEL).
bool LogEnabled(LogSeverity severity);

}  // namespace causeway::internal

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
