// Stored entries (a kvcanary addition): a fused stage's HEAD, given entry arrays, stores the
// step's verify entries there after its plan when they fit, and a fused verify given them reads
// them instead of deriving; a step with more entries than the arrays hold derives them and
// leaves the arrays alone. A verify that reads corrupted arrays reports what they say, which
// shows it read them. Bad arrays are refused before anything is written.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "property_plan_oracle.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kPrefix = 4;
constexpr int64_t kFirstSlot = 10;  // row 1 holds slots 10, 11, ...

// One request (req_to_token row 1) whose prefill of 4 tokens wrote consistent records; the step
// under test verifies those 4 and writes token 5 at position 4 (slot 14).
class StoredEntriesTest : public ::testing::Test {
 protected:
  StoredEntriesTest() : state_(32), plan_(1, 2) {
    for (int64_t p = 0; p < 8; ++p) table_.at(1, p) = static_cast<int32_t>(kFirstSlot + p);
    const HostTensor<int64_t> zero = HostTensor<int64_t>::Of({0});
    const HostTensor<int64_t> four = HostTensor<int64_t>::Of({kPrefix});
    const HostTensor<int64_t> ids = HostTensor<int64_t>::Of({1, 2, 3, 4});
    const HostTensor<int64_t> positions = HostTensor<int64_t>::Of({0, 1, 2, 3});
    const HostTensor<int64_t> slots = HostTensor<int64_t>::Of({10, 11, 12, 13});
    Plan(PlanCallOver(plan_, rp_.view(), zero.view(), four.view(), table_.view()));
    Write(WriteCallOver(state_.Context(), plan_, ids.view(), positions.view(), slots.view()));
    state_.slot_run_counter[0] = state_.kernel_run_counter[0] = 0;
  }

  // The step's stage: HEAD (the offsets-only plan first) or TAIL, with `stored` as the verify's
  // stored entries.
  FusedStageArgs Stage(bool head, const std::optional<VerifyPlanView>& stored) const {
    PlanArgs plan = PlanCallOver(plan_, rp_.view(), prefix_.view(), extend_.view(), table_.view());
    plan.verify_plan_out =
        VerifyPlanView{TensorView(), TensorView(),           TensorView(),
                       TensorView(), plan_.num_valid.view(), plan_.enable.view()};
    plan.verify_capacity = 16;
    plan.verify_offsets_scratch = scratch_.view();
    FusedVerifyArgs verify{.context = state_.Context(),
                           .inputs = plan.inputs,
                           .verify_offsets_scratch = scratch_.view(),
                           .verify_num_valid = plan_.num_valid.view(),
                           .verify_enable = plan_.enable.view(),
                           .verify_capacity = 16,
                           .stored_entries = stored};
    verify.inputs.extend_seq_lens = TensorView();
    return {.plan = head ? std::optional<PlanArgs>(plan) : std::nullopt,
            .verify = verify,
            .write = WriteCallOver(state_.Context(), plan_, ids_.view(), positions_.view(),
                                   slots_.view())};
  }

  CanaryState state_;
  PlanBuffers plan_;
  HostTensor<int32_t> table_ = HostTensor<int32_t>({2, 8}, 0);
  HostTensor<int64_t> rp_ = HostTensor<int64_t>::Of({1});
  HostTensor<int64_t> prefix_ = HostTensor<int64_t>::Of({kPrefix});
  HostTensor<int64_t> extend_ = HostTensor<int64_t>::Of({1});
  HostTensor<int64_t> scratch_ = HostTensor<int64_t>({2}, 0);
  HostTensor<int64_t> ids_ = HostTensor<int64_t>::Of({5});
  HostTensor<int64_t> positions_ = HostTensor<int64_t>::Of({kPrefix});
  HostTensor<int64_t> slots_ = HostTensor<int64_t>::Of({kFirstSlot + kPrefix});
};

TEST_F(StoredEntriesTest, HeadStoresTheEntriesAndTheTailReadsThem) {
  PlanBuffers stored = SentinelBuffers(/*verify_capacity=*/6, 1);
  FusedStage(Stage(/*head=*/true, stored.verify()));
  EXPECT_EQ(Head(stored.slots, 4), (std::vector<int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(Head(stored.positions, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Head(stored.prevs, 4), (std::vector<int64_t>{-1, 10, 11, 12}));
  EXPECT_EQ(stored.slots[4], kSentinel) << "only the step's entries are stored";
  EXPECT_TRUE(state_.rows().empty());
  EXPECT_EQ(state_.slot_run_counter[0], kPrefix + 1);  // 4 verified, 1 written

  // The TAIL reads the arrays: an entry altered there is reported as the arrays say, though the
  // table and the record agree.
  stored.positions.values()[2] = 7;
  FusedStage(Stage(/*head=*/false, stored.verify()));
  const std::vector<ViolationRow> rows = state_.rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].slot_idx, 12);
  EXPECT_EQ(rows[0].position, 2);
  EXPECT_EQ(rows[0].fail_reason_bits, FailReason::kVerifyPositionMismatch);
}

// Arrays shorter than the step's entries are neither written nor read: both verifies derive.
TEST_F(StoredEntriesTest, AStepLongerThanTheArraysDerivesItsEntries) {
  PlanBuffers stored = SentinelBuffers(/*verify_capacity=*/kPrefix - 1, 1);
  FusedStage(Stage(/*head=*/true, stored.verify()));
  FusedStage(Stage(/*head=*/false, stored.verify()));
  for (const HostTensor<int64_t>* array : {&stored.slots, &stored.positions, &stored.prevs}) {
    EXPECT_EQ(Head(*array, kPrefix - 1), std::vector<int64_t>(kPrefix - 1, kSentinel));
  }
  EXPECT_TRUE(state_.rows().empty());
  EXPECT_EQ(state_.slot_run_counter[0], 2 * (kPrefix + 1));
}

TEST_F(StoredEntriesTest, BadArraysAreRefusedBeforeAnythingRuns) {
  PlanBuffers stored = SentinelBuffers(6, 1);
  ByteSnapshot snapshot(state_.canary, state_.ring, state_.write_index, state_.slot_run_counter,
                        state_.kernel_run_counter, stored.slots, stored.positions, stored.prevs,
                        stored.tokens, scratch_, plan_.num_valid);
  const HostTensor<int32_t> slots32({6}, 0);
  const HostTensor<int64_t> short_prevs({5}, 0);
  VerifyPlanView bad = stored.verify();
  bad.verify_slot_indices = slots32.view();
  EXPECT_KVC_ERROR(FusedVerify(Stage(false, bad).verify),
                   "kv-canary: stored_entries.verify_slot_indices must have dtype torch.int64, "
                   "got torch.int32");
  bad = stored.verify();
  bad.verify_prev_slot_indices = short_prevs.view();
  EXPECT_KVC_ERROR(
      FusedStage(Stage(true, bad)),
      "kv-canary: fused_stage verify: stored_entries.verify_prev_slot_indices length must "
      "be 6, got 5");
  bad = stored.verify();
  bad.verify_expected_tokens = TensorView();
  EXPECT_KVC_ERROR(
      FusedStage(Stage(false, bad)),
      "kv-canary: fused_stage verify: stored_entries.verify_expected_tokens is required, "
      "got None");
  // HEAD writes them (named as PlanEntries names its outputs): read-only arrays are refused there.
  bad = stored.verify();
  bad.verify_expected_positions = stored.positions.read_only_view();
  EXPECT_KVC_ERROR(FusedStage(Stage(true, bad)),
                   "kv-canary: fused_stage verify.stored_entries, stored after the plan: "
                   "out_verify_expected_positions must be writable");
  EXPECT_TRUE(snapshot.Unchanged());
  // A TAIL only reads them.
  FusedStage(Stage(false, bad));
  EXPECT_EQ(state_.kernel_run_counter[0], 2);
}

}  // namespace
}  // namespace kvcanary::testing
