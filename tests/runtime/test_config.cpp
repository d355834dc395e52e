#include "kvcanary/runtime/config.h"

#include <gtest/gtest.h>

#include "runtime/error_message.h"

#include <map>
#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

EnvLookup MapEnv(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const std::string& name) -> std::optional<std::string> {
    const auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Config, ModeAcceptsTrimmedCaseInsensitiveValues) {
  EXPECT_EQ(ParseMode("NONE"), Mode::kNone);
  EXPECT_EQ(ParseMode("  log  "), Mode::kLog);
  EXPECT_EQ(ParseMode("raise"), Mode::kRaise);
}

TEST(Config, ModeRejectsOtherValuesQuotingThem) {
  for (const char* value : {"disabled", "warn", "health_check"}) {
    EXPECT_EQ(ErrorMessage([&] { ParseMode(value); }),
              std::string("kv-canary: mode must be one of none/log/raise, got '") + value + "'");
  }
}

TEST(Config, RealDataMapsToHashModes) {
  EXPECT_EQ(static_cast<int>(ParseRealData("none")), 0);
  EXPECT_EQ(static_cast<int>(ParseRealData("partial")), 1);
  EXPECT_EQ(static_cast<int>(ParseRealData(" ALL ")), 2);
  EXPECT_EQ(ErrorMessage([] { ParseRealData("half"); }),
            "kv-canary: real_data must be one of none/partial/all, got 'half'");
}

TEST(Config, Defaults) {
  const Config config = Config::FromEnv(MapEnv({}));
  EXPECT_EQ(config.mode, Mode::kNone);
  EXPECT_EQ(config.real_data, RealKvHashMode::kNone);
  EXPECT_EQ(config.sweep_interval, 0);
  EXPECT_EQ(config.ring_capacity, 1024);
  EXPECT_EQ(config.stats_print_every_n_steps, 100);
  EXPECT_FALSE(config.enable_write_input_assert);
  EXPECT_FALSE(config.enable_verify_token_assert);
  EXPECT_FALSE(config.enable_token_oracle);
  EXPECT_FALSE(config.enable_mha_v);
  EXPECT_FALSE(config.verify_backup);
  EXPECT_FALSE(config.report_untouched_rows);
  EXPECT_FALSE(config.allreduce_violation_signal);
}

TEST(Config, EnvironmentValuesAreHonoured) {
  const Config config = Config::FromEnv(MapEnv({{"KVCANARY_MODE", "log"},
                                                {"KVCANARY_RING_CAPACITY", "512"},
                                                {"KVCANARY_ENABLE_WRITE_INPUT_ASSERT", "1"},
                                                {"KVCANARY_STATS_PRINT_EVERY_N_STEPS", "50"},
                                                {"KVCANARY_REAL_DATA", "partial"},
                                                {"KVCANARY_SWEEP_INTERVAL", " 8 "},
                                                {"KVCANARY_ENABLE_MHA_V", "Yes"},
                                                {"KVCANARY_REPORT_UNTOUCHED_ROWS", "on"},
                                                {"KVCANARY_ALLREDUCE_VIOLATION_SIGNAL", "true"},
                                                {"KVCANARY_VERIFY_BACKUP", "off"}}));
  EXPECT_EQ(config.mode, Mode::kLog);
  EXPECT_EQ(config.ring_capacity, 512);
  EXPECT_TRUE(config.enable_write_input_assert);
  EXPECT_EQ(config.stats_print_every_n_steps, 50);
  EXPECT_EQ(config.real_data, RealKvHashMode::kPartial);
  EXPECT_EQ(config.sweep_interval, 8);
  EXPECT_TRUE(config.enable_mha_v);
  EXPECT_TRUE(config.report_untouched_rows);
  EXPECT_TRUE(config.allreduce_violation_signal);
  EXPECT_FALSE(config.verify_backup);
}

TEST(Config, EmptyValuesMeanUnset) {
  const Config config = Config::FromEnv(MapEnv(
      {{"KVCANARY_MODE", ""}, {"KVCANARY_RING_CAPACITY", "  "}, {"KVCANARY_ENABLE_MHA_V", ""}}));
  EXPECT_EQ(config.mode, Mode::kNone);
  EXPECT_EQ(config.ring_capacity, 1024);
  EXPECT_FALSE(config.enable_mha_v);
}

TEST(Config, BooleansAcceptEveryListedSpelling) {
  for (const char* value : {"1", "true", "TRUE", " yes ", "on"}) {
    EXPECT_EQ(ParseBool("V", value), std::optional<bool>(true)) << value;
  }
  for (const char* value : {"0", "false", "No", "off "}) {
    EXPECT_EQ(ParseBool("V", value), std::optional<bool>(false)) << value;
  }
  EXPECT_EQ(ParseBool("V", ""), std::nullopt);
}

TEST(Config, UnparsableValuesNameTheVariable) {
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv(MapEnv({{"KVCANARY_ENABLE_MHA_V", "maybe"}}));
            }),
            "kv-canary: KVCANARY_ENABLE_MHA_V must be a boolean, got 'maybe'");
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv(MapEnv({{"KVCANARY_RING_CAPACITY", "12x"}}));
            }),
            "kv-canary: KVCANARY_RING_CAPACITY must be an integer, got '12x'");
  EXPECT_EQ(ErrorMessage([] {
              PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_REQ_TO_TOKEN_PROB", "half"}}));
            }),
            "kv-canary: KVCANARY_PERTURB_REQ_TO_TOKEN_PROB must be a number, got 'half'");
}

TEST(Config, ValidateRejectsInvalidCombinations) {
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv(MapEnv({{"KVCANARY_SWEEP_INTERVAL", "4"}}));
            }),
            "kv-canary: sweep_interval > 0 requires mode in {log, raise}");
  Config config;
  config.mode = Mode::kLog;
  config.sweep_interval = -1;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: sweep_interval must be in [0, 2147483647], got -1");
  config.sweep_interval = 0;
  config.ring_capacity = 0;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: ring_capacity must be in [1, 16777216], got 0");
  config.ring_capacity = 1;
  EXPECT_NO_THROW(config.Validate());
}

TEST(Config, ToStringNamesEveryField) {
  Config config;
  config.mode = Mode::kRaise;
  config.real_data = RealKvHashMode::kAll;
  const std::string text = config.ToString();
  EXPECT_NE(text.find("mode=raise"), std::string::npos) << text;
  EXPECT_NE(text.find("real_data=all"), std::string::npos) << text;
  EXPECT_NE(text.find("ring_capacity=1024"), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce_violation_signal=false"), std::string::npos) << text;
  EXPECT_NE(text.find("fused_verify=true"), std::string::npos) << text;
}

TEST(Config, VerifySampleIsOneUnlessSetAndRangeChecked) {
  EXPECT_EQ(Config::FromEnv(MapEnv({})).verify_sample, 1);
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_VERIFY_SAMPLE", "8"}})).verify_sample, 8);
  EXPECT_EQ(ErrorMessage([] { Config::FromEnv(MapEnv({{"KVCANARY_VERIFY_SAMPLE", "0"}})); }),
            "kv-canary: KVCANARY_VERIFY_SAMPLE must be in [1, 65536], got 0");
  Config config;
  config.verify_sample = 65537;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: verify_sample must be in [1, 65536], got 65537");
  config.verify_sample = 4;
  EXPECT_NE(config.ToString().find(", verify_sample=4,"), std::string::npos);
}

TEST(Config, OnViolationIsLogUnlessSetAndQuarantineNeedsModeLog) {
  EXPECT_EQ(Config::FromEnv(MapEnv({})).on_violation, OnViolation::kLog);
  const Config quarantine = Config::FromEnv(
      MapEnv({{"KVCANARY_MODE", "log"}, {"KVCANARY_ON_VIOLATION", " Quarantine "}}));
  EXPECT_EQ(quarantine.on_violation, OnViolation::kQuarantine);
  EXPECT_FALSE(quarantine.RaisesOnViolation());
  EXPECT_NE(quarantine.ToString().find(", on_violation=quarantine"), std::string::npos);
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_ON_VIOLATION", ""}})).on_violation,
            OnViolation::kLog);
  EXPECT_EQ(ErrorMessage([] { Config::FromEnv(MapEnv({{"KVCANARY_ON_VIOLATION", "drop"}})); }),
            "kv-canary: on_violation must be one of log/raise/quarantine, got 'drop'");
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv(
                  MapEnv({{"KVCANARY_MODE", "raise"}, {"KVCANARY_ON_VIOLATION", "quarantine"}}));
            }),
            "kv-canary: on_violation quarantine requires mode log, got mode raise");
  Config raise_on_log;
  raise_on_log.mode = Mode::kLog;
  raise_on_log.on_violation = OnViolation::kRaise;
  EXPECT_TRUE(raise_on_log.RaisesOnViolation());
  Config none_quarantine;
  none_quarantine.on_violation = OnViolation::kQuarantine;
  EXPECT_EQ(ErrorMessage([&] { none_quarantine.Validate(); }),
            "kv-canary: on_violation quarantine requires mode log, got mode none");
}

TEST(Config, FusedVerifyIsOnUnlessTurnedOff) {
  EXPECT_TRUE(Config::FromEnv(MapEnv({})).fused_verify);
  EXPECT_FALSE(Config::FromEnv(MapEnv({{"KVCANARY_FUSED_VERIFY", "0"}})).fused_verify);
}

TEST(Config, FingerprintLayersIsLayer0UnlessSetToAll) {
  EXPECT_EQ(Config::FromEnv(MapEnv({})).fingerprint_layers, FingerprintLayers::kLayer0);
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_FINGERPRINT_LAYERS", " ALL "}})).fingerprint_layers,
            FingerprintLayers::kAll);
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_FINGERPRINT_LAYERS", ""}})).fingerprint_layers,
            FingerprintLayers::kLayer0);
  EXPECT_EQ(ErrorMessage([] {
              Config::FromEnv(MapEnv({{"KVCANARY_FINGERPRINT_LAYERS", "every"}}));
            }),
            "kv-canary: fingerprint_layers must be one of layer0/all, got 'every'");
  Config config;
  EXPECT_NE(config.ToString().find(", fingerprint_layers=layer0,"), std::string::npos);
  config.fingerprint_layers = FingerprintLayers::kAll;
  EXPECT_NE(config.ToString().find(", fingerprint_layers=all,"), std::string::npos);
  EXPECT_STREQ(FingerprintLayersName(FingerprintLayers::kAll), "all");
}

TEST(Config, IncidentFileIsReadTrimmedAndEmptyMeansOff) {
  EXPECT_EQ(Config::FromEnv(MapEnv({})).incident_file, "");
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_INCIDENT_FILE", "  /tmp/kvc incidents.jsonl "}}))
                .incident_file,
            "/tmp/kvc incidents.jsonl");
  EXPECT_EQ(Config::FromEnv(MapEnv({{"KVCANARY_INCIDENT_FILE", "   "}})).incident_file, "");
  Config config;
  config.incident_file = "/var/log/kvc.jsonl";
  EXPECT_NE(config.ToString().find("incident_file='/var/log/kvc.jsonl'"), std::string::npos);
}

TEST(Config, NamesOfEnums) {
  EXPECT_STREQ(ModeName(Mode::kLog), "log");
  EXPECT_STREQ(RealDataName(RealKvHashMode::kPartial), "partial");
  EXPECT_STREQ(GroupKindName(GroupKind::kFull), "FULL");
  EXPECT_STREQ(GroupKindName(GroupKind::kSwa), "SWA");
}

TEST(PerturbConfig, DefaultsAreOff) {
  const PerturbConfig config = PerturbConfig::FromEnv(MapEnv({}));
  EXPECT_FALSE(config.AnyEnabled());
  EXPECT_FALSE(config.target_group.has_value());
  EXPECT_EQ(config.warmup_steps, 50);
  EXPECT_EQ(config.seed, 0u);
}

TEST(PerturbConfig, EnvironmentValuesAreHonoured) {
  const PerturbConfig config =
      PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_REAL_KV_USED_PROB", "0.25"},
                                     {"KVCANARY_PERTURB_TARGET_GROUP", "  SWA "},
                                     {"KVCANARY_PERTURB_WARMUP_STEPS", "3"},
                                     {"KVCANARY_PERTURB_SEED", "18446744073709551615"}}));
  EXPECT_DOUBLE_EQ(config.real_kv_used_prob, 0.25);
  EXPECT_TRUE(config.AnyEnabled());
  EXPECT_EQ(config.target_group, std::optional<GroupKind>(GroupKind::kSwa));
  EXPECT_EQ(config.warmup_steps, 3);
  EXPECT_EQ(config.seed, ~uint64_t{0});
  EXPECT_EQ(config.RequireTargetGroup("real_kv_used"), GroupKind::kSwa);
}

TEST(PerturbConfig, ProbabilitiesMustBeInUnitInterval) {
  EXPECT_EQ(ErrorMessage([] {
              PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB", "1.5"}}));
            }),
            "kv-canary: KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB must be in [0, 1], got 1.5");
  PerturbConfig config;
  config.real_kv_post_forward_prob = -0.5;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB must be in [0, 1], got -0.5");
  config.real_kv_post_forward_prob = 1.0;
  EXPECT_NO_THROW(config.Validate());
}

TEST(PerturbConfig, RealPerturbBytesVariablesAreParsedAndValidated) {
  const PerturbConfig config =
      PerturbConfig::FromEnv(MapEnv({{"KVCANARY_REAL_PERTURB_BYTES_PROB", " 0.5 "},
                                     {"KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN", "Yes"}}));
  EXPECT_DOUBLE_EQ(config.real_perturb_bytes_prob, 0.5);
  EXPECT_TRUE(config.real_perturb_bytes_require_orphan);
  EXPECT_TRUE(config.AnyEnabled());
  EXPECT_NE(config.ToString().find(
                "real_perturb_bytes_prob=0.5, real_perturb_bytes_require_orphan=true"),
            std::string::npos);
  // require_orphan only restricts the flip; it enables nothing by itself.
  EXPECT_FALSE(
      PerturbConfig::FromEnv(MapEnv({{"KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN", "1"}}))
          .AnyEnabled());
  // {variable, value, the refusal}.
  const char* const refused[][3] = {
      {"KVCANARY_REAL_PERTURB_BYTES_PROB", "1.5", "must be in [0, 1], got 1.5"},
      {"KVCANARY_REAL_PERTURB_BYTES_PROB", "-0.1", "must be in [0, 1], got -0.1"},
      {"KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN", "sometimes",
       "must be a boolean, got 'sometimes'"},
  };
  for (const auto& [var, value, refusal] : refused) {
    EXPECT_EQ(ErrorMessage([&] { PerturbConfig::FromEnv(MapEnv({{var, value}})); }),
              "kv-canary: " + std::string(var) + " " + refusal);
  }
}

TEST(PerturbConfig, TargetGroupRejectsOtherValuesQuotingTheRawText) {
  for (const char* raw : {"any", "prefix", " Both "}) {
    EXPECT_EQ(ErrorMessage([&] {
                PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_TARGET_GROUP", raw}}));
              }),
              std::string("kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be one of 'full' / "
                          "'swa', got '") + raw + "'");
  }
  EXPECT_EQ(ParseGroupKind("Full"), GroupKind::kFull);
}

TEST(PerturbConfig, UnsetTargetGroupFailsOnlyWhenAPerturbationFires) {
  PerturbConfig config;
  config.real_kv_used_prob = 1.0;
  EXPECT_NO_THROW(config.Validate());
  EXPECT_EQ(ErrorMessage([&] { config.RequireTargetGroup("real_kv_used"); }),
            "kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be explicitly set to 'full' or 'swa' "
            "when real_kv_used perturbation is enabled");
}

TEST(PerturbConfig, ToStringShowsUnsetTarget) {
  PerturbConfig config;
  EXPECT_NE(config.ToString().find("target_group=unset"), std::string::npos);
  config.target_group = GroupKind::kFull;
  EXPECT_NE(config.ToString().find("target_group=FULL"), std::string::npos);
}

// Every integer variable: its name, its range, and a value on each side of it.
struct IntVar {
  const char* var;
  int64_t lo;
  int64_t hi;
};
constexpr IntVar kIntVars[] = {
    {"KVCANARY_SWEEP_INTERVAL", 0, kMaxStepInterval},
    {"KVCANARY_RING_CAPACITY", 1, kMaxRingCapacity},
    {"KVCANARY_STATS_PRINT_EVERY_N_STEPS", 0, kMaxStepInterval},
    {"KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL", 0, kMaxStepInterval},
};

// The message names the variable, the allowed range and the value given.
std::string RangeMessage(const IntVar& v, int64_t value) {
  return "kv-canary: " + std::string(v.var) + " must be in [" + std::to_string(v.lo) + ", " +
         std::to_string(v.hi) + "], got " + std::to_string(value);
}

// The mode a sweep interval needs, so that only the range can refuse.
Config FromEnvWith(const char* var, const std::string& value) {
  return Config::FromEnv(MapEnv({{"KVCANARY_MODE", "log"}, {var, value}}));
}

TEST(ConfigLimits, EveryIntegerVariableIsRangeCheckedByName) {
  for (const IntVar& v : kIntVars) {
    SCOPED_TRACE(v.var);
    EXPECT_NO_THROW(FromEnvWith(v.var, std::to_string(v.lo)));
    EXPECT_NO_THROW(FromEnvWith(v.var, std::to_string(v.hi)));
    EXPECT_EQ(ErrorMessage([&] { FromEnvWith(v.var, std::to_string(v.lo - 1)); }),
              RangeMessage(v, v.lo - 1));
    EXPECT_EQ(ErrorMessage([&] { FromEnvWith(v.var, std::to_string(v.hi + 1)); }),
              RangeMessage(v, v.hi + 1));
  }
}

// An unbounded ring used to size its buffer as capacity x 64 bytes, which wraps for a capacity
// of 2^58 and more: a small buffer the kernels then wrote far past.
TEST(ConfigLimits, RingCapacityWhoseBytesWrapIsRefused) {
  const IntVar ring = kIntVars[1];
  const int64_t wrapping = int64_t{1} << 58;
  EXPECT_EQ(ErrorMessage([&] { FromEnvWith(ring.var, std::to_string(wrapping)); }),
            RangeMessage(ring, wrapping));
  Config config;
  config.ring_capacity = wrapping;
  EXPECT_EQ(ErrorMessage([&] { config.Validate(); }),
            "kv-canary: ring_capacity must be in [1, 16777216], got 288230376151711744");
}

TEST(ConfigLimits, NumericVariablesAreParsedWhole) {
  for (const IntVar& v : kIntVars) {
    for (const char* junk : {"12x", "1 2", "0x10", "1e3", "9223372036854775808"}) {
      EXPECT_EQ(ErrorMessage([&] { FromEnvWith(v.var, junk); }),
                "kv-canary: " + std::string(v.var) + " must be an integer, got '" + junk + "'");
    }
  }
  // The perturbation's numeric variables: {variable, value, what it must be}.
  const char* const perturb_cases[][3] = {
      {"KVCANARY_PERTURB_WARMUP_STEPS", "5 steps", "an integer"},
      {"KVCANARY_PERTURB_SEED", "7seven", "an integer"},
      {"KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB", "0.5%", "a number"},
      {"KVCANARY_REAL_PERTURB_BYTES_PROB", "1/2", "a number"},
  };
  for (const auto& [var, value, kind] : perturb_cases) {
    EXPECT_EQ(ErrorMessage([&] { PerturbConfig::FromEnv(MapEnv({{var, value}})); }),
              "kv-canary: " + std::string(var) + " must be " + kind + ", got '" + value + "'");
  }
}

TEST(ConfigLimits, PerturbationWarmupAndProbabilitiesAreRangeChecked) {
  EXPECT_EQ(ErrorMessage([] {
              PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_WARMUP_STEPS", "-1"}}));
            }),
            "kv-canary: KVCANARY_PERTURB_WARMUP_STEPS must be in [0, 2147483647], got -1");
  EXPECT_EQ(ErrorMessage([] {
              PerturbConfig::FromEnv(MapEnv({{"KVCANARY_PERTURB_REQ_TO_TOKEN_PROB", "inf"}}));
            }),
            "kv-canary: KVCANARY_PERTURB_REQ_TO_TOKEN_PROB must be in [0, 1], got inf");
}

}  // namespace
}  // namespace kvcanary::runtime
