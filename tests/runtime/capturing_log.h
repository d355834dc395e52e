// A log sink that keeps every line, so runtime tests can assert on what was logged.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "kvcanary/runtime/log.h"

namespace kvcanary::runtime::testing {

// Collects log lines so tests can assert on them.
class CapturingLog : public LogSink {
 public:
  void Log(LogLevel level, const std::string& message) override {
    lines.push_back(std::string(LogLevelName(level)) + " " + message);
    if (throws) throw std::runtime_error("the test's sink throws");
  }
  bool Contains(const std::string& text) const {
    for (const std::string& line : lines) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::string> lines;
  bool throws = false;  // after recording each line: an engine's sink that fails
};

}  // namespace kvcanary::runtime::testing
