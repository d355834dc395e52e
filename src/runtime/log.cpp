#include "kvcanary/runtime/log.h"

#include <cstdio>

namespace kvcanary::runtime {

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

namespace {

class StderrSink final : public LogSink {
 public:
  void Log(LogLevel level, const std::string& message) override {
    std::fprintf(stderr, "[kvcanary] %s %s\n", LogLevelName(level), message.c_str());
  }
};

}  // namespace

LogSink& StderrLogSink() {
  static StderrSink sink;
  return sink;
}

}  // namespace kvcanary::runtime
