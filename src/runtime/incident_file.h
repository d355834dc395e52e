// The incident file (KVCANARY_INCIDENT_FILE, Config::incident_file): one JSON line per shown
// violation, appended. Checked at install, so a path that cannot be written refuses the install
// instead of losing every incident later; a write that still fails (a full disk, a file made
// read-only) is reported with its reason, at the 1st, 10th, 100th... failure, so a broken disk
// cannot flood the log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvcanary::runtime {

class IncidentFile {
 public:
  IncidentFile() = default;  // off
  // An empty `path` is off. Otherwise opens `path` for append (creating it, never truncating) and
  // closes it again; throws kvcanary::Error naming KVCANARY_INCIDENT_FILE, the path and the
  // reason (strerror) when that fails: a directory that does not exist or cannot be written.
  explicit IncidentFile(std::string path);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Failed appends since install.
  int64_t failures() const { return failures_; }

  // Appends each line and a newline. The file is opened per call, so an external rotation or
  // truncation is honoured and several ranks may share one file line by line. Returns the
  // warning to log when this append failed and is the 1st, 10th, 100th... failure; nullopt
  // otherwise (a success, or a failure not reported).
  std::optional<std::string> Append(const std::vector<std::string>& lines);

 private:
  std::string path_;
  int64_t failures_ = 0;
  int64_t next_reported_failure_ = 1;  // 1, 10, 100, ...
};

}  // namespace kvcanary::runtime
