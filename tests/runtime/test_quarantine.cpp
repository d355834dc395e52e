// Quarantine over the fake engine (tests/runtime/fake_engine.h): the requests a violation touched
// come back from TakeAffectedRequests once the report is in, matched by the slot the request's
// table holds at the violation's position, and nothing comes back in the other modes.
#include <gtest/gtest.h>

#include <algorithm>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

FakeEngineOptions QuarantineOptions() {
  FakeEngineOptions options = LogOptions();
  options.config.on_violation = OnViolation::kQuarantine;
  return options;
}

std::vector<int64_t> RequestsOf(const std::vector<AffectedRequest>& affected) {
  std::vector<int64_t> requests;
  for (const AffectedRequest& request : affected) requests.push_back(request.req_pool_idx);
  return requests;
}

// Two requests of 10 tokens, three steps (prefill and two decodes).
void TwoRequests(FakeEngine& engine) {
  engine.AddRequest(10);
  engine.AddRequest(10);
  for (int i = 0; i < 3; ++i) engine.Step();
}

// TwoRequests, then `corrupt`, a step that finds it and one that reports it: what the runtime
// names then.
template <typename Corrupt>
std::vector<AffectedRequest> AffectedAfter(FakeEngine& engine, Corrupt corrupt) {
  TwoRequests(engine);
  corrupt();
  engine.Step();
  engine.Step();
  return engine.canary->TakeAffectedRequests();
}

// Whether the request's table holds `slot` at `position` among its reported pairs.
bool HoldsPair(const AffectedRequest& request, int64_t slot, int64_t position) {
  for (size_t i = 0; i < request.slots.size(); ++i) {
    if (request.slots[i] == slot && request.positions[i] == position) return true;
  }
  return false;
}

TEST(Quarantine, RemappedEntryAffectsTheRequestsHoldingTheSlotOnly) {
  FakeEngine engine(QuarantineOptions());
  engine.AddRequest(10);
  TwoRequests(engine);  // requests 1 to 3
  const int64_t bad_slot = engine.SlotOf(2, 6);
  engine.SetSlot(1, 4, bad_slot);
  engine.Step();  // step 3 finds it
  EXPECT_TRUE(engine.canary->TakeAffectedRequests().empty()) << "known one step late";
  engine.Step();  // step 4 reports it
  const std::vector<AffectedRequest> affected = engine.canary->TakeAffectedRequests();
  // Request 1 reads the slot at position 4; request 2 owns it at position 6; request 3 holds
  // none of the failing slots.
  ASSERT_EQ(RequestsOf(affected), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(HoldsPair(affected[0], bad_slot, 4));
  EXPECT_TRUE(HoldsPair(affected[1], bad_slot, 6));
  EXPECT_TRUE(affected[0].fail_reason_bits & FailReason::kVerifyPositionMismatch);
  EXPECT_EQ(affected[0].step, 4);
  EXPECT_FALSE(affected[0].ring_overflow);
  EXPECT_TRUE(engine.log.Contains("WARNING kv-canary: quarantine: 2 request(s)"));
  EXPECT_TRUE(engine.log.Contains("WARNING kv_canary violation"));
  EXPECT_TRUE(engine.canary->TakeAffectedRequests().empty()) << "taken once";
}

TEST(Quarantine, FlippedKvByteAffectsTheRequestHoldingTheSlot) {
  FakeEngine engine(QuarantineOptions());
  int64_t slot = -1;
  const std::vector<AffectedRequest> affected = AffectedAfter(engine, [&] {
    EXPECT_TRUE(engine.canary->TakeAffectedRequests().empty());
    slot = engine.SlotOf(2, 5);
    engine.FlipKByte(slot, 3);
  });
  ASSERT_EQ(RequestsOf(affected), (std::vector<int64_t>{2}));
  EXPECT_TRUE(affected.front().fail_reason_bits & FailReason::kVerifyRealKvHashMismatch);
  EXPECT_NE(std::find(affected.front().slots.begin(), affected.front().slots.end(), slot),
            affected.front().slots.end());
}

TEST(Quarantine, RingOverflowAffectsEveryLiveRow) {
  FakeEngineOptions options = QuarantineOptions();
  options.config.ring_capacity = 1;
  FakeEngine engine(options);
  const std::vector<AffectedRequest> affected =
      AffectedAfter(engine, [&] { engine.SetSlot(1, 4, engine.SlotOf(2, 6)); });
  ASSERT_EQ(RequestsOf(affected), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(affected[0].ring_overflow);
  EXPECT_TRUE(affected[1].ring_overflow);
}

TEST(Quarantine, CleanRunAffectsNothing) {
  FakeEngine engine(QuarantineOptions());
  TwoRequests(engine);
  for (int i = 0; i < 5; ++i) engine.Step();
  EXPECT_TRUE(engine.canary->TakeAffectedRequests().empty());
}

TEST(Quarantine, LogModeKeepsNoAffectedRequests) {
  FakeEngine engine(LogOptions());
  EXPECT_TRUE(AffectedAfter(engine, [&] { engine.SetSlot(1, 4, engine.SlotOf(2, 6)); }).empty());
  EXPECT_TRUE(engine.log.Contains("WARNING kv_canary violation"));
}

TEST(Quarantine, BlockTableSlotsAreMatchedThroughTheirBlock) {
  FakeEngineOptions options = QuarantineOptions();
  options.block_size = 4;
  options.block_table = true;
  FakeEngine engine(options);
  // Block 1 of request 1 (positions 4..7) now names request 2's block 1.
  const std::vector<AffectedRequest> affected =
      AffectedAfter(engine, [&] { engine.SetBlock(1, 1, engine.BlockOf(2, 1)); });
  // Request 1 reads request 2's block at positions 4..7 (and its position 8 chains from it);
  // request 2 owns the block there.
  ASSERT_EQ(RequestsOf(affected), (std::vector<int64_t>{1, 2}));
  for (const AffectedRequest& request : affected) {
    for (const int64_t position : request.positions) {
      EXPECT_GE(position, 4);
      EXPECT_LE(position, 8);
    }
  }
}

}  // namespace
}  // namespace kvcanary::runtime
