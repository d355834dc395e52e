// `kvcanary sim`: builds the options of each scenario (its preset, then the flags given), runs it,
// prints the report.
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/report_file.h"
#include "sim/progress.h"
#include "sim/report.h"
#include "sim/report_json.h"
#include "sim/run_sim.h"
#include "sim/sim_flags.h"
#include "sim/sim_options.h"

namespace kvcanary::cli {
namespace {

using sim::SimOptions;

// The flags as given: the text of each table flag (parsed by SetFlag once parsing is over, so
// every flag gets the same strict rules) and the switches, which CLI11 sets directly.
struct GivenFlags {
  std::string scenario = "default";
  bool quiet = false;
  std::vector<std::string> texts = std::vector<std::string>(sim::SimFlagTable().size());
  std::vector<CLI::Option*> options = std::vector<CLI::Option*>(sim::SimFlagTable().size());
  SimOptions switches;
};

int Fail(int status, const std::string& message) {
  std::cerr << "kvcanary sim: " << message << std::endl;
  return status;
}

// One CLI11 option per row of the flag table; the help shows the row's range and the default
// scenario's value.
void AddTableFlags(CLI::App* app, GivenFlags* flags) {
  const SimOptions defaults;
  const std::vector<sim::SimFlag>& table = sim::SimFlagTable();
  for (size_t i = 0; i < table.size(); ++i) {
    const sim::SimFlag& flag = table[i];
    const std::string name = std::string("--") + flag.name;
    std::string help = flag.help;
    if (flag.kind == sim::FlagKind::kInteger) help += ", in " + sim::FlagRange(flag);
    if (flag.kind == sim::FlagKind::kSwitch) {
      // `--name` sets the field, `--no-name` clears it (a preset may have turned it on).
      flags->options[i] = app->add_flag(name + ",!--no-" + flag.name,
                                        flags->switches.*flag.toggle, help);
    } else {
      const bool number = flag.kind == sim::FlagKind::kInteger || flag.kind == sim::FlagKind::kSeed;
      flags->options[i] = app->add_option(name, flags->texts[i], help)
                              ->type_name(number ? "N" : flag.values)
                              ->default_str(sim::FlagValue(flag, defaults));
    }
  }
}

// The table flags given on the command line, parsed over the default options. Throws UsageError
// for the first bad one.
SimOptions ParseGiven(const GivenFlags& flags) {
  SimOptions given = flags.switches;
  const std::vector<sim::SimFlag>& table = sim::SimFlagTable();
  for (size_t i = 0; i < table.size(); ++i) {
    if (flags.options[i]->count() == 0 || table[i].kind == sim::FlagKind::kSwitch) continue;
    sim::SetFlag(table[i], flags.texts[i], given);
  }
  return given;
}

// Every scenario's options, validated before the first one runs, so a bad flag costs nothing.
std::vector<SimOptions> BuildRuns(const GivenFlags& flags) {
  const SimOptions given = ParseGiven(flags);
  const std::vector<sim::SimFlag>& table = sim::SimFlagTable();
  std::vector<SimOptions> runs;
  const std::vector<std::string> names = sim::ScenariosToRun(flags.scenario);
  for (const std::string& name : names) {
    SimOptions options = sim::ScenarioPreset(name);
    for (size_t i = 0; i < table.size(); ++i) {
      if (flags.options[i]->count() > 0) sim::CopyFlag(table[i], given, options);
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

int RunSim(const GivenFlags& flags) {
  std::vector<SimOptions> runs;
  try {
    runs = BuildRuns(flags);
  } catch (const sim::UsageError& error) {
    return Fail(kExitUsage, error.what());
  }
  const std::string json_path = runs.front().json_path;  // a flag: the same in every run
  std::unique_ptr<ReportFile> json;
  if (!json_path.empty()) {
    // Opened before the runs, so a bad path fails now rather than after them.
    std::string error;
    json = ReportFile::Open(json_path, &error);
    if (json == nullptr) return Fail(kExitRuntime, error);
  }
  std::vector<sim::ScenarioReport> reports;
  for (const SimOptions& options : runs) {
    try {
      reports.push_back(RunOne(options, flags.quiet));
    } catch (const std::bad_alloc&) {
      return Fail(kExitRuntime, "scenario " + options.scenario + ": out of memory");
    } catch (const std::exception& error) {
      return Fail(kExitRuntime, "scenario " + options.scenario + ": " + error.what());
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
  if (json != nullptr) {
    std::ostringstream text;
    sim::WriteReportJson(text, reports);
    std::string error;
    if (!json->WriteAndClose(text.str(), &error)) return Fail(kExitRuntime, error);
  }
  return sim::ExitCode(reports);
}

}  // namespace

Command AddSimCommand(CLI::App& app) {
  auto flags = std::make_shared<GivenFlags>();
  GivenFlags* f = flags.get();
  CLI::App* sim = app.add_subcommand(
      "sim",
      "Serve a seeded workload through a simulated engine, inject KV-cache faults and "
      "report what the canary detected (exit 0: every fault detected, no false positive)");
  sim->footer(
      "Each scenario starts from its preset; the flags given override it. Defaults shown are the "
      "default scenario's. Exit status: 0 pass, 1 an undetected fault or a false positive, 2 bad "
      "arguments, 3 a run-time error (out of memory, an unwritable --json file).");
  std::string scenarios;
  for (const std::string& name : sim::PresetNames()) scenarios += name + ", ";
  sim->add_option("--scenario", f->scenario, "Preset: " + scenarios + "or all (each in turn)")
      ->capture_default_str();
  AddTableFlags(sim, f);
  sim->add_flag("--quiet", f->quiet, "Print only the PASS/FAIL line of each scenario");
  return Command{sim, [flags] { return RunSim(*flags); }};
}

}  // namespace kvcanary::cli
