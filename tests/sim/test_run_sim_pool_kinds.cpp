// End-to-end runs of the pool kinds the canary sees through a description: the mla scenario (an
// MLA pool, one canary half over the latent buffer) and the compressed scenario (a compressed pool
// beside the full pool). Each fault class of its own is detected every time, by the check that
// should see it, with no false positive (with quarantine too, for the compressed pool); without
// the canary (its negative control) every injection goes undetected.
#include <gtest/gtest.h>

#include <string>

#include "sim/report.h"
#include "sim/run_sim.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

std::string Summary(const ScenarioReport& report) {
  return std::to_string(report.injections.size()) + " injections, " +
         std::to_string(report.false_positives.size()) + " false positives";
}

SimOptions PoolKindOptions(const std::string& scenario, const std::string& faults,
                           const std::string& mode = "log") {
  SimOptions options = ScenarioPreset(scenario);
  options.steps = 1200;
  options.faults = faults;
  options.mode = mode;
  return options;
}

// Every injection detected, each by a row whose label holds `check`, and nothing unexplained.
void ExpectEveryInjectionDetectedBy(const ScenarioReport& report, const std::string& check) {
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) {
    EXPECT_TRUE(injection.detected) << injection.target;
    EXPECT_NE(injection.detected_by.find(check), std::string::npos)
        << injection.target << ": " << injection.detected_by;
  }
  EXPECT_TRUE(report.false_positives.empty()) << Summary(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  EXPECT_EQ(ExitCode({report}), 0) << Summary(report);
}

void ExpectEveryInjectionUndetected(const ScenarioReport& report) {
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) EXPECT_FALSE(injection.detected);
  EXPECT_EQ(ExitCode({report}), 1);
}

TEST(RunScenarioPoolKinds, EveryMlaLatentPageIsCaughtByTheTailFingerprint) {
  const ScenarioReport report = RunScenario(PoolKindOptions("mla", "mla_latent_page"), nullptr);
  ExpectEveryInjectionDetectedBy(report, "TAIL_K_FULL verify_real_kv_hash");
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the misdirected latent write changed no output";
}

TEST(RunScenarioPoolKinds, WithoutTheCanaryEveryMlaLatentPageGoesUndetected) {
  ExpectEveryInjectionUndetected(
      RunScenario(PoolKindOptions("mla", "mla_latent_page", "none"), nullptr));
}

TEST(RunScenarioPoolKinds, MlaRunsEveryDefaultFaultClassOnTheLatentHalf) {
  const ScenarioReport report = RunScenario(PoolKindOptions("mla", "all"), nullptr);
  EXPECT_EQ(report.faults_enabled.size(), 10u);
  EXPECT_EQ(ExitCode({report}), 0) << Summary(report);
}

TEST(RunScenarioPoolKinds, EveryStaleCompressedSlotIsCaughtByAPositionCheck) {
  const ScenarioReport report =
      RunScenario(PoolKindOptions("compressed", "compressed_slot_stale"), nullptr);
  // The chain link is checked too where the predecessor's slot closes a compressed slot.
  ExpectEveryInjectionDetectedBy(report, "verify_position");
}

TEST(RunScenarioPoolKinds, WithoutTheCanaryEveryStaleCompressedSlotGoesUndetected) {
  ExpectEveryInjectionUndetected(
      RunScenario(PoolKindOptions("compressed", "compressed_slot_stale", "none"), nullptr));
}

// --on-violation quarantine on the compressed engine: the runtime names the requests whose full
// slots translate to the stale compressed slot, and the engine computes them again from their
// prompts and delivered tokens (whose writes rebuild their compressed slots): every injection is
// still detected, nothing is reported after the recompute, and every finished output is the
// oracle's. A detection names its victim and the few requests holding the freed slot's
// compressed slot, never the whole batches of the reported steps (18 requests for 5 injections
// here; 155 when every recorded request was named).
TEST(RunScenarioPoolKinds, CompressedQuarantineRecomputesOnlyTheRequestsHoldingTheStaleSlot) {
  SimOptions options = PoolKindOptions("compressed", "compressed_slot_stale");
  options.on_violation = "quarantine";
  const ScenarioReport report = RunScenario(options, nullptr);
  ExpectEveryInjectionDetectedBy(report, "verify_position");
  for (const Injection& injection : report.injections) {
    EXPECT_EQ(injection.delivered_corrupted, 0) << injection.target;
  }
  EXPECT_EQ(report.delivered_corrupted_unexplained, 0);
  const auto injections = static_cast<int64_t>(report.injections.size());
  EXPECT_GE(report.quarantine.requests_recomputed, injections);
  EXPECT_LE(report.quarantine.requests_recomputed, 5 * injections);
  EXPECT_EQ(report.quarantine.tokens_delivered + report.quarantine.tokens_discarded +
                report.tokens_held_at_end,
            report.coverage.tokens_generated);
  EXPECT_GT(report.outputs_checked, 0);
  EXPECT_EQ(report.outputs_wrong, 0);
}

TEST(RunScenarioPoolKinds, CleanCompressedRunReportsNothing) {
  const ScenarioReport report = RunScenario(PoolKindOptions("compressed", "none"), nullptr);
  EXPECT_TRUE(report.false_positives.empty()) << Summary(report);
  EXPECT_EQ(report.violations_total, 0);
  EXPECT_GT(report.coverage.protected_tokens, 0);
  EXPECT_EQ(ExitCode({report}), 0) << Summary(report);
}

}  // namespace
}  // namespace kvcanary::sim
