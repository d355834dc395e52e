// End-to-end runs of the eagle scenario (speculative decoding: three inner forwards per decode
// step, two of them drafts): a clean run accepts drafts and reports nothing, every
// eagle_position_plus_one injection is detected by a position check (the write's, or the verify of
// the next draft forward) with no false positive, without the canary (its negative control)
// every one goes undetected, and with quarantine no corrupted token is delivered.
#include <gtest/gtest.h>

#include <string>

#include "sim/report.h"
#include "sim/run_sim.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

// What a failed expectation prints: the counts that decide the verdict.
std::string Summary(const ScenarioReport& report) {
  return std::to_string(report.injections.size()) + " injections, " +
         std::to_string(report.false_positives.size()) + " false positives";
}

SimOptions EagleOptions(const std::string& faults) {
  SimOptions options = ScenarioPreset("eagle");
  options.steps = 1200;
  options.faults = faults;
  return options;
}

TEST(RunScenarioEagle, CleanDraftStepsReportNothingAndGenerateMoreTokensPerStep) {
  const ScenarioReport eagle = RunScenario(EagleOptions("none"), nullptr);
  EXPECT_EQ(ExitCode({eagle}), 0) << Summary(eagle);
  EXPECT_TRUE(eagle.false_positives.empty()) << Summary(eagle);
  EXPECT_EQ(eagle.oracle_mismatches_total, 0);
  EXPECT_EQ(eagle.outputs_wrong, 0);
  EXPECT_GT(eagle.outputs_checked, 0);
  SimOptions plain = EagleOptions("none");
  plain.draft_forwards = 0;
  const ScenarioReport decode = RunScenario(plain, nullptr);
  // Accepted drafts: more tokens in the same steps, and every draft forward verified and wrote.
  EXPECT_GT(eagle.coverage.tokens_generated, decode.coverage.tokens_generated * 11 / 10);
  EXPECT_GT(eagle.coverage.protected_tokens, decode.coverage.protected_tokens);
}

TEST(RunScenarioEagle, EveryDraftWrittenAtPositionPlusOneIsDetected) {
  const ScenarioReport report = RunScenario(EagleOptions("eagle_position_plus_one"), nullptr);
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) {
    EXPECT_TRUE(injection.detected) << injection.target;
    // The write's position check, or the next draft forward's verify of the same record.
    EXPECT_NE(injection.detected_by.find("_position"), std::string::npos)
        << injection.target << ": " << injection.detected_by;
  }
  EXPECT_TRUE(report.false_positives.empty()) << Summary(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  EXPECT_EQ(ExitCode({report}), 0) << Summary(report);
}

TEST(RunScenarioEagle, WithoutTheCanaryEveryPositionPlusOneGoesUndetected) {
  SimOptions options = EagleOptions("eagle_position_plus_one");
  options.mode = "none";
  const ScenarioReport report = RunScenario(options, nullptr);
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) EXPECT_FALSE(injection.detected);
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the accepted bent drafts changed no output";
  EXPECT_EQ(ExitCode({report}), 1);
}

// --on-violation quarantine with drafts: a request's accepted drafts and bonus token are held
// back with its sampled token, so every token the run generated is delivered, discarded with a
// recomputed request, or still held at the end; no corrupted one reaches a user and every
// finished output is the oracle's, whatever the faults did to the drafts.
TEST(RunScenarioEagle, QuarantineHoldsAcceptedDraftsAndDeliversNoCorruptedToken) {
  SimOptions options = EagleOptions("all");
  options.on_violation = "quarantine";
  const ScenarioReport report = RunScenario(options, nullptr);
  ASSERT_FALSE(report.injections.empty());
  int64_t corrupted = 0;
  for (const Injection& injection : report.injections) {
    EXPECT_TRUE(injection.detected) << injection.target;
    EXPECT_EQ(injection.delivered_corrupted, 0) << injection.target;
    EXPECT_EQ(injection.discarded_corrupted, injection.outputs_corrupted) << injection.target;
    corrupted += injection.outputs_corrupted;
  }
  EXPECT_GT(corrupted, 0) << "the faults changed no output";
  EXPECT_EQ(report.delivered_corrupted_unexplained, 0);
  EXPECT_GT(report.quarantine.requests_recomputed, 0);
  EXPECT_EQ(report.quarantine.tokens_delivered + report.quarantine.tokens_discarded +
                report.tokens_held_at_end,
            report.coverage.tokens_generated);
  EXPECT_GT(report.outputs_checked, 0);
  EXPECT_EQ(report.outputs_wrong, 0);
  EXPECT_TRUE(report.false_positives.empty()) << Summary(report);
  EXPECT_EQ(ExitCode({report}), 0) << Summary(report);
}

}  // namespace
}  // namespace kvcanary::sim
