// real_perturb_bytes: the real-KV flip that prefers (or, with require_orphan, insists on) an
// orphan slot, one cached in the radix view, unlocked and outside the step's batch, so that only
// the sweep can catch it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

constexpr int64_t kSweepK = static_cast<int64_t>(CanaryLaunchTag::kSweepKFull);

// Fires real_perturb_bytes at `probability` from step 1 on, with a sweep every step.
FakeEngineOptions OrphanOptions(double probability, bool require_orphan, uint64_t seed = 7) {
  PerturbConfig perturb = Fire(&PerturbConfig::real_perturb_bytes_prob, /*warmup_steps=*/1);
  perturb.real_perturb_bytes_prob = probability;
  perturb.real_perturb_bytes_require_orphan = require_orphan;
  perturb.seed = seed;
  FakeEngineOptions options = PerturbOptions(perturb);
  options.config.sweep_interval = 1;
  return options;
}

// Step 0 prefills a request of 8 tokens (`finished`) and one of 4 (`running`); then `finished`
// leaves the batch. The radix view caches both prompts, the finished one unlocked.
struct OrphanScene {
  explicit OrphanScene(const FakeEngineOptions& options, bool lock_finished = false)
      : run(options) {
    finished = run.engine.AddRequest(8);
    running = run.engine.AddRequest(4);
    run.engine.Step();
    run.engine.FinishRequest(finished);
    radix = std::make_unique<FlatRadix>(std::vector<FlatRadix::Node>{
        {SlotsOf(run.engine, finished, 8), lock_finished}, {SlotsOf(run.engine, running, 4)}});
    run.engine.canary->AttachRadixCache(radix.get());
  }
  void Steps(int count) {
    for (int i = 0; i < count; ++i) run.engine.Step();
  }
  std::vector<PerturbationEvent> Events(const std::string& kind) const {
    std::vector<PerturbationEvent> out;
    for (const PerturbationEvent& event : run.recorder.events) {
      if (event.kind == kind) out.push_back(event);
    }
    return out;
  }

  RecordedEngine run;
  int64_t finished = 0;
  int64_t running = 0;
  std::unique_ptr<FlatRadix> radix;
};

// The reported steps of the SWEEP real-KV rows at `slot`.
std::vector<int64_t> SweepReports(const Recorder& recorder, int64_t slot) {
  std::vector<int64_t> steps;
  for (size_t i = 0; i < recorder.rows.size(); ++i) {
    const ViolationRow& row = recorder.rows[i];
    if (row.kernel_kind == kSweepK && row.slot_idx == slot &&
        (row.fail_reason_bits & FailReason::kVerifyRealKvHashMismatch)) {
      steps.push_back(recorder.steps[i]);
    }
  }
  return steps;
}

TEST(RealPerturbBytes, EveryFlipLandsInAnOrphanSlotAndTheNextSweepCatchesIt) {
  OrphanScene scene(OrphanOptions(1.0, /*require_orphan=*/true));
  scene.Steps(6);  // steps 1..6 each flip
  const std::vector<int64_t> orphans = SlotsOf(scene.run.engine, scene.finished, 8);
  const std::vector<PerturbationEvent> events = scene.Events("real_perturb_bytes");
  ASSERT_EQ(events.size(), 6u);
  const Recorder& recorder = scene.run.recorder;
  std::vector<int64_t> flipped_before;
  for (const PerturbationEvent& event : events) {
    ASSERT_GE(event.position, 0);
    ASSERT_LT(event.position, 8);
    EXPECT_EQ(event.slot, orphans[event.position]) << "not an orphan slot: " << event.slot;
    EXPECT_EQ(event.row, -1);
    EXPECT_EQ(event.replacement, event.original ^ 0xFF);
    EXPECT_EQ(event.layer, 0);
    EXPECT_GE(event.byte, 0);
    EXPECT_LT(event.byte, kRealKvBlockBytes) << "partial folds only the first 16 bytes";
    // The sweep of the flip's own step sees it; the reporter shows it one or two steps later.
    const std::vector<int64_t> reports = SweepReports(recorder, event.slot);
    EXPECT_TRUE(std::any_of(reports.begin(), reports.end(), [&](int64_t step) {
      return step > event.step && step <= event.step + 2;
    })) << "step " << event.step << " slot " << event.slot;
    if (std::find(flipped_before.begin(), flipped_before.end(), event.slot) ==
        flipped_before.end()) {
      // A slot's first flip: the slot was clean until that step.
      EXPECT_TRUE(std::none_of(reports.begin(), reports.end(),
                               [&](int64_t step) { return step <= event.step; }));
      flipped_before.push_back(event.slot);
    }
  }
  for (const ViolationRow& row : recorder.rows) {
    EXPECT_EQ(row.kernel_kind, kSweepK) << "an orphan is outside HEAD's and TAIL's batch";
  }
}

TEST(RealPerturbBytes, RequireOrphanWithoutAnOrphanNeverFires) {
  // The finished prompt's node is locked and the running request's slots are in the batch.
  OrphanScene locked(OrphanOptions(1.0, /*require_orphan=*/true), /*lock_finished=*/true);
  locked.Steps(4);
  EXPECT_TRUE(locked.run.recorder.events.empty());
  EXPECT_TRUE(locked.run.recorder.rows.empty());
  EXPECT_TRUE(locked.run.engine.log.Contains(
      "kv_canary perturb real_perturb_bytes: skipped because the radix cache has no orphan slot "
      "and require_orphan is set"));

  // No radix view at all.
  RecordedEngine bare(OrphanOptions(1.0, /*require_orphan=*/true));
  Serve(bare.engine, {6}, 4);
  EXPECT_TRUE(bare.recorder.events.empty());
  EXPECT_TRUE(bare.recorder.rows.empty());
  EXPECT_TRUE(bare.engine.log.Contains("skipped because no radix cache is attached and "
                                       "require_orphan is set"));
}

TEST(RealPerturbBytes, WithoutRequireOrphanItFallsBackToALiveSlotThatTailCatches) {
  OrphanScene scene(OrphanOptions(1.0, /*require_orphan=*/false), /*lock_finished=*/true);
  scene.Steps(1);
  const std::vector<PerturbationEvent> events = scene.Events("real_perturb_bytes");
  ASSERT_EQ(events.size(), 1u);
  const PerturbationEvent& event = events[0];
  EXPECT_EQ(event.row, scene.running);
  EXPECT_EQ(event.slot, scene.run.engine.SlotOf(scene.running, event.position));
  scene.Steps(1);
  EXPECT_TRUE(Caught(scene.run.recorder, kTailK, FailReason::kVerifyRealKvHashMismatch,
                     event.slot));
}

TEST(RealPerturbBytes, ProbabilityZeroNeverFires) {
  // next_token_swap installs the perturber; without the write-input assert nothing detects it.
  FakeEngineOptions options = OrphanOptions(0.0, /*require_orphan=*/true);
  options.perturb.next_token_swap_prob = 1.0;
  OrphanScene scene(options);
  scene.run.engine.AddRequest(3);  // two decoding rows, so next_token_swap has a pair to swap
  scene.Steps(20);
  EXPECT_FALSE(scene.Events("next_token_swap").empty()) << "the perturber is installed";
  EXPECT_TRUE(scene.Events("real_perturb_bytes").empty());
  EXPECT_TRUE(scene.run.recorder.rows.empty());
}

// The (step, slot, layer, byte, original) of every real_perturb_bytes event of a 12-step run.
std::vector<std::vector<int64_t>> SeededRun(uint64_t seed, RealKvHashMode real_data) {
  FakeEngineOptions options = OrphanOptions(0.5, /*require_orphan=*/true, seed);
  options.config.real_data = real_data;
  OrphanScene scene(options);
  scene.Steps(12);
  std::vector<std::vector<int64_t>> out;
  for (const PerturbationEvent& e : scene.Events("real_perturb_bytes")) {
    out.push_back({e.step, e.slot, e.layer, e.byte, e.original});
  }
  return out;
}

TEST(RealPerturbBytes, ASeededRunIsReproducible) {
  const std::vector<std::vector<int64_t>> first = SeededRun(11, RealKvHashMode::kPartial);
  EXPECT_EQ(first, SeededRun(11, RealKvHashMode::kPartial));
  EXPECT_GT(first.size(), 0u);
  EXPECT_LT(first.size(), 12u) << "probability 0.5 fired on every step";
}

TEST(RealPerturbBytes, RealDataAllFlipsAnyFoldedByte) {
  // ALL folds the whole 32-byte strip, so over enough flips some byte lies past the first 16.
  const std::vector<std::vector<int64_t>> events = SeededRun(3, RealKvHashMode::kAll);
  ASSERT_FALSE(events.empty());
  int64_t highest = 0;
  for (const std::vector<int64_t>& e : events) highest = std::max(highest, e[3]);
  EXPECT_GE(highest, kRealKvBlockBytes);
  EXPECT_LT(highest, 32);
}

TEST(RealPerturbBytes, FlipsAnyFingerprintedLayerAndTheSweepCatchesEach) {
  FakeEngineOptions options = OrphanOptions(1.0, /*require_orphan=*/true);
  options.layers = 3;
  options.config.fingerprint_layers = FingerprintLayers::kAll;
  OrphanScene scene(options);
  scene.Steps(8);
  const std::vector<PerturbationEvent> events = scene.Events("real_perturb_bytes");
  ASSERT_EQ(events.size(), 8u);
  std::vector<int64_t> layers;
  for (const PerturbationEvent& event : events) {
    ASSERT_GE(event.layer, 0);
    ASSERT_LT(event.layer, 3);
    layers.push_back(event.layer);
    EXPECT_FALSE(SweepReports(scene.run.recorder, event.slot).empty()) << event.slot;
  }
  std::sort(layers.begin(), layers.end());
  EXPECT_GT(std::unique(layers.begin(), layers.end()) - layers.begin(), 1)
      << "every flip hit the same layer";
}

TEST(RealPerturbBytes, ProbabilityOutsideTheUnitIntervalIsRefusedAtInstall) {
  PerturbConfig perturb;
  perturb.real_perturb_bytes_prob = -0.25;
  EXPECT_EQ(ErrorMessage([&] { FakeEngine engine(PerturbOptions(perturb)); }),
            "kv-canary: KVCANARY_REAL_PERTURB_BYTES_PROB must be in [0, 1], got -0.25");
}

}  // namespace
}  // namespace kvcanary::runtime
