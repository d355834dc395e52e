// Speculative decoding (EAGLE-style) over the step protocol: a draft worker runs three inner
// forwards per step, each writing one draft token per request after verifying the prefix the
// earlier ones wrote (tests/runtime/fake_draft_engine.h). A clean run with rejected drafts
// reports nothing and counts every inner forward; a draft written at position + 1 fails the
// write's chain-position check; the draft pool's token shift is what the expected-token check
// needs, and an accepted draft whose KV holds another token is caught by it.
#include <gtest/gtest.h>

#include <numeric>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/fake_draft_engine.h"

namespace kvcanary::runtime {
namespace {

using testing::DraftEngineOptions;
using testing::DraftFault;
using testing::FakeDraftEngine;

// Log mode, real-KV fingerprints, V records and the expected-token check on.
DraftEngineOptions DraftOptions() {
  DraftEngineOptions options;
  options.config.mode = Mode::kLog;
  options.config.real_data = RealKvHashMode::kPartial;
  options.config.enable_mha_v = true;
  options.config.enable_verify_token_assert = true;
  return options;
}

bool HasRow(const std::vector<ViolationRow>& seen, int64_t bit, int64_t slot) {
  for (const ViolationRow& row : seen) {
    if ((row.fail_reason_bits & bit) != 0 && row.slot_idx == slot) return true;
  }
  return false;
}

constexpr int kHeadK = static_cast<int>(CanaryLaunchTag::kHeadKFull);

TEST(Speculative, CleanDraftStepsReportNothingAndCountEveryInnerForward) {
  FakeDraftEngine engine(DraftOptions());
  const int64_t first = engine.AddRequest(10);
  const int64_t second = engine.AddRequest(6);
  engine.Prefill();
  // Every acceptance count from none to all: the rejected drafts' slots are handed out again.
  const std::vector<int64_t> accepts = {3, 1, 0, 2, 3, 1, 2, 0, 3, 3};
  for (int64_t accept : accepts) engine.DraftStep(accept);
  EXPECT_TRUE(engine.seen.empty());
  const int64_t accepted = std::accumulate(accepts.begin(), accepts.end(), int64_t{0});
  EXPECT_EQ(engine.KvLen(first), 10 + accepted);
  EXPECT_EQ(engine.KvLen(second), 6 + accepted);
  const MetricsSnapshot metrics = engine.canary->Metrics();
  EXPECT_EQ(metrics.violations_total, 0);
  EXPECT_EQ(engine.canary->outer_step(), 11);
  // The counters trail by one step: the prefill's forward and nine draft steps of three forwards,
  // each running one verify and one write per tag.
  EXPECT_EQ(metrics.kernel_runs[kHeadK], 2 * (1 + 3 * 9));
  // Each inner forward verified its whole prefix, the earlier forwards' drafts included.
  const std::vector<int64_t>& entries = engine.entries_per_step();
  EXPECT_EQ(metrics.protected_tokens[kHeadK],
            std::accumulate(entries.begin(), entries.end() - 1, int64_t{0}));
}

TEST(Speculative, DraftWrittenAtPositionPlusOneIsAWritePositionViolationOneStepLate) {
  FakeDraftEngine engine(DraftOptions());
  const int64_t row = engine.AddRequest(8);
  engine.AddRequest(5);
  engine.Prefill();
  engine.DraftStep(3);
  engine.DraftStep(2);
  // Inner forward 1 of the next step writes the draft of position p at p + 1.
  const int64_t p = engine.KvLen(row) + 1;
  engine.DraftStep(3, {DraftFault::Kind::kPositionPlusOne, /*inner=*/1, row});
  const int64_t slot = engine.SlotOf(row, p);
  EXPECT_TRUE(engine.seen.empty()) << "reported in the step it happened";
  engine.DraftStep(3);
  ASSERT_FALSE(engine.seen.empty());
  bool named = false;
  for (const ViolationRow& found : engine.seen) {
    if ((found.fail_reason_bits & FailReason::kWritePositionMismatch) == 0) continue;
    if (found.slot_idx != slot) continue;
    named = true;
    EXPECT_EQ(found.position, p + 1);
    EXPECT_EQ(found.expected_aux, p) << "the chain's previous position + 1";
  }
  EXPECT_TRUE(named) << "no write_position row names slot " << slot;
  // Inner forward 2's HEAD verify read the draft inner forward 1 wrote in the same step.
  EXPECT_TRUE(HasRow(engine.seen, FailReason::kVerifyPositionMismatch, slot));
  EXPECT_TRUE(engine.log.Contains("write_position"));
}

TEST(Speculative, DraftPoolDescribedWithoutItsShiftFailsTheTokenCheck) {
  DraftEngineOptions options = DraftOptions();
  options.install_offset = 0;  // the pool is shifted by one, the runtime is told it is not
  FakeDraftEngine engine(options);
  const int64_t row = engine.AddRequest(6);
  engine.Prefill();
  for (int i = 0; i < 3; ++i) engine.DraftStep(3);
  EXPECT_TRUE(HasRow(engine.seen, FailReason::kVerifyTokenMismatch, engine.SlotOf(row, 0)));
}

// Where CommitAWrongDraftToken's bad record lies.
struct WrongDraft {
  int64_t row = 0;
  int64_t position = 0;
  int64_t slot = 0;
};

// A draft step whose inner forward 0 commits the wrong token of a request at its first draft
// position, then two clean steps: the first finds the record, the second reports it.
WrongDraft CommitAWrongDraftToken(FakeDraftEngine& engine) {
  WrongDraft wrong;
  wrong.row = engine.AddRequest(7);
  engine.AddRequest(4);
  engine.Prefill();
  engine.DraftStep(3);
  wrong.position = engine.KvLen(wrong.row);
  engine.DraftStep(3, {DraftFault::Kind::kWrongAcceptedToken, /*inner=*/0, wrong.row});
  wrong.slot = engine.SlotOf(wrong.row, wrong.position);
  engine.DraftStep(3);
  EXPECT_TRUE(engine.seen.empty()) << "reported before the step after the one that found it";
  engine.DraftStep(3);
  return wrong;
}

TEST(Speculative, WrongAcceptedDraftTokenIsCaughtByTheTokenCheck) {
  FakeDraftEngine engine(DraftOptions());
  const WrongDraft wrong = CommitAWrongDraftToken(engine);
  ASSERT_FALSE(engine.seen.empty());
  bool named = false;
  for (const ViolationRow& found : engine.seen) {
    if (found.slot_idx != wrong.slot) continue;
    named = true;
    EXPECT_EQ(found.fail_reason_bits, FailReason::kVerifyTokenMismatch);
    EXPECT_EQ(found.position, wrong.position);
    // The shifted pool: position p holds the committed token of p + 1.
    EXPECT_EQ(found.expected_token, FakeDraftEngine::Oracle(wrong.row, wrong.position + 1));
    EXPECT_EQ(found.stored_token, found.expected_token + FakeDraftEngine::kWrongToken);
  }
  EXPECT_TRUE(named) << "no row names slot " << wrong.slot;
}

TEST(Speculative, WrongAcceptedDraftTokenGoesUnseenWithoutTheTokenCheck) {
  DraftEngineOptions options = DraftOptions();
  options.config.enable_verify_token_assert = false;
  FakeDraftEngine engine(options);
  CommitAWrongDraftToken(engine);
  // The record's chain is consistent with the token written: only the expected tokens tell.
  EXPECT_TRUE(engine.seen.empty());
}

}  // namespace
}  // namespace kvcanary::runtime
