#include "causeway/base/logging.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace causeway::internal {
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

int MinLevel() {
  static const int level = [] {
    const char* env = std::getenv("CAUSEWAY_LOG_LEVEL");
    return env == nullptr ? 1 : std::atoi(env);  // Default: warnings and up.
  }();
  return level;
}

}  // namespace

bool LogEnabled(LogSeverity severity) {
  return static_cast<int>(severity) >= MinLevel();
}

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : severity_(severity) {
  const char* base = std::strrchr(file, '/');
  stream_ << SeverityLetter(severity) << " " << (base ? base + 1 : file) << ":"
          << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << "\n";
  std::string text = stream_.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (severity_ == LogSeverity::kFatal) std::abort();
}

}  // namespace causeway::internal
