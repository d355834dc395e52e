// The file behind `--json PATH`: opened before the run, so a path that cannot be written fails in
// a second rather than after the run, and written at the end with every failure reported with its
// reason (strerror), for the caller to turn into exit status 3.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

namespace kvcanary::cli {

class ReportFile {
 public:
  // Opens (creates or truncates) `path` for writing. On failure returns nullptr and sets `error`
  // to "--json: cannot write PATH: <reason>".
  static std::unique_ptr<ReportFile> Open(const std::string& path, std::string* error);

  ~ReportFile();
  ReportFile(const ReportFile&) = delete;
  ReportFile& operator=(const ReportFile&) = delete;

  // Writes `text`, flushes and closes the file. False with `error` set to "--json: writing PATH
  // failed: <reason>" when any of them fails (a full disk shows up here, not at Open).
  bool WriteAndClose(const std::string& text, std::string* error);

 private:
  ReportFile(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  std::FILE* file_;
};

}  // namespace kvcanary::cli
