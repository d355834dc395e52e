// The timing-jitter fuzzer's settings: defaults, each variable parsed strictly and range-checked
// under its own name, Validate under the field's name, and the refusal of mode none.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kvcanary/runtime/config.h"
#include "kvcanary/spin_wait.h"
#include "runtime/error_message.h"

namespace kvcanary::runtime {
namespace {

// The process environment never leaks in: only the listed variables are set, mode log included
// (so that only the jitter settings can refuse).
Config WithLog(std::map<std::string, std::string> values) {
  values.emplace("KVCANARY_MODE", "log");
  return Config::FromEnv([values](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  });
}

TEST(JitterConfig, DefaultsAreOffHalfHundredThousandSeedZero) {
  const Config config = WithLog({});
  EXPECT_FALSE(config.jitter_enabled);
  EXPECT_EQ(config.jitter_per_slot_fire_prob, 0.5);
  EXPECT_EQ(config.jitter_max_cycles, 100000);
  EXPECT_EQ(config.jitter_seed, 0u);
}

TEST(JitterConfig, EveryVariableIsHonoured) {
  const Config config = WithLog({{"KVCANARY_JITTER_ENABLED", " ON "},
                                 {"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "0.25"},
                                 {"KVCANARY_JITTER_MAX_CYCLES", "+4096"},
                                 {"KVCANARY_JITTER_SEED", "18446744073709551615"}});
  EXPECT_TRUE(config.jitter_enabled);
  EXPECT_EQ(config.jitter_per_slot_fire_prob, 0.25);
  EXPECT_EQ(config.jitter_max_cycles, 4096);
  EXPECT_EQ(config.jitter_seed, ~uint64_t{0});
  // A negative seed is the same 64-bit pattern, like KVCANARY_PERTURB_SEED's.
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_SEED", "-1"}}).jitter_seed, ~uint64_t{0});
  // Empty means unset.
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_MAX_CYCLES", "  "}}).jitter_max_cycles, 100000);
}

TEST(JitterConfig, ValuesAreParsedWhole) {
  const char* const cases[][3] = {
      {"KVCANARY_JITTER_ENABLED", "enabled", "a boolean"},
      {"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "50%", "a number"},
      {"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "nan", "a number"},
      {"KVCANARY_JITTER_MAX_CYCLES", "1e5", "an integer"},
      {"KVCANARY_JITTER_MAX_CYCLES", "100000.0", "an integer"},
      {"KVCANARY_JITTER_SEED", "0x10", "an integer"},
  };
  for (const auto& [var, value, kind] : cases) {
    EXPECT_EQ(ErrorMessage([&] { WithLog({{var, value}}); }),
              "kv-canary: " + std::string(var) + " must be " + kind + ", got '" + value + "'");
  }
}

TEST(JitterConfig, ProbabilityAndMaxCyclesAreRangeCheckedByVariable) {
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "0"}}).jitter_per_slot_fire_prob, 0);
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "1"}}).jitter_per_slot_fire_prob, 1);
  EXPECT_EQ(ErrorMessage([] { WithLog({{"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "1.5"}}); }),
            "kv-canary: KVCANARY_JITTER_PER_SLOT_FIRE_PROB must be in [0, 1], got 1.5");
  EXPECT_EQ(ErrorMessage([] { WithLog({{"KVCANARY_JITTER_PER_SLOT_FIRE_PROB", "-0.1"}}); }),
            "kv-canary: KVCANARY_JITTER_PER_SLOT_FIRE_PROB must be in [0, 1], got -0.1");
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_MAX_CYCLES", "1"}}).jitter_max_cycles, 1);
  EXPECT_EQ(WithLog({{"KVCANARY_JITTER_MAX_CYCLES", std::to_string(kMaxSpinWaitCycles)}})
                .jitter_max_cycles,
            kMaxSpinWaitCycles);
  EXPECT_EQ(ErrorMessage([] { WithLog({{"KVCANARY_JITTER_MAX_CYCLES", "0"}}); }),
            "kv-canary: KVCANARY_JITTER_MAX_CYCLES must be in [1, 100000000], got 0");
  EXPECT_EQ(ErrorMessage([] { WithLog({{"KVCANARY_JITTER_MAX_CYCLES", "100000001"}}); }),
            "kv-canary: KVCANARY_JITTER_MAX_CYCLES must be in [1, 100000000], got 100000001");
}

TEST(JitterConfig, ValidateNamesTheFields) {
  Config config;
  config.mode = Mode::kLog;
  config.jitter_max_cycles = 0;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: jitter_max_cycles must be in [1, 100000000], got 0");
  config.jitter_max_cycles = 1;
  config.jitter_per_slot_fire_prob = 2;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: jitter_per_slot_fire_prob must be in [0, 1], got 2");
}

TEST(JitterConfig, EnabledWithModeNoneIsRefused) {
  const auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "KVCANARY_JITTER_ENABLED") return "1";
    return std::nullopt;  // mode none, the default
  };
  const std::string refused =
      "kv-canary: jitter_enabled requires mode in {log, raise}, got mode none";
  EXPECT_EQ(ErrorMessage([&] { Config::FromEnv(env); }), refused);
  Config config;
  config.jitter_enabled = true;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }), refused);
  for (const Mode mode : {Mode::kLog, Mode::kRaise}) {
    config.mode = mode;
    EXPECT_NO_THROW(config.Validate()) << ModeName(mode);
  }
  // Disabled, mode none stays valid whatever the other jitter settings say.
  config.mode = Mode::kNone;
  config.jitter_enabled = false;
  EXPECT_NO_THROW(config.Validate());
}

TEST(JitterConfig, ToStringShowsEveryJitterField) {
  Config config;
  config.jitter_enabled = true;
  config.jitter_per_slot_fire_prob = 0.75;
  config.jitter_max_cycles = 77;
  config.jitter_seed = 9;
  EXPECT_NE(config.ToString().find(", jitter_enabled=true, jitter_per_slot_fire_prob=0.75, "
                                   "jitter_max_cycles=77, jitter_seed=9)"),
            std::string::npos)
      << config.ToString();
}

}  // namespace
}  // namespace kvcanary::runtime
