// The kvcanary command. Each subcommand lives in its own cli/<name>_command.cpp and is one line
// in the table below; this file only parses and dispatches.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "kvcanary/version.h"

namespace {

// Help and version print as CLI11 does; every other parse error becomes one line and status 2.
int ReportParseError(const CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(error);
  std::string message = error.what();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::cerr << "kvcanary: " << message << " (run with --help for usage)" << std::endl;
  return kvcanary::cli::kExitUsage;
}

// A command reports its own errors; anything that still escapes it (an allocation that failed
// outside a run) is a run-time error, reported on one line rather than by std::terminate.
int RunCommand(const kvcanary::cli::Command& command) {
  try {
    return command.run();
  } catch (const std::bad_alloc&) {
    std::cerr << "kvcanary: out of memory" << std::endl;
  } catch (const std::exception& error) {
    std::cerr << "kvcanary: " << error.what() << std::endl;
  }
  return kvcanary::cli::kExitRuntime;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvcanary: KV-cache canary tools", "kvcanary"};
  app.set_version_flag("--version", std::string("kvcanary ") + kvcanary::kVersionString);
  app.require_subcommand(1);
  const std::vector<kvcanary::cli::Command> commands = {
#ifdef KVC_HAVE_BENCH
      kvcanary::cli::AddBenchCommand(app),
#endif
      kvcanary::cli::AddSimCommand(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ReportParseError(app, error);
  }
  for (const kvcanary::cli::Command& command : commands) {
    if (command.app->parsed()) return RunCommand(command);
  }
  return kvcanary::cli::kExitUsage;
}
