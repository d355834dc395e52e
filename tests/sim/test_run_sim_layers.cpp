// real_kv_deep_layer end to end: a byte flipped in a layer past those the layer0 setting folds is
// detected every time with --fingerprint-layers all, in both layouts, and missed every time with
// layer0 (its negative control: the run fails, and the faults corrupted outputs).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/report.h"
#include "sim/run_sim.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

std::string Describe(const ScenarioReport& report) {
  std::ostringstream out;
  PrintReport(out, report);
  return out.str();
}

// An eight-layer pool of the preset, injecting deep-layer flips only.
SimOptions DeepLayerOptions(const char* preset, const char* fingerprint_layers) {
  SimOptions options = ScenarioPreset(preset);
  options.num_layers = 8;
  options.steps = 400;
  options.fault_rate = 4;
  options.faults = "real_kv_deep_layer";
  options.fingerprint_layers = fingerprint_layers;
  return options;
}

class DeepLayer : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepLayer, EveryFlipIsDetectedWhenAllLayersAreFingerprinted) {
  const ScenarioReport report = RunScenario(DeepLayerOptions(GetParam(), "all"), nullptr);
  ASSERT_EQ(report.injections.size(), 4u) << Describe(report);
  for (const Injection& injection : report.injections) {
    EXPECT_TRUE(injection.detected) << injection.target;
    EXPECT_NE(injection.detected_by.find("verify_real_kv_hash"), std::string::npos)
        << injection.detected_by;
  }
  EXPECT_TRUE(report.false_positives.empty()) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
}

TEST_P(DeepLayer, EveryFlipIsMissedWithLayer0) {
  const ScenarioReport report = RunScenario(DeepLayerOptions(GetParam(), "layer0"), nullptr);
  ASSERT_EQ(report.injections.size(), 4u) << Describe(report);
  for (const Injection& injection : report.injections) {
    EXPECT_FALSE(injection.detected) << injection.target;
  }
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the flips changed no output";
  EXPECT_EQ(report.violations_total, 0) << Describe(report);
  EXPECT_EQ(ExitCode({report}), 1);
}

INSTANTIATE_TEST_SUITE_P(Sim, DeepLayer, ::testing::Values("default", "paged"));

}  // namespace
}  // namespace kvcanary::sim
