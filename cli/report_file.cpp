#include "cli/report_file.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvcanary::cli {

std::unique_ptr<ReportFile> ReportFile::Open(const std::string& path, std::string* error) {
  errno = 0;
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    *error = "--json: cannot write " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<ReportFile>(new ReportFile(path, file));
}

ReportFile::~ReportFile() {
  if (file_ != nullptr) std::fclose(file_);
}

bool ReportFile::WriteAndClose(const std::string& text, std::string* error) {
  errno = 0;
  const bool written = std::fwrite(text.data(), 1, text.size(), file_) == text.size() &&
                       std::fflush(file_) == 0;
  int reason = errno;
  // fclose both reports a late write error and releases the file, whatever came before.
  const bool closed = std::fclose(file_) == 0;
  if (written && !closed) reason = errno;
  file_ = nullptr;
  if (written && closed) return true;
  *error = "--json: writing " + path_ + " failed: " + std::strerror(reason != 0 ? reason : EIO);
  return false;
}

}  // namespace kvcanary::cli
