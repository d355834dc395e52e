// A subcommand of the kvcanary command: each lives in cli/<name>_command.cpp, registers its
// options on the app and returns how to run it once parsing has succeeded.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace kvcanary::cli {

// Exit status for bad arguments (and for a device this build cannot bench).
inline constexpr int kExitUsage = 2;
// Exit status for a failed run (a failed check, an error from an op).
inline constexpr int kExitFailure = 1;

struct Command {
  CLI::App* app = nullptr;   // the subcommand; parsed() says whether it was given
  std::function<int()> run;  // runs it with the parsed options; returns the exit status
};

// `kvcanary bench [--device cpu|cuda] [--suite quick|standard] [--json PATH] [--reps N]`.
Command AddBenchCommand(CLI::App& app);

// `kvcanary sim [--scenario NAME] [flags overriding the preset]` (spec/sim.md).
Command AddSimCommand(CLI::App& app);

}  // namespace kvcanary::cli
