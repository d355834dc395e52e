// Where the runtime's log lines go. The frozen lines (SGLang's wording, byte for byte) are the message text; the
// level travels beside it so an engine can route them into its own logger.
#pragma once

#include <string>

namespace kvcanary::runtime {

enum class LogLevel { kInfo, kWarning, kError };

// "INFO", "WARNING", "ERROR".
const char* LogLevelName(LogLevel level);

class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Log(LogLevel level, const std::string& message) = 0;
};

// Writes "[kvcanary] LEVEL message" lines to stderr. The sink used when an engine gives none.
LogSink& StderrLogSink();

}  // namespace kvcanary::runtime
