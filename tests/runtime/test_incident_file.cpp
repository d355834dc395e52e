// Tests for runtime/incident_file: the install-time check of KVCANARY_INCIDENT_FILE and the
// reporting of later write failures (once with the reason, then at the 10th, 100th...).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_message.h"
#include "fake_engine.h"
#include "runtime/incident_file.h"

namespace kvcanary::runtime {
namespace {

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("kvcanary_" + name + "_" + std::to_string(::getpid()) + ".jsonl");
}

TEST(IncidentFile, UnsetIsOffAndWritesNothing) {
  IncidentFile file("");
  EXPECT_FALSE(file.enabled());
  EXPECT_EQ(file.Append({"{}"}), std::nullopt);
  EXPECT_EQ(file.failures(), 0);
}

TEST(IncidentFile, MissingDirectoryIsRefusedWithTheVariablePathAndReason) {
  const std::string path = "/nonexistent-kvcanary-dir/incidents.jsonl";
  EXPECT_EQ(ErrorMessage([&] { IncidentFile file(path); }),
            "kv-canary: KVCANARY_INCIDENT_FILE (Config::incident_file) '" + path +
                "' cannot be opened for append: No such file or directory; point it at a "
                "writable directory or leave it unset");
}

TEST(IncidentFile, CheckAppendsAndNeverTruncates) {
  const std::filesystem::path path = TempPath("incident_check");
  {
    std::ofstream existing(path, std::ios::trunc);
    existing << "{\"earlier\":true}\n";
  }
  IncidentFile file(path.string());
  EXPECT_EQ(file.Append({"{\"a\":1}", "{\"b\":2}"}), std::nullopt);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::filesystem::remove(path);
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"earlier\":true}", "{\"a\":1}", "{\"b\":2}"}));
}

// /dev/full opens for append and fails every write with ENOSPC: a disk that filled up after
// install.
TEST(IncidentFile, WriteFailureIsReportedOnceWithItsReasonThenRateLimited) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  IncidentFile file("/dev/full");
  std::vector<int64_t> reported;
  std::string first;
  for (int64_t attempt = 1; attempt <= 1000; ++attempt) {
    const std::optional<std::string> warning = file.Append({"{\"row\":1}"});
    if (!warning) continue;
    reported.push_back(attempt);
    if (first.empty()) first = *warning;
  }
  EXPECT_EQ(reported, (std::vector<int64_t>{1, 10, 100, 1000}));
  EXPECT_EQ(file.failures(), 1000);
  EXPECT_EQ(first,
            "kv-canary: could not append 1 incident(s) to KVCANARY_INCIDENT_FILE '/dev/full': No "
            "space left on device (failure 1; failures are reported at the 1st, 10th, 100th, ...)");
}

TEST(IncidentFile, InstallRefusesAnUnwritableDirectory) {
  using testing::FakeEngine;
  using testing::FakeEngineOptions;
  FakeEngineOptions options;
  options.config.mode = Mode::kLog;  // mode none installs nothing, so it checks nothing
  options.config.incident_file = "/nonexistent-kvcanary-dir/incidents.jsonl";
  const std::string message = ErrorMessage([&] { FakeEngine engine(options); });
  EXPECT_NE(message.find("kv-canary: KVCANARY_INCIDENT_FILE (Config::incident_file) "
                         "'/nonexistent-kvcanary-dir/incidents.jsonl' cannot be opened for "
                         "append: No such file or directory"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace kvcanary::runtime
