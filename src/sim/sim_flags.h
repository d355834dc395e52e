// The flags of `kvcanary sim`, in one table: each flag's name, the SimOptions field it sets, its
// accepted range and its help. The CLI builds its options from this table, ValidateOptions checks
// the upper bounds from it, and docs/sim.md lists the same ranges (a test compares them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/sim_options.h"

namespace kvcanary::sim {

enum class FlagKind {
  kInteger,  // a decimal int64 in [min, max]
  kSeed,     // a decimal uint64, any value
  kChoice,   // a non-empty word (or list) that ValidateOptions checks against `values`
  kPath,     // a non-empty file path
  kSwitch,   // --name / --no-name
};

struct SimFlag {
  const char* name;  // without the dashes: "steps"
  FlagKind kind;
  int64_t SimOptions::*integer = nullptr;  // kInteger
  uint64_t SimOptions::*seed = nullptr;    // kSeed
  std::string SimOptions::*text = nullptr;  // kChoice, kPath
  bool SimOptions::*toggle = nullptr;       // kSwitch
  int64_t min = 0;                          // kInteger: the accepted range, both ends included
  int64_t max = 0;
  const char* values = "";  // kChoice: what ValidateOptions accepts, for the help ("cpu|cuda")
  const char* help = "";
};

// Every flag that overrides a SimOptions field, in the order `--help` lists them.
const std::vector<SimFlag>& SimFlagTable();

// Parses `text` as the value of `flag` and stores it in `options`. The whole string must parse:
// integers are decimal, in [min, max] (a value too large for int64 is out of range, never
// truncated); a seed is a decimal uint64; a path and a choice must not be empty; a switch takes
// "true" or "false". Throws UsageError naming the flag, the range and the text; a rejected value
// leaves `options` unchanged.
void SetFlag(const SimFlag& flag, std::string_view text, SimOptions& options);

// Copies the field of `flag` from `from` to `to` (a flag given on the command line over a preset).
void CopyFlag(const SimFlag& flag, const SimOptions& from, SimOptions& to);

// The field's value in `options` as the command line writes it ("3000", "cpu", "true").
std::string FlagValue(const SimFlag& flag, const SimOptions& options);

// The accepted values for the help and the docs: "[0, 1000000]", "cpu|cuda", "PATH", ...
std::string FlagRange(const SimFlag& flag);

// Throws UsageError for the first integer field above its flag's maximum ("--steps must be at most
// 1000000, got 8589934592"). The lower bounds stay with ValidateOptions' own checks, which know
// when a field is unused (--host-slots without --host-tier).
void CheckFlagMaxima(const SimOptions& options);

}  // namespace kvcanary::sim
