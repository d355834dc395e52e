// `kvcanary sim`: builds the options of each scenario (its preset, then the flags given), runs it,
// prints the report (spec/sim.md).
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "sim/progress.h"
#include "sim/report.h"
#include "sim/report_json.h"
#include "sim/run_sim.h"
#include "sim/sim_options.h"

namespace kvcanary::cli {
namespace {

using sim::SimOptions;

// A flag that overrides one field of the preset: CLI11 parses into `given`, and only flags that
// appear on the command line are copied over each scenario's preset.
struct Override {
  CLI::Option* option;
  std::function<void(const SimOptions& given, SimOptions& options)> apply;
};

struct SimFlags {
  std::string scenario = "default";
  bool quiet = false;
  SimOptions given;
  std::vector<Override> overrides;
};

int Fail(int status, const std::string& message) {
  std::cerr << "kvcanary sim: " << message << std::endl;
  return status;
}

template <typename T>
CLI::Option* AddOverride(CLI::App* app, SimFlags* flags, const std::string& name,
                         T SimOptions::*field, const std::string& help) {
  CLI::Option* option = app->add_option(name, flags->given.*field, help)->capture_default_str();
  flags->overrides.push_back({option, [field](const SimOptions& given, SimOptions& options) {
                                options.*field = given.*field;
                              }});
  return option;
}

// `--name` sets the field, `--no-name` clears it (a preset may have turned it on).
void AddSwitch(CLI::App* app, SimFlags* flags, const std::string& name, bool SimOptions::*field,
               const std::string& help) {
  CLI::Option* option = app->add_flag("--" + name + ",!--no-" + name, flags->given.*field, help);
  flags->overrides.push_back({option, [field](const SimOptions& given, SimOptions& options) {
                                options.*field = given.*field;
                              }});
}

// Every scenario's options, validated before the first one runs, so a bad flag costs nothing.
std::vector<SimOptions> BuildRuns(const SimFlags& flags) {
  std::vector<SimOptions> runs;
  const std::vector<std::string> names = sim::ScenariosToRun(flags.scenario);
  for (const std::string& name : names) {
    SimOptions options = sim::ScenarioPreset(name);
    for (const Override& override_flag : flags.overrides) {
      if (override_flag.option->count() > 0) override_flag.apply(flags.given, options);
    }
    try {
      sim::ValidateOptions(options);
    } catch (const sim::UsageError& error) {
      if (names.size() == 1) throw;
      throw sim::UsageError("scenario " + name + ": " + error.what());
    }
    runs.push_back(std::move(options));
  }
  return runs;
}

sim::ScenarioReport RunOne(const SimOptions& options, bool quiet) {
  sim::ProgressBar bar("sim " + options.scenario, options.steps,
                       !quiet && sim::ProgressEnabled(options.progress));
  sim::ScenarioReport report =
      sim::RunScenario(options, [&bar](int64_t done, int64_t total, std::string_view status) {
        bar.SetTotal(total);
        bar.Update(done, status);
      });
  bar.Finish();
  return report;
}

int RunSim(const SimFlags& flags) {
  std::vector<SimOptions> runs;
  try {
    runs = BuildRuns(flags);
  } catch (const sim::UsageError& error) {
    return Fail(kExitUsage, error.what());
  }
  const std::string& json_path = flags.given.json_path;
  std::ofstream json;
  if (!json_path.empty()) {
    // Opened before the runs, so a bad path fails now rather than after them.
    json.open(json_path);
    if (!json) return Fail(kExitUsage, "--json: cannot write " + json_path);
  }
  std::vector<sim::ScenarioReport> reports;
  for (const SimOptions& options : runs) {
    try {
      reports.push_back(RunOne(options, flags.quiet));
    } catch (const std::exception& error) {
      return Fail(kExitFailure, "scenario " + options.scenario + ": " + error.what());
    }
    if (flags.quiet) {
      sim::PrintVerdict(std::cout, reports.back());
    } else {
      if (reports.size() > 1) std::cout << "\n";
      sim::PrintReport(std::cout, reports.back());
    }
    std::cout << std::flush;
  }
  if (reports.size() > 1 && !flags.quiet) {
    std::cout << "\nsummary\n\n";
    sim::PrintSummary(std::cout, reports);
  }
  if (json.is_open()) {
    sim::WriteReportJson(json, reports);
    if (!json) return Fail(kExitFailure, "--json: writing " + json_path + " failed");
  }
  return sim::ExitCode(reports);
}

}  // namespace

Command AddSimCommand(CLI::App& app) {
  auto flags = std::make_shared<SimFlags>();
  SimFlags* f = flags.get();
  CLI::App* sim = app.add_subcommand(
      "sim",
      "Serve a seeded workload through a simulated engine, inject KV-cache faults and "
      "report what the canary detected (exit 0: every fault detected, no false positive)");
  sim->footer(
      "Each scenario starts from its preset; the flags given override it. Defaults shown are the "
      "default scenario's. Exit status: 0 pass, 1 an undetected fault or a false positive, 2 bad "
      "arguments.");
  std::string scenarios;
  for (const std::string& name : sim::PresetNames()) scenarios += name + ", ";
  sim->add_option("--scenario", f->scenario, "Preset: " + scenarios + "or all (each in turn)")
      ->capture_default_str();
  AddOverride(sim, f, "--device", &SimOptions::device, "Where the pool and canary live: cpu|cuda");
  AddOverride(sim, f, "--seed", &SimOptions::seed, "Seeds the workload and the faults");
  AddOverride(sim, f, "--steps", &SimOptions::steps, "Outer steps to run (0: no limit)");
  AddOverride(sim, f, "--requests", &SimOptions::num_requests,
              "Stop once this many requests finished (0: no limit)");
  AddOverride(sim, f, "--faults", &SimOptions::faults,
              "Faults to inject: all (those that apply), none, or a comma-separated list");
  AddOverride(sim, f, "--fault-rate", &SimOptions::fault_rate,
              "Injections per enabled fault class");
  AddOverride(sim, f, "--mode", &SimOptions::mode, "Canary mode: none|log|raise");
  AddOverride(sim, f, "--real-data", &SimOptions::real_data, "Real-KV hashing: none|partial|all");
  AddOverride(sim, f, "--sweep-interval", &SimOptions::sweep_interval,
              "Steps between sweeps of cached slots (0: off)");
  AddOverride(sim, f, "--swa-window", &SimOptions::swa_window,
              "Sliding-window layers with this window (0: none)");
  AddOverride(sim, f, "--swa-slots", &SimOptions::swa_num_slots, "Slots of the SWA pool");
  AddSwitch(sim, f, "host-tier", &SimOptions::host_tier,
            "Back evicted prefixes up to a host tier and restore them");
  AddOverride(sim, f, "--host-slots", &SimOptions::host_slots, "Slots of the host tier");
  AddSwitch(sim, f, "pd", &SimOptions::pd, "Prefill/decode disaggregation with KV transfer");
  AddOverride(sim, f, "--num-slots", &SimOptions::num_slots, "Slots of the KV pool");
  AddOverride(sim, f, "--layers", &SimOptions::num_layers, "Layers of the KV pool");
  AddOverride(sim, f, "--bytes-per-token", &SimOptions::bytes_per_token,
              "KV bytes per token per layer, a multiple of 16");
  AddOverride(sim, f, "--max-running", &SimOptions::max_running_reqs, "Requests running at once");
  AddOverride(sim, f, "--context", &SimOptions::max_context_len, "Most tokens of one request");
  AddOverride(sim, f, "--chunk", &SimOptions::chunk_size, "Chunked-prefill chunk size");
  AddOverride(sim, f, "--json", &SimOptions::json_path, "Also write the report as JSON to PATH");
  AddOverride(sim, f, "--progress", &SimOptions::progress,
              "Progress bar on stderr: auto (on a terminal)|on|off");
  sim->add_flag("--quiet", f->quiet, "Print only the PASS/FAIL line of each scenario");
  return Command{sim, [flags] { return RunSim(*flags); }};
}

}  // namespace kvcanary::cli
