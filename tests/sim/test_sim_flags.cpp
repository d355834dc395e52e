// Tests for sim/sim_flags: the flag table, strict parsing of each kind, and docs/sim.md listing the
// table's ranges.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "sim/sim_flags.h"

namespace kvcanary::sim {
namespace {

const SimFlag& Flag(const std::string& name) {
  for (const SimFlag& flag : SimFlagTable()) {
    if (name == flag.name) return flag;
  }
  throw std::runtime_error("no flag " + name);
}

// The UsageError SetFlag throws for `text`, or "" when it accepts it.
std::string SetError(const std::string& name, const std::string& text, SimOptions& options) {
  try {
    SetFlag(Flag(name), text, options);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

TEST(SimFlags, NamesAreUniqueAndEveryRowSetsOneField) {
  std::set<std::string> names;
  for (const SimFlag& flag : SimFlagTable()) {
    EXPECT_TRUE(names.insert(flag.name).second) << flag.name;
    const int fields = (flag.integer != nullptr) + (flag.seed != nullptr) +
                       (flag.text != nullptr) + (flag.toggle != nullptr);
    EXPECT_EQ(fields, 1) << flag.name;
    if (flag.kind == FlagKind::kInteger) {
      EXPECT_LE(flag.min, flag.max) << flag.name;
    }
  }
}

TEST(SimFlags, TheDefaultOptionsAreInsideEveryRange) {
  const SimOptions defaults;
  for (const SimFlag& flag : SimFlagTable()) {
    if (flag.kind != FlagKind::kInteger) continue;
    EXPECT_GE(defaults.*flag.integer, flag.min) << flag.name;
    EXPECT_LE(defaults.*flag.integer, flag.max) << flag.name;
  }
}

TEST(SimFlags, IntegersMustBeWholeDecimalsInRange) {
  SimOptions o;
  EXPECT_EQ(SetError("steps", "1000000", o), "");
  EXPECT_EQ(o.steps, 1000000);
  for (const char* bad : {"1000001", "8589934592", "99999999999999999999", "-1", "12x", " 5", "",
                          "1e3", "0x10", "nan", "inf"}) {
    EXPECT_EQ(SetError("steps", bad, o),
              std::string("--steps must be an integer in [0, 1000000], got '") + bad + "'");
  }
  EXPECT_EQ(o.steps, 1000000) << "a rejected value changes nothing";
}

TEST(SimFlags, FaultRateAndBytesPerTokenHaveUpperBounds) {
  SimOptions o;
  EXPECT_EQ(SetError("fault-rate", "1e9", o),
            "--fault-rate must be an integer in [0, 10000], got '1e9'");
  EXPECT_EQ(SetError("fault-rate", "1000000000", o),
            "--fault-rate must be an integer in [0, 10000], got '1000000000'");
  EXPECT_EQ(SetError("bytes-per-token", "65552", o),
            "--bytes-per-token must be an integer in [16, 65536], got '65552'");
  EXPECT_EQ(o.fault_rate, SimOptions().fault_rate);
}

TEST(SimFlags, HoldBackIsAnIntegerFrom0To64) {
  SimOptions o;
  EXPECT_EQ(SetError("hold-back", "0", o), "");
  EXPECT_EQ(o.hold_back, 0);
  EXPECT_EQ(SetError("hold-back", "64", o), "");
  EXPECT_EQ(o.hold_back, 64);
  for (const char* bad : {"-1", "65", "x", "", "1.5"}) {
    EXPECT_EQ(SetError("hold-back", bad, o),
              std::string("--hold-back must be an integer in [0, 64], got '") + bad + "'");
  }
  EXPECT_EQ(o.hold_back, 64) << "a rejected value changes nothing";
  EXPECT_EQ(FlagRange(Flag("hold-back")), "[0, 64]");
}

TEST(SimFlags, SeedTakesAnyUint64AndNothingElse) {
  SimOptions o;
  EXPECT_EQ(SetError("seed", "18446744073709551615", o), "");
  EXPECT_EQ(o.seed, UINT64_MAX);
  EXPECT_NE(SetError("seed", "18446744073709551616", o), "");
  EXPECT_NE(SetError("seed", "-1", o), "");
  EXPECT_EQ(o.seed, UINT64_MAX);
}

TEST(SimFlags, EmptyPathsAndChoicesAreRejected) {
  SimOptions o;
  EXPECT_EQ(SetError("json", "", o), "--json must be a non-empty PATH, got ''");
  EXPECT_EQ(SetError("mode", "", o), "--mode must be a non-empty none|log|raise, got ''");
  EXPECT_EQ(SetError("json", "/tmp/r.json", o), "");
  EXPECT_EQ(o.json_path, "/tmp/r.json");
}

TEST(SimFlags, CopyFlagMovesOnlyItsField) {
  SimOptions given;
  SetFlag(Flag("layers"), "7", given);
  SetFlag(Flag("seed"), "9", given);
  SimOptions preset = ScenarioPreset("offload");
  CopyFlag(Flag("layers"), given, preset);
  EXPECT_EQ(preset.num_layers, 7);
  EXPECT_EQ(preset.seed, SimOptions().seed);
  EXPECT_TRUE(preset.host_tier);
  EXPECT_EQ(FlagValue(Flag("layers"), preset), "7");
}

TEST(SimFlags, ValidateOptionsEnforcesTheMaxima) {
  SimOptions o;
  o.fault_rate = 1'000'000'000;
  EXPECT_THROW(ValidateOptions(o), UsageError);
  try {
    ValidateOptions(o);
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(), "--fault-rate must be at most 10000, got 1000000000");
  }
}

// docs/sim.md lists every flag with the table's range, so the two cannot drift apart.
TEST(SimFlags, DocsListEveryFlagWithItsRange) {
  std::ifstream file(KVC_SOURCE_DIR "/docs/sim.md");
  ASSERT_TRUE(file) << "cannot read docs/sim.md";
  std::stringstream docs;
  docs << file.rdbuf();
  for (const SimFlag& flag : SimFlagTable()) {
    const std::string row = std::string("`--") + flag.name;
    const size_t at = docs.str().find("| " + row);
    ASSERT_NE(at, std::string::npos) << "docs/sim.md has no row for --" << flag.name;
    const std::string line = docs.str().substr(at, docs.str().find('\n', at) - at);
    std::string range;  // as a markdown cell writes it: '|' escaped
    for (char c : FlagRange(flag)) range += c == '|' ? std::string("\\|") : std::string(1, c);
    EXPECT_NE(line.find("| " + range + " |"), std::string::npos)
        << "the row of --" << flag.name << " does not give " << range << ": " << line;
  }
}

}  // namespace
}  // namespace kvcanary::sim
