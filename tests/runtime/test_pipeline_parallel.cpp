// Pipeline parallelism: the model's layers are split into stages, each stage on its own device with
// its own KV pool for its layers and its own runtime (install, ring, reporter), driven through the
// same four phases around its part of every forward. The stages share the scheduler's decisions
// (the same requests in the same slots), so a bookkeeping fault in req_to_token reaches every
// stage's canary, while a KV fault in one stage's layers reaches that stage's only. With the
// violation signal all-reduced over the pipeline group, every stage learns of it: raise mode stops
// all stages at the same step. Here two stages of a four-layer model (layers 0-1 and 2-3) are two
// fake engines.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/fake_engine.h"
#include "runtime/perturbation_util.h"
#include "runtime/thread_collective.h"
#include "runtime/two_ranks.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

// One stage: its two layers' K and V, every layer fingerprinted, V records on.
FakeEngineOptions StageOptions(Mode mode) {
  FakeEngineOptions options;
  options.layers = 2;
  options.config.mode = mode;
  options.config.real_data = RealKvHashMode::kPartial;
  options.config.fingerprint_layers = FingerprintLayers::kAll;
  options.config.enable_mha_v = true;
  return options;
}

// One forward of the pipeline: each stage runs its layers in order, each inside its own phases.
void StepPipeline(std::vector<FakeEngine*> stages) {
  for (FakeEngine* stage : stages) stage->Step();
}

TEST(PipelineParallel, EachStageChecksItsOwnLayersAndEveryStageSeesASharedTableFault) {
  FakeEngine first(StageOptions(Mode::kLog));
  FakeEngine second(StageOptions(Mode::kLog));
  Recorder first_shown, second_shown;  // the rows each stage's reporter showed, and their steps
  Record(*first.canary, first_shown);
  Record(*second.canary, second_shown);
  // The scheduler's decisions reach every stage: the same requests in the same slots.
  for (FakeEngine* stage : {&first, &second}) {
    stage->AddRequest(12);
    stage->AddRequest(9);
  }
  for (int i = 0; i < 3; ++i) StepPipeline({&first, &second});
  ASSERT_EQ(first.SlotOf(1, 5), second.SlotOf(1, 5));

  // A byte of the second stage's layer 3 (its pool's layer 1) flips: only its own canary reads it.
  const int64_t flipped = second.SlotOf(1, 5);
  second.FlipKByte(flipped, 3, /*layer=*/1);
  for (int i = 0; i < 2; ++i) StepPipeline({&first, &second});
  EXPECT_TRUE(first_shown.rows.empty()) << "the first stage's pool was never touched";
  EXPECT_TRUE(Caught(second_shown, kTailK, FailReason::kVerifyRealKvHashMismatch, flipped));

  // The scheduler remaps position 4 of request 2 to a live slot of request 1, on every stage.
  const int64_t remapped = first.SlotOf(1, 6);
  for (FakeEngine* stage : {&first, &second}) stage->SetSlot(2, 4, remapped);
  const size_t second_before = second_shown.rows.size();
  for (int i = 0; i < 2; ++i) StepPipeline({&first, &second});
  EXPECT_TRUE(Caught(first_shown, kHeadK, FailReason::kVerifyPositionMismatch, remapped));
  EXPECT_TRUE(Caught(second_shown, kHeadK, FailReason::kVerifyPositionMismatch, remapped));
  // Both stages report it at the same step: their runtimes step together.
  ASSERT_FALSE(first_shown.steps.empty());
  ASSERT_GT(second_shown.steps.size(), second_before);
  EXPECT_EQ(first_shown.steps.front(), second_shown.steps[second_before]);
}

// The two stages on their own threads, as on their own devices, meeting in the pipeline group's
// all-reduce once a step; the second stage's layer 3 takes a flipped byte before step
// kBreakAtStep.
testing::RankOutcomes RunTwoStages(Mode mode) {
  testing::RankPlan plan;
  plan.options = StageOptions(mode);
  plan.break_rank = [](FakeEngine& stage, int64_t row) {
    stage.FlipKByte(stage.SlotOf(row, 5), 3, /*layer=*/1);
  };
  return testing::RunTwoCpuRanks(mode, plan);
}

TEST(PipelineParallel, RaiseModeStopsEveryStageWhenOneStagesLayersBreak) {
  testing::ExpectBothRaisedTogether(RunTwoStages(Mode::kRaise));
}

TEST(PipelineParallel, LogModeWarnsTheCleanStageAndBothKeepServing) {
  testing::ExpectBothKeptServing(RunTwoStages(Mode::kLog));
}

}  // namespace
}  // namespace kvcanary::runtime
