// End-to-end runs of the simulator: every fault class is injected and detected with no false
// positive; a long clean run reports nothing; and two negative controls prove the report cannot
// pass by construction (without the canary the faults corrupt outputs and nothing is detected;
// without real-data hashing the pure-byte faults go undetected and the run fails; a deep-layer
// flip is detected every time with --fingerprint-layers all and missed every time with layer0).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

// Every injection of the run was detected, and every class the options enable was injected.
void ExpectEveryClassInjectedAndDetected(const SimOptions& options, const ScenarioReport& report) {
  std::set<FaultKind> injected;
  for (const Injection& injection : report.injections) {
    injected.insert(injection.fault);
    EXPECT_TRUE(injection.detected)
        << FaultName(injection.fault) << " at step " << injection.step << ": " << injection.target;
  }
  for (FaultKind fault : EnabledFaults(options)) {
    EXPECT_TRUE(injected.count(fault)) << FaultName(fault) << " was never injected";
  }
}

TEST(RunScenario, DefaultDetectsEveryInjectedFaultClass) {
  const SimOptions options = ScenarioPreset("default");
  const ScenarioReport report = RunScenario(options, nullptr);
  ExpectEveryClassInjectedAndDetected(options, report);
  EXPECT_TRUE(report.false_positives.empty()) << Describe(report);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the faults changed no output";
  EXPECT_GT(report.coverage.protected_tokens, 0);
  EXPECT_GT(report.coverage.sweeps, 0);
}

TEST(RunScenario, PagedDetectsEveryPagedFaultClass) {
  const SimOptions options = ScenarioPreset("paged");
  const std::vector<FaultKind> enabled = EnabledFaults(options);
  for (FaultKind fault : {FaultKind::kBlockTableSwap, FaultKind::kFreedBlockReuse,
                          FaultKind::kRealKvPage, FaultKind::kStaleOutCacheLoc}) {
    EXPECT_NE(std::find(enabled.begin(), enabled.end(), fault), enabled.end()) << FaultName(fault);
  }
  const ScenarioReport report = RunScenario(options, nullptr);
  ExpectEveryClassInjectedAndDetected(options, report);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the faults changed no output";
  EXPECT_GT(report.coverage.prefix_hit_rate, 0.3) << "the cache shared no blocks";
}

// --on-violation quarantine: the engine holds each token back until the canary's verdict covers
// it, and recomputes the requests a violation names. Every fault is still detected, no corrupted
// token reaches a user, and every finished request's output is the oracle's. The log control,
// same seed and faults, delivers every corrupted token and finishes requests with wrong output.
TEST(RunScenario, QuarantineDeliversNoCorruptedTokenWhereLogDeliversThemAll) {
  SimOptions options = ScenarioPreset("default");
  const ScenarioReport control = RunScenario(options, nullptr);
  options.on_violation = "quarantine";
  const ScenarioReport report = RunScenario(options, nullptr);
  EXPECT_EQ(report.on_violation, "quarantine");
  ExpectEveryClassInjectedAndDetected(options, report);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
  EXPECT_TRUE(report.false_positives.empty()) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_unexplained, 0);
  int64_t corrupted = 0, discarded = 0;
  for (const Injection& injection : report.injections) {
    EXPECT_EQ(injection.delivered_corrupted, 0) << injection.target;
    EXPECT_EQ(injection.discarded_corrupted, injection.outputs_corrupted) << injection.target;
    corrupted += injection.outputs_corrupted;
    discarded += injection.discarded_corrupted;
  }
  EXPECT_GT(corrupted, 0) << "the faults changed no output";
  EXPECT_EQ(DeliveredCorrupted(report), 0);
  EXPECT_EQ(report.delivered_corrupted_unexplained, 0);
  EXPECT_GT(report.quarantine.requests_recomputed, 0);
  EXPECT_GE(report.quarantine.tokens_discarded, discarded);
  EXPECT_GT(report.outputs_checked, 1000);
  EXPECT_EQ(report.outputs_wrong, 0);
  // The control.
  EXPECT_EQ(DeliveredCorrupted(control), [&] {
    int64_t sampled = 0;
    for (const Injection& injection : control.injections) sampled += injection.outputs_corrupted;
    return sampled;
  }());
  EXPECT_GT(DeliveredCorrupted(control), 0);
  EXPECT_GT(control.outputs_wrong, 0);
  EXPECT_EQ(control.quarantine.requests_recomputed, 0);
}

// The verdict counts a delivered corrupted token against a quarantine run (and only there).
TEST(RunScenario, QuarantineFailsOnADeliveredCorruptedToken) {
  ScenarioReport report;
  report.on_violation = "quarantine";
  EXPECT_TRUE(Passed(report));
  report.delivered_corrupted_unexplained = 1;
  EXPECT_FALSE(Passed(report));
  report.delivered_corrupted_unexplained = 0;
  report.outputs_wrong = 1;
  EXPECT_FALSE(Passed(report));
  report.on_violation = "log";
  EXPECT_TRUE(Passed(report));
}

// Sampled verify (a rotating 1/8 of every prefix per forward): prefill and decode batches
// alternate, so a request misses forwards; its own phase still rotates, so every fault is caught,
// later than at K = 1 but within the horizon.
TEST(RunScenario, SampledVerifyDetectsEveryInjection) {
  SimOptions options = ScenarioPreset("default");
  options.verify_sample = 8;
  const ScenarioReport report = RunScenario(options, nullptr);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
  SimOptions full = options;
  full.verify_sample = 1;
  // Protected tokens count the writes and the sweeps too, which do not sample.
  const int64_t at_one = RunScenario(full, nullptr).coverage.protected_tokens;
  EXPECT_LT(report.coverage.protected_tokens, at_one / 2) << "K = 8 checked over half of K = 1's";
}

// Quarantine with sampled verify (K = 8): each token waits K - 1 forwards of its request (its K
// forwards verify every record it read), and a finished request's slots are verified in full
// after its last forward (VerifyRecordsNow), its last tokens waiting for that report. Still every
// fault detected and no corrupted token delivered; every finished output the oracle's.
TEST(RunScenario, SampledVerifyQuarantineDeliversNoCorruptedToken) {
  SimOptions options = ScenarioPreset("default");
  options.verify_sample = 8;
  options.on_violation = "quarantine";
  const ScenarioReport report = RunScenario(options, nullptr);
  EXPECT_EQ(report.hold_back, 7) << "--hold-back 1 raised to K - 1";
  ExpectEveryClassInjectedAndDetected(options, report);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
  EXPECT_TRUE(report.false_positives.empty()) << Describe(report);
  int64_t corrupted = 0;
  for (const Injection& injection : report.injections) corrupted += injection.outputs_corrupted;
  EXPECT_GT(corrupted, 0) << "the faults changed no output";
  EXPECT_EQ(DeliveredCorrupted(report), 0);
  EXPECT_GT(report.outputs_checked, 1000);
  EXPECT_EQ(report.outputs_wrong, 0);
}

// The forwards latency. At K = 1 the first forward of its victims that can see a fault finds it,
// however many wall steps that takes (prefill batches without the victim, the one-step reporting
// delay). At K = 8 each record is verified once in any 8 forwards of its request, so every fault
// is found within 8 of them, while wall steps run past 8.
TEST(RunScenario, SampledVerifyDetectsEveryFaultWithinKForwards) {
  for (int64_t k : {1, 8}) {
    SimOptions options = ScenarioPreset("default");
    options.verify_sample = k;
    const ScenarioReport report = RunScenario(options, nullptr);
    ASSERT_EQ(ExitCode({report}), 0) << Describe(report);
    int64_t most_forwards = 0;
    int64_t most_steps = 0;
    for (const Injection& injection : report.injections) {
      const int64_t steps = injection.detected_step - injection.step;
      EXPECT_GE(injection.detected_forwards, 1) << injection.target;
      EXPECT_LE(injection.detected_forwards, k) << "K " << k << ": " << injection.target;
      // A forward needs a step, and a detection is reported the step after its forward (the
      // plan op's refusal, `stride_view`, in its own step).
      EXPECT_LE(injection.detected_forwards, std::max<int64_t>(steps, 1)) << injection.target;
      most_forwards = std::max(most_forwards, injection.detected_forwards);
      most_steps = std::max(most_steps, steps);
    }
    const FaultClassRow total = SummarizeTotal(report);
    EXPECT_EQ(total.forwards_max, most_forwards);
    EXPECT_GT(most_steps, k) << "K " << k << ": wall steps never ran past K";
    if (k > 1) {
      EXPECT_GT(most_forwards, 1) << "sampling delayed no detection";
    }
  }
}

// The other presets, shortened: each detects every fault class it enables.
class ScenarioPresets : public ::testing::TestWithParam<const char*> {};

TEST_P(ScenarioPresets, DetectEveryInjectionWithoutFalsePositives) {
  SimOptions options = ScenarioPreset(GetParam());
  // offload: L3 loads begin once the host tier has filled, and l3_stale needs a key an older
  // block has already left a blob under.
  options.steps = std::string(GetParam()) == "offload" ? 2000 : 1200;
  options.fault_rate = 2;
  const ScenarioReport report = RunScenario(options, nullptr);
  std::set<FaultKind> injected;
  for (const Injection& injection : report.injections) injected.insert(injection.fault);
  for (FaultKind fault : EnabledFaults(options)) {
    EXPECT_TRUE(injected.count(fault)) << FaultName(fault) << " was never injected";
  }
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);
}

INSTANTIATE_TEST_SUITE_P(Sim, ScenarioPresets, ::testing::Values("swa", "offload", "pd", "paged"));

// The L3 tier's classes: a flipped blob byte is refused by LoadFromStore's checksum, a stale blob
// (intact, under the right key) by the next forward's HEAD verify of the restored slots; without
// the canary nothing is stored and nothing is seen.
TEST(RunScenario, OffloadDetectsCorruptAndStaleL3Blobs) {
  SimOptions options = ScenarioPreset("offload");
  options.faults = "l3_corrupt,l3_stale";
  options.fault_rate = 3;
  const ScenarioReport report = RunScenario(options, nullptr);
  std::map<FaultKind, int> injected;
  for (const Injection& injection : report.injections) {
    injected[injection.fault] += 1;
    EXPECT_TRUE(injection.detected) << injection.target;
    const std::string expected =
        injection.fault == FaultKind::kL3Corrupt ? "CANARY_L3_LOAD checksum mismatch" : "HEAD_K_FULL";
    EXPECT_EQ(injection.detected_by.rfind(expected, 0), 0u) << injection.detected_by;
  }
  EXPECT_GE(injected[FaultKind::kL3Corrupt], 2);
  EXPECT_GE(injected[FaultKind::kL3Stale], 2);
  EXPECT_EQ(ExitCode({report}), 0) << Describe(report);

  options.mode = "none";
  const ScenarioReport blind = RunScenario(options, nullptr);
  ASSERT_EQ(blind.injections.size(), 6u);
  for (const Injection& injection : blind.injections) EXPECT_FALSE(injection.detected);
  EXPECT_EQ(ExitCode({blind}), 1);
}

TEST(RunScenario, CleanRunReportsNoViolation) {
  SimOptions options = ScenarioPreset("soak");
  options.steps = std::min<int64_t>(options.steps, 2000);
  const ScenarioReport report = RunScenario(options, nullptr);
  EXPECT_TRUE(report.injections.empty());
  EXPECT_EQ(report.violations_total, 0) << Describe(report);
  EXPECT_EQ(report.oracle_mismatches_total, 0);
  EXPECT_GT(report.coverage.requests, 50);
  EXPECT_EQ(ExitCode({report}), 0);
}

// Per token and paged.
class WithoutTheCanary : public ::testing::TestWithParam<const char*> {};

TEST_P(WithoutTheCanary, FaultsCorruptOutputsAndNothingIsDetected) {
  SimOptions options = ScenarioPreset(GetParam());
  options.mode = "none";
  options.steps = 300;
  options.fault_rate = 1;
  const ScenarioReport report = RunScenario(options, nullptr);
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) EXPECT_FALSE(injection.detected);
  EXPECT_GT(report.oracle_mismatches_total, 0) << "the faults changed no output";
  EXPECT_EQ(report.violations_total, 0);
  EXPECT_EQ(ExitCode({report}), 1);
}

INSTANTIATE_TEST_SUITE_P(RunScenario, WithoutTheCanary, ::testing::Values("default", "paged"));

TEST(RunScenario, WithoutRealDataPureByteFaultsGoUndetected) {
  SimOptions options = ScenarioPreset("default");
  options.real_data = "none";
  options.steps = 300;
  options.fault_rate = 1;
  options.faults = "real_kv_used,real_kv_post_forward";
  const ScenarioReport report = RunScenario(options, nullptr);
  ASSERT_FALSE(report.injections.empty());
  for (const Injection& injection : report.injections) EXPECT_FALSE(injection.detected);
  EXPECT_EQ(ExitCode({report}), 1);
}

// real_kv_deep_layer, in both layouts, on an eight-layer pool of the preset: a byte flipped in a
// layer past those the layer0 setting folds.
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

// The report without its header (which names --jitter) and its speed line (wall time).
std::string ReportBody(const ScenarioReport& report) {
  std::istringstream in(Describe(report));
  std::string line, body;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    if (line.rfind("speed:", 0) != 0) body += line + "\n";
  }
  return body;
}

// On the CPU the jitter fuzzer's spin is a no-op: with --jitter the same seeded run injects,
// detects, corrupts and covers exactly what it does without, and the header says it was on.
TEST(RunScenario, JitterLeavesACpuRunUnchanged) {
  SimOptions options = ScenarioPreset("default");
  options.steps = 600;
  const ScenarioReport off = RunScenario(options, nullptr);
  options.jitter = true;
  options.jitter_max_cycles = 5000;
  const ScenarioReport on = RunScenario(options, nullptr);
  EXPECT_EQ(ExitCode({on}), 0) << Describe(on);
  EXPECT_FALSE(on.injections.empty());
  EXPECT_EQ(ReportBody(on), ReportBody(off));
  EXPECT_NE(Describe(on).find(", jitter;"), std::string::npos) << Describe(on);
  EXPECT_EQ(Describe(off).find(", jitter"), std::string::npos);
}

}  // namespace
}  // namespace kvcanary::sim
