// A subcommand of the kvcanary command: each lives in cli/<name>_command.cpp, registers its
// options on the app and returns how to run it once parsing has succeeded.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kvcanary::cli {

// The exit statuses of every subcommand (docs/sim.md; `kvcanary bench --help`):
// 0 the run passed.
// A failed run: a sim fault undetected or a false positive, a bench output check that failed.
inline constexpr int kExitFailure = 1;
// Bad arguments (and a device this build cannot run on): nothing ran.
inline constexpr int kExitUsage = 2;
// The run could not be carried out: an allocation failed, an op threw, the --json file could not
// be written.
inline constexpr int kExitRuntime = 3;

struct Command {
  CLI::App* app = nullptr;   // the subcommand; parsed() says whether it was given
  std::function<int()> run;  // runs it with the parsed options; returns the exit status
};

// `kvcanary bench [--device cpu|cuda] [--suite quick|standard] [--json PATH] [--reps N]`.
Command AddBenchCommand(CLI::App& app);

// `kvcanary sim [--scenario NAME] [flags overriding the preset]`.
Command AddSimCommand(CLI::App& app);

}  // namespace kvcanary::cli
