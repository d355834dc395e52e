// VerifyRecordsNow: an engine's own walk (a finished request's slots) verified between steps, as
// a sweep pass verifies the cached prefixes. A walk that matches the records reports nothing; a
// mismatching one is reported as SWEEP rows by the second EndStep after the call; a bad call
// throws, naming the argument, and launches nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/radix_view.h"
#include "runtime/engine_scenarios.h"
#include "runtime/error_message.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;

// The slots of positions [0, n) of table row `row`.
std::vector<int64_t> RowSlots(const FakeEngine& engine, int64_t row, int64_t n) {
  std::vector<int64_t> slots;
  for (int64_t pos = 0; pos < n; ++pos) slots.push_back(engine.SlotOf(row, pos));
  return slots;
}

int64_t SweepRuns(const FakeEngine& engine) {
  const MetricsSnapshot metrics = engine.canary->Metrics();
  return metrics.kernel_runs[static_cast<int>(CanaryLaunchTag::kSweepKFull)];
}

TEST(WalkOfSequence, ChainsEachSlotToTheOneBefore) {
  const RadixWalk walk = WalkOfSequence({7, 3, 9});
  EXPECT_EQ(walk.slot_indices, (std::vector<int64_t>{7, 3, 9}));
  EXPECT_EQ(walk.positions, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(walk.prev_slot_indices, (std::vector<int64_t>{-1, 7, 3}));
  EXPECT_EQ(WalkOfSequence({}).size(), 0);
}

TEST(VerifyRecordsNow, ARequestsOwnSlotsPassAndAWrongPositionIsReportedTwoStepsLater) {
  FakeEngine engine(LogOptions());
  std::vector<ViolationRow> rows;
  engine.canary->SetViolationListener(
      [&rows](const ViolationRow& row, int64_t) { rows.push_back(row); });
  const int64_t row = engine.AddRequest(10);
  for (int i = 0; i < 3; ++i) engine.Step();  // the prompt and two decode tokens: 11 records
  const std::vector<int64_t> slots = RowSlots(engine, row, 11);

  engine.canary->VerifyRecordsNow(WalkOfSequence(slots));
  engine.Step();
  engine.Step();
  EXPECT_TRUE(rows.empty()) << "the request's own chain verifies";

  RadixWalk shifted = WalkOfSequence(slots);
  shifted.positions[4] += 1;  // the record of slot 4 holds position 4
  engine.canary->VerifyRecordsNow(shifted);
  engine.Step();
  EXPECT_TRUE(rows.empty()) << "reported one step late, as a sweep";
  engine.Step();
  ASSERT_FALSE(rows.empty());
  for (const ViolationRow& reported : rows) {
    EXPECT_EQ(reported.slot_idx, slots[4]);
    EXPECT_TRUE(reported.fail_reason_bits & FailReason::kVerifyPositionMismatch);
  }
}

TEST(VerifyRecordsNow, ABadCallThrowsAndLaunchesNothing) {
  FakeEngine engine(LogOptions());
  const int64_t row = engine.AddRequest(6);
  engine.Step();
  engine.Step();
  const std::vector<int64_t> slots = RowSlots(engine, row, 6);
  const int64_t pool = testing::FakeEngineOptions{}.num_slots;
  const int64_t runs_before = SweepRuns(engine);

  RadixWalk short_positions = WalkOfSequence(slots);
  short_positions.positions.pop_back();
  EXPECT_EQ(ErrorMessage([&] { engine.canary->VerifyRecordsNow(short_positions); }),
            "kv-canary: verify_records_now: slot_indices, positions and prev_slot_indices must "
            "have one length, got 6, 5 and 6");
  RadixWalk past_pool = WalkOfSequence(slots);
  past_pool.slot_indices[2] = pool;
  EXPECT_EQ(ErrorMessage([&] { engine.canary->VerifyRecordsNow(past_pool); }),
            "kv-canary: verify_records_now: slot_indices[2] must be in [0, " +
                std::to_string(pool) + "), got " + std::to_string(pool));
  RadixWalk bad_prev = WalkOfSequence(slots);
  bad_prev.prev_slot_indices[1] = -2;
  EXPECT_EQ(ErrorMessage([&] { engine.canary->VerifyRecordsNow(bad_prev); }),
            "kv-canary: verify_records_now: prev_slot_indices[1] must be in [-1, " +
                std::to_string(pool) + "), got -2");
  RadixWalk negative_position = WalkOfSequence(slots);
  negative_position.positions[0] = -1;
  EXPECT_EQ(ErrorMessage([&] { engine.canary->VerifyRecordsNow(negative_position); }),
            "kv-canary: verify_records_now: positions[0] must be >= 0, got -1");

  const testing::PreparedStep step = engine.PrepareStep();
  engine.canary->BeginStep(step.input);
  EXPECT_EQ(ErrorMessage([&] { engine.canary->VerifyRecordsNow(WalkOfSequence(slots)); }),
            "kv-canary: verify_records_now called inside a step (between begin_step and "
            "end_step); call it between steps");
  engine.canary->AbandonStep();
  engine.Step();
  engine.Step();
  // Each step's SWEEP counters trail by one step: none of the refused calls launched a verify.
  EXPECT_EQ(SweepRuns(engine), runs_before);
}

}  // namespace
}  // namespace kvcanary::runtime
