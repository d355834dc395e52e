// Config::verify_entries (KVCANARY_VERIFY_ENTRIES): where a fused step's verifies get their
// entries. Derived or stored, a step checks the same entries, so a fault is reported at the same
// step; storing adds the entry arrays to the workspace, and a step past the stored arrays'
// capacity derives its entries instead of splitting or skipping.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "kvcanary/runtime/config.h"
#include "runtime/error_message.h"
#include "runtime/sampled_scenarios.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;

EnvLookup OneVar(const std::string& name, const std::string& value) {
  return [=](const std::string& asked) -> std::optional<std::string> {
    if (asked == name) return value;
    return std::nullopt;
  };
}

TEST(VerifyEntriesConfig, IsAutoUnlessSetToDeriveOrStore) {
  EXPECT_EQ(Config::FromEnv(OneVar("UNRELATED", "x")).verify_entries, VerifyEntries::kAuto);
  EXPECT_EQ(Config::FromEnv(OneVar("KVCANARY_VERIFY_ENTRIES", " Store ")).verify_entries,
            VerifyEntries::kStore);
  EXPECT_EQ(Config::FromEnv(OneVar("KVCANARY_VERIFY_ENTRIES", "derive")).verify_entries,
            VerifyEntries::kDerive);
  EXPECT_EQ(ErrorMessage([] { Config::FromEnv(OneVar("KVCANARY_VERIFY_ENTRIES", "stored")); }),
            "kv-canary: verify_entries must be one of auto/derive/store, got 'stored'");
  Config config;
  EXPECT_NE(config.ToString().find(", verify_entries=auto,"), std::string::npos);
  config.verify_entries = VerifyEntries::kStore;
  EXPECT_NE(config.ToString().find(", verify_entries=store,"), std::string::npos);
  EXPECT_STREQ(VerifyEntriesName(VerifyEntries::kDerive), "derive");
}

testing::FakeEngineOptions EntriesOptions(VerifyEntries entries, int64_t sample) {
  testing::FakeEngineOptions options = SampledOptions(sample);
  options.config.verify_entries = entries;
  return options;
}

// The same remapped position is reported after the same number of steps whichever way the
// entries come, sampled or not.
TEST(VerifyEntriesRuntime, StoredAndDerivedReportAtTheSameStep) {
  for (int64_t sample : {1, 4}) {
    SCOPED_TRACE("K=" + std::to_string(sample));
    const auto eager = [] { return [](FakeEngine& engine) { engine.Step(); }; };
    const int64_t derived = ExpectEveryPositionReportedWithinKSteps(
        EntriesOptions(VerifyEntries::kDerive, sample), eager);
    const int64_t stored = ExpectEveryPositionReportedWithinKSteps(
        EntriesOptions(VerifyEntries::kStore, sample), eager);
    EXPECT_EQ(stored, derived);
  }
}

// Storing adds one set of entry arrays (32 bytes an entry of the verify capacity) to the forward's
// plan (one forward, one group here), which install counts in its workspace budget.
TEST(VerifyEntriesRuntime, StoringAddsTheEntryArraysToTheWorkspace) {
  FakeEngine derived(EntriesOptions(VerifyEntries::kDerive, 4));
  FakeEngine stored(EntriesOptions(VerifyEntries::kStore, 4));
  const CanaryManager& d = *derived.canary;
  const CanaryManager& s = *stored.canary;
  ASSERT_EQ(s.capacities().verify_capacity, d.capacities().verify_capacity);
  EXPECT_EQ(s.device_bytes() - d.device_bytes(), 32 * s.capacities().verify_capacity);
  EXPECT_EQ(s.record_bytes(), d.record_bytes());
}

// Arrays of 16 entries, a batch whose steps verify more: no split (the fused path never
// overflows), nothing reported while clean, and a fault still reported (the entries derived).
TEST(VerifyEntriesRuntime, AStepPastTheStoredCapacityDerivesItsEntries) {
  testing::FakeEngineOptions options = SmallPlanOptions();
  options.config.verify_entries = VerifyEntries::kStore;
  FakeEngine engine(options);
  int64_t rows = 0;
  CountRows(engine, rows);
  FillPastThePlanCapacity(engine);
  EXPECT_EQ(rows, 0);
  EXPECT_EQ(engine.canary->split_steps(), 0);
  RemapAcrossRequestsAndReport(engine);
  EXPECT_GT(rows, 0);
  EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
}

}  // namespace
}  // namespace kvcanary::runtime
