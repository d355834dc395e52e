// Sampled verify in the runtime (Config::verify_sample, docs/sampled_verify.md): HEAD and TAIL
// check a rotating 1/K of every prefix, so a corrupted record is reported within K + 1 steps, a
// clean run reports nothing, and each step checks fewer records than with K = 1. Split
// verification (SGLang's plan arrays past their capacity) samples too.
#include <gtest/gtest.h>

#include "runtime/sampled_scenarios.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;

auto EagerSteps() {
  return [] { return [](FakeEngine& engine) { engine.Step(); }; };
}

int64_t ProtectedTokens(const FakeEngine& engine) {
  int64_t total = 0;
  for (int64_t count : engine.canary->Metrics().protected_tokens) total += count;
  return total;
}

TEST(SampledVerifyRuntime, CleanRunReportsNothingAndChecksFewerRecords) {
  int64_t checked[2] = {0, 0};
  const int64_t samples[2] = {1, 4};
  for (int i = 0; i < 2; ++i) {
    FakeEngine engine(SampledOptions(samples[i]));
    int64_t rows = 0;
    CountRows(engine, rows);
    engine.AddRequest(40);
    engine.AddRequest(23);
    for (int s = 0; s < 30; ++s) engine.Step();
    EXPECT_EQ(rows, 0) << "K=" << samples[i];
    checked[i] = ProtectedTokens(engine);
  }
  // Verify at K = 4 checks about a quarter of the prefix (plus the newest record per row); the
  // writes are the same.
  EXPECT_LT(checked[1], checked[0] * 6 / 10);
}

TEST(SampledVerifyRuntime, RemappedPositionIsReportedWithinKSteps) {
  for (int64_t sample : {1, 2, 4}) {
    SCOPED_TRACE("K=" + std::to_string(sample));
    const int64_t largest =
        ExpectEveryPositionReportedWithinKSteps(SampledOptions(sample), EagerSteps());
    // Every step verifies every record at K = 1 (reported the next step); with K > 1 the run
    // of positions 0-15 waits for its phase.
    if (sample == 1) {
      EXPECT_EQ(largest, 2);
    } else {
      EXPECT_GT(largest, 2);
    }
  }
}

TEST(SampledVerifyRuntime, SplitVerificationSamplesToo) {
  testing::FakeEngineOptions options = SmallPlanOptions();
  options.config.fused_verify = false;  // SGLang's plan arrays, which the batch overflows
  options.config.verify_sample = 4;
  // 24 entries: a row's sampled bound (a run of 16 and the newest) fits, four rows do not.
  options.capacities->verify_capacity = 24;
  FakeEngine engine(options);
  int64_t rows = 0;
  CountRows(engine, rows);
  FillPastThePlanCapacity(engine);
  for (int i = 0; i < 4; ++i) engine.Step();
  EXPECT_EQ(rows, 0);
  EXPECT_GT(engine.canary->split_steps(), 0);
  engine.SetSlot(3, 2, engine.SlotOf(4, 9));
  for (int i = 0; i < 5 && rows == 0; ++i) engine.Step();
  EXPECT_GT(rows, 0) << "not reported within K + 1 steps";
  EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
}

}  // namespace
}  // namespace kvcanary::runtime
