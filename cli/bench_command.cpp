// `kvcanary bench`: converts the arguments, runs the suite, prints the table.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include "bench/checks.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "cli/command.h"
#include "cli/report_file.h"
#include "kvcanary/format.h"

namespace kvcanary::cli {
namespace {

struct BenchOptions {
  std::string device = "cpu";
  std::string suite = "standard";
  std::string json_path;
  int reps = 0;  // 0: the suite's default
  int64_t fingerprint_layers = 1;
  std::vector<std::string> cases;  // empty: every case of the suite
};

int Fail(int status, const std::string& message) {
  std::cerr << "kvcanary bench: " << message << std::endl;
  return status;
}

// `--json ""` would otherwise write nothing and say nothing.
const CLI::Validator NonEmptyPath(
    [](const std::string& path) {
      return path.empty() ? std::string("must be a non-empty PATH, got ''") : std::string();
    },
    "PATH");

// Progress goes to stderr only when a person watches it: redirected output stays clean.
std::function<void(const std::string&)> ProgressPrinter() {
  if (isatty(STDERR_FILENO) == 0) return nullptr;
  return [](const std::string& what) {
    std::fprintf(stderr, "\r\033[K%s", what.c_str());
    std::fflush(stderr);
  };
}

int RunBench(const BenchOptions& options) {
  std::string why_not;
  std::unique_ptr<bench::BenchDevice> device = bench::MakeBenchDevice(options.device, &why_not);
  if (device == nullptr) return Fail(kExitUsage, why_not);
  bench::Suite suite = bench::SuiteByName(options.suite);
  suite.fingerprint_layers = options.fingerprint_layers;
  try {
    if (!options.cases.empty()) bench::KeepCases(suite, options.cases);
  } catch (const std::invalid_argument& error) {
    return Fail(kExitUsage, error.what());
  }
  std::unique_ptr<ReportFile> json;
  if (!options.json_path.empty()) {
    // Opened before hours of timing, so a bad path fails now.
    std::string error;
    json = ReportFile::Open(options.json_path, &error);
    if (json == nullptr) return Fail(kExitRuntime, error);
  }
  try {
    bench::RunOptions run;
    run.device_name = options.device;
    run.reps = options.reps;
    run.progress = ProgressPrinter();
    const bench::BenchResults results = bench::RunSuite(*device, suite, run);
    bench::PrintTable(std::cout, results);
    if (json != nullptr) {
      std::ostringstream text;
      bench::WriteJson(text, results);
      std::string error;
      if (!json->WriteAndClose(text.str(), &error)) return Fail(kExitRuntime, error);
    }
    return 0;
  } catch (const bench::CheckFailed& error) {
    return Fail(kExitFailure, std::string("output check failed: ") + error.what());
  } catch (const std::bad_alloc&) {
    return Fail(kExitRuntime, "out of memory (suite " + options.suite + ")");
  } catch (const std::exception& error) {
    return Fail(kExitRuntime, error.what());
  }
}

}  // namespace

Command AddBenchCommand(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench", "Time plan, verify, write and the whole canary step on fixed shapes");
  bench->footer(
      "Exit status: 0 done, 1 an output check failed, 2 bad arguments or a device this build "
      "cannot bench, 3 a run-time error (out of memory, an unwritable --json file).");
  bench->add_option("--device", options->device, "Where the ops run")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench->add_option("--suite", options->suite, "Shapes: standard, or quick at 1/16 of the sizes")
      ->check(CLI::IsMember(bench::SuiteNames()))
      ->capture_default_str();
  bench->add_option("--json", options->json_path, "Also write the numbers as JSON to PATH")
      ->check(NonEmptyPath);
  bench
      ->add_option("--reps", options->reps,
                   "Timed repetitions per loop, >= 20 (default: 50 quick, 20 standard)")
      ->check(CLI::Range(20, 1000000));
  bench
      ->add_option("--fingerprint-layers", options->fingerprint_layers,
                   "Layers the `partial` rows fingerprint per slot: 1 (layer 0) up to 1024, each "
                   "layer a pool-sized K and V allocation")
      ->check(CLI::Range(int64_t{1}, kMaxRealKvLayers))
      ->capture_default_str();
  bench
      ->add_option("--cases", options->cases,
                   "Only these cases, by name (comma-separated), e.g. decode-256,decode-256-k8")
      ->delimiter(',');
  return Command{bench, [options] { return RunBench(*options); }};
}

}  // namespace kvcanary::cli
