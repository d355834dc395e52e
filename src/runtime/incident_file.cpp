#include "runtime/incident_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

constexpr const char* kVariable = "KVCANARY_INCIDENT_FILE";

// The errno of the call that just failed, or EIO when the C library left none.
int FailureReason() { return errno != 0 ? errno : EIO; }

// Writes every line through `file` and closes it; 0 on success, else the first FailureReason().
int WriteAndClose(std::FILE* file, const std::vector<std::string>& lines) {
  int reason = 0;
  for (const std::string& line : lines) {
    if (std::fwrite(line.data(), 1, line.size(), file) != line.size() ||
        std::fputc('\n', file) == EOF) {
      reason = FailureReason();
      break;
    }
  }
  // Buffered bytes reach the disk only here: a full disk shows up at the flush or the close.
  if (reason == 0 && std::fflush(file) != 0) reason = FailureReason();
  if (std::fclose(file) != 0 && reason == 0) reason = FailureReason();
  return reason;
}

}  // namespace

IncidentFile::IncidentFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  errno = 0;
  std::FILE* file = std::fopen(path_.c_str(), "a");
  if (file == nullptr) {
    ThrowError("kv-canary: ", kVariable, " (Config::incident_file) '", path_,
               "' cannot be opened for append: ", std::strerror(errno),
               "; point it at a writable directory or leave it unset");
  }
  std::fclose(file);
}

std::optional<std::string> IncidentFile::Append(const std::vector<std::string>& lines) {
  if (path_.empty() || lines.empty()) return std::nullopt;
  errno = 0;
  std::FILE* file = std::fopen(path_.c_str(), "a");
  const int reason = file == nullptr ? FailureReason() : WriteAndClose(file, lines);
  if (reason == 0) return std::nullopt;
  failures_ += 1;
  if (failures_ != next_reported_failure_) return std::nullopt;
  if (next_reported_failure_ <= std::numeric_limits<int64_t>::max() / 10) {
    next_reported_failure_ *= 10;
  }
  return "kv-canary: could not append " + std::to_string(lines.size()) + " incident(s) to " +
         kVariable + " '" + path_ + "': " + std::strerror(reason) + " (failure " +
         std::to_string(failures_) + "; failures are reported at the 1st, 10th, 100th, ...)";
}

}  // namespace kvcanary::runtime
