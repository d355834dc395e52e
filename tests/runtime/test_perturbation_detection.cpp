// Fault injection, the gate (probability, target group) and each perturbation caught end to end
// by the detection path that exists for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/perturbation.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::CapturingLog;
using testing::FakeEngine;
using testing::FakeEngineOptions;

// ---- Gate and target group ---------------------------------------------------------------------

TEST(Perturbation, ProbabilityOutsideTheUnitIntervalIsRefusedAtInstall) {
  PerturbConfig perturb;
  perturb.real_kv_used_prob = 1.5;
  EXPECT_EQ(ErrorMessage([&] { FakeEngine engine(PerturbOptions(perturb)); }),
            "kv-canary: KVCANARY_PERTURB_REAL_KV_USED_PROB must be in [0, 1], got 1.5");
}

TEST(Perturbation, UnsetTargetGroupFailsWhenARealKvPerturbationFires) {
  const std::pair<double PerturbConfig::*, std::string> kinds[] = {
      {&PerturbConfig::real_kv_used_prob, "real_kv_used"},
      {&PerturbConfig::real_perturb_bytes_prob, "real_perturb_bytes"},
  };
  for (const auto& [kind, name] : kinds) {
    PerturbConfig perturb = Fire(kind, /*warmup_steps=*/1);
    perturb.target_group.reset();
    FakeEngine engine(PerturbOptions(perturb));
    engine.AddRequest(4);
    engine.Step();  // warm-up: nothing fires, nothing is required
    EXPECT_EQ(ErrorMessage([&] { engine.Step(); }),
              "kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be explicitly set to 'full' or "
              "'swa' when " + name + " perturbation is enabled");
  }
}

TEST(Perturbation, ReqToTokenNeedsNoTargetGroup) {
  PerturbConfig perturb = Fire(&PerturbConfig::req_to_token_prob, /*warmup_steps=*/1);
  perturb.target_group.reset();
  FakeEngine engine(PerturbOptions(perturb));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(4);
  engine.AddRequest(4);
  engine.Step();
  EXPECT_NO_THROW(engine.Step());
  EXPECT_EQ(recorder.events.size(), 1u);
}

TEST(Perturbation, TargetGroupWithoutRealKvSourcesIsSkipped) {
  // An SWA target on a FULL-only pool, and a FULL target without real data: nothing to flip.
  PerturbConfig swa = Fire(&PerturbConfig::real_kv_used_prob, /*warmup_steps=*/0);
  swa.target_group = GroupKind::kSwa;
  FakeEngine engine(PerturbOptions(swa));
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(4);
  engine.Step();
  engine.Step();
  EXPECT_TRUE(recorder.events.empty());
  EXPECT_TRUE(engine.log.Contains(
      "kv_canary perturb real_kv_used: skipped because no buffer group of target_group=SWA has "
      "real-KV sources"));

  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::real_kv_used_prob, 0));
  options.config.real_data = RealKvHashMode::kNone;
  FakeEngine no_data(options);
  Record(*no_data.canary, recorder);
  no_data.AddRequest(4);
  no_data.Step();
  no_data.Step();
  EXPECT_TRUE(recorder.events.empty());
  EXPECT_TRUE(no_data.log.Contains("target_group=FULL has real-KV sources"));
}

// ---- Detection, end to end ----------------------------------------------------------------------

TEST(Perturbation, ReqToTokenIsCaughtByTheChainOrPositionCheck) {
  RecordedEngine run(PerturbOptions(Fire(&PerturbConfig::req_to_token_prob)));
  FakeEngine& engine = run.engine;
  const Recorder& recorder = run.recorder;
  Serve(engine, {10, 10}, 2);
  EXPECT_TRUE(recorder.events.empty()) << "fired during the warm-up";
  Serve(engine, {}, 3);
  ASSERT_FALSE(recorder.events.empty());
  const PerturbationEvent& event = recorder.events.front();
  EXPECT_EQ(event.kind, "req_to_token");
  EXPECT_EQ(event.step, 2);
  EXPECT_TRUE(engine.log.Contains(
      "kv_canary perturb req_to_token: req_pool_idx=" + std::to_string(event.row) + " position=" +
      std::to_string(event.position) + " original_slot=" + std::to_string(event.original) +
      " new_slot=" + std::to_string(event.replacement)));
  ASSERT_FALSE(recorder.rows.empty());
  EXPECT_EQ(recorder.steps.front(), event.step + 2) << "reported one step after the step";
  const int64_t successor = engine.SlotOf(event.row, event.position + 1);
  bool caught = false;
  for (const ViolationRow& row : recorder.rows) {
    const bool chain_or_position = row.fail_reason_bits & (FailReason::kVerifyChainHashMismatch |
                                                           FailReason::kVerifyPositionMismatch);
    if (row.kernel_kind == kHeadK && chain_or_position &&
        (row.slot_idx == event.replacement || row.slot_idx == successor)) {
      caught = true;
    }
  }
  EXPECT_TRUE(caught);
}

TEST(Perturbation, RealKvUsedIsCaughtByTailRealKvHash) {
  // TAIL of the same step sees it; the next step reports it.
  const PerturbationEvent event = ExpectFlipCaughtByTail(
      &PerturbConfig::real_kv_used_prob, "real_kv_used", {12, 6}, 5, /*report_delay=*/2);
  EXPECT_EQ(event.replacement, event.original ^ 0xFF);
}

TEST(Perturbation, RealKvPostForwardIsCaughtByTheNextStepsTail) {
  // Flipped after step 2's TAIL stored the fingerprint: step 3's TAIL sees it, step 4 reports.
  ExpectFlipCaughtByTail(&PerturbConfig::real_kv_post_forward_prob, "real_kv_post_forward", {5, 8},
                         6, /*report_delay=*/3);
}

TEST(Perturbation, RealKvUnusedCacheRunsOnSweepStepsAndIsCaughtBySweep) {
  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::real_kv_unused_cache_prob));
  options.config.sweep_interval = 3;
  FakeEngine engine(options);
  Recorder recorder;
  Record(*engine.canary, recorder);
  const int64_t row = engine.AddRequest(4);
  engine.Step();
  // The cached prefix is request 1's prompt (slots written by the first step).
  FlatRadix radix({{SlotsOf(engine, row, 4)}});
  engine.canary->AttachRadixCache(&radix);
  for (int i = 1; i < 6; ++i) engine.Step();  // outer steps 1..5: only step 3 is a sweep step
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent& event = recorder.events[0];
  EXPECT_EQ(event.kind, "real_kv_unused_cache");
  EXPECT_EQ(event.step, 3);
  EXPECT_EQ(engine.SlotOf(row, event.position), event.slot);
  EXPECT_TRUE(Caught(recorder, static_cast<int64_t>(CanaryLaunchTag::kSweepKFull),
                     FailReason::kVerifyRealKvHashMismatch, event.slot));
}

TEST(Perturbation, NextTokenSwapSwapsTwoEntriesAfterItsOwnWarmup) {
  FakeEngine engine(PerturbOptions(Fire(&PerturbConfig::next_token_swap_prob)));
  Recorder recorder;
  Record(*engine.canary, recorder);
  const std::vector<int64_t> original = {10, 20, 30, 40};
  std::vector<int64_t> sampled = original;
  engine.canary->PerturbNextTokens(sampled);  // call 0: warm-up
  engine.canary->PerturbNextTokens(sampled);  // call 1: warm-up
  EXPECT_EQ(sampled, original);
  std::vector<int64_t> single = {5};
  engine.canary->PerturbNextTokens(single);  // call 2: one row cannot swap
  EXPECT_EQ(single, std::vector<int64_t>{5});
  engine.canary->PerturbNextTokens(sampled);  // call 3
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent& event = recorder.events[0];
  EXPECT_EQ(event.step, 3);
  const int64_t i = event.row, j = event.position;
  ASSERT_NE(i, j);
  std::vector<int64_t> expected = original;
  std::swap(expected[i], expected[j]);
  EXPECT_EQ(sampled, expected);
  EXPECT_EQ(event.original, original[i]);
  EXPECT_EQ(event.replacement, original[j]);
  EXPECT_TRUE(engine.log.Contains("kv_canary perturb next_token_swap: swapped i=" +
                                  std::to_string(i) + " j=" + std::to_string(j) + " step=3"));
}

TEST(Perturbation, NextTokenSwapIsCaughtByTheWriteInputAssert) {
  FakeEngineOptions options = PerturbOptions(Fire(&PerturbConfig::next_token_swap_prob));
  options.config.enable_write_input_assert = true;
  FakeEngine engine(options);
  Recorder recorder;
  Record(*engine.canary, recorder);
  engine.AddRequest(3);
  engine.AddRequest(5);
  engine.Step();  // prefill; sampler call 0
  engine.Step();  // sampler call 1
  EXPECT_TRUE(recorder.events.empty());
  engine.Step();  // sampler call 2: swaps the two decoded tokens
  ASSERT_EQ(recorder.events.size(), 1u);
  const PerturbationEvent event = recorder.events[0];  // a copy: the next step records more
  engine.Step();
  ASSERT_FALSE(recorder.rows.empty());
  EXPECT_EQ(recorder.steps.front(), 4) << "written in step 2, reported at the end of step 3";
  bool stored_j_expected_i = false, stored_i_expected_j = false;
  for (const ViolationRow& row : recorder.rows) {
    EXPECT_TRUE(row.fail_reason_bits & FailReason::kWriteTokenMismatch);
    EXPECT_FALSE(row.fail_reason_bits & ~(FailReason::kWriteTokenMismatch));
    if (row.stored_token == event.replacement && row.expected_token == event.original) {
      stored_j_expected_i = true;
    }
    if (row.stored_token == event.original && row.expected_token == event.replacement) {
      stored_i_expected_j = true;
    }
  }
  EXPECT_TRUE(stored_j_expected_i);
  EXPECT_TRUE(stored_i_expected_j);
}

}  // namespace
}  // namespace kvcanary::runtime
