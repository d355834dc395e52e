// Property tests of a small engine running Plan + Verify + Write every step:
// seeded random valid inputs checked against small oracles written from SGLang's pseudo-code
// (tests/property_oracle.h), never by calling library internals. Every case traces its seed, so a
// failure names the std::mt19937_64 seed that replays it. The engine, EngineSim, is in
// engine_sim.h.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine_sim.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"

namespace kvcanary::testing {
namespace {

// Every (mode, FULL/SWA, target/draft) configuration, `seeds_per_config` seeds each.
std::vector<SimConfig> SimConfigs(int seeds_per_config) {
  std::vector<SimConfig> configs;
  uint64_t seed = 7000;
  for (int mode = 0; mode < 3; ++mode) {
    for (bool swa : {false, true}) {
      for (int64_t token_offset : {0, 1}) {
        for (int i = 0; i < seeds_per_config; ++i) {
          configs.push_back(SimConfig{seed++, ModeOf(mode), swa, token_offset});
        }
      }
    }
  }
  return configs;
}

TEST(PropertyEngine, WriteThenVerifyRoundTripNeverRecordsAViolation) {
  for (const SimConfig& config : SimConfigs(6)) {
    SCOPED_TRACE(ConfigTrace(config));
    EngineSim sim(config);
    for (int step = 0; step < 10 && !HasFailure(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      sim.Step();
    }
    sim.ExpectFinalVerifyClean();
    if (HasFailure()) return;
  }
}

TEST(PropertyEngine, SingleFieldCorruptionFlagsExactlyTheAffectedEntries) {
  for (const SimConfig& config : SimConfigs(5)) {
    SCOPED_TRACE(ConfigTrace(config));
    EngineSim sim(config);
    for (int step = 0; step < 6 && !HasFailure(); ++step) sim.Step();
    sim.CheckSingleFieldCorruptions();
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace kvcanary::testing
