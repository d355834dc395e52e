// Quarantine on every engine kind whose bookkeeping a recompute touches, at the sampled verify's
// longest hold-back: the stale-slot fault's reused slot (which a sampled verify may name only
// through the record after it), a paged engine's blocks, an SWA pool, a compressed pool's cache
// (whose records chain through the slots that close compressed slots). Every injection is
// detected, nothing else is reported, no corrupted token reaches a user and every output is the
// oracle's. Each of these runs reported false positives before its engine's recompute kept a
// reused slot with its new owner, or its cache stopped adopting a sequence after a duplicate.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/report.h"
#include "sim/run_sim.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

struct QuarantineCase {
  std::string scenario;
  int64_t seed;
  int64_t verify_sample;
  int64_t hold_back;
  std::string fault;  // the class whose recovery the case is about: it must have been injected
};

std::string Describe(const ScenarioReport& report) {
  std::ostringstream out;
  PrintReport(out, report);
  return out.str();
}

class QuarantineOnEngine : public ::testing::TestWithParam<QuarantineCase> {};

TEST_P(QuarantineOnEngine, DeliversNothingCorruptedAndReportsNothingElse) {
  const QuarantineCase& c = GetParam();
  SimOptions options = ScenarioPreset(c.scenario);
  options.seed = c.seed;
  options.verify_sample = c.verify_sample;
  options.hold_back = c.hold_back;
  options.on_violation = "quarantine";
  const ScenarioReport report = RunScenario(options, nullptr);
  int64_t of_the_class = 0;
  for (const Injection& injection : report.injections) {
    EXPECT_TRUE(injection.detected) << injection.target;
    of_the_class += FaultName(injection.fault) == c.fault ? 1 : 0;
  }
  EXPECT_GT(of_the_class, 0) << c.fault << " was never injected";
  EXPECT_TRUE(report.false_positives.empty()) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0) << Describe(report);
  EXPECT_EQ(DeliveredCorrupted(report), 0);
  EXPECT_EQ(report.delivered_corrupted_unexplained, 0);
  EXPECT_GT(report.quarantine.requests_recomputed, 0);
  EXPECT_GT(report.outputs_checked, 1000);
  EXPECT_EQ(report.outputs_wrong, 0);
  EXPECT_EQ(ExitCode({report}), 0);
}

INSTANTIATE_TEST_SUITE_P(
    SampledAndHeldBack, QuarantineOnEngine,
    ::testing::Values(QuarantineCase{"swa", 1, 8, 1, "stale_slot_reuse"},
                      QuarantineCase{"paged", 1, 8, 1, "freed_block_reuse"},
                      QuarantineCase{"compressed", 2, 8, 1, "compressed_slot_stale"},
                      QuarantineCase{"compressed", 2, 1, 7, "compressed_slot_stale"}),
    [](const ::testing::TestParamInfo<QuarantineCase>& info) {
      const QuarantineCase& c = info.param;
      return c.scenario + "_seed" + std::to_string(c.seed) + "_k" +
             std::to_string(c.verify_sample) + "_hold" + std::to_string(c.hold_back);
    });

}  // namespace
}  // namespace kvcanary::sim
