// FusedStage (a kvcanary addition): one call for a forward's HEAD (plan, fused verify, write) or
// TAIL (fused verify, write) must equal the separate ops in that order: the same records, rows,
// counters and plan outputs, for a K/V pair; a write that lands on a slot the verify reads must
// not be seen by that verify. A rejected call changes nothing, whichever part is bad.
#include <gtest/gtest.h>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary {
namespace {

using testing::ByteSnapshot;
using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;

constexpr int64_t kSlots = 64;
constexpr int64_t kTailK = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);
constexpr int64_t kTailV = static_cast<int64_t>(CanaryLaunchTag::kTailVFull);

// Two requests (rows 1 and 2 of req_to_token) with prefixes 5 and 3, each writing 2 tokens, over
// records that hold some consistent chains and some noise. Row 1's second new token lands on slot
// 22, which row 2's prefix reads: the verify must see the record from before the write.
struct StageWorld {
  StageWorld() : k(kSlots), v(kSlots), plan(/*verify_capacity=*/1, /*write_capacity=*/4) {
    testing::FillArbitraryPair(k, v, 11);
    for (int64_t p = 0; p < 8; ++p) {
      table.values()[1 * 8 + p] = static_cast<int32_t>(10 + p);  // row 1: slots 10..17
      table.values()[2 * 8 + p] = static_cast<int32_t>(20 + p);  // row 2: slots 20..27
    }
    k.chain_assert[0] = v.chain_assert[0] = 1;
  }

  // V shares K's ring and write index, as a runtime's halves do.
  LaunchContext VContext() const {
    LaunchContext context = v.Context(kTailV);
    context.violation_ring = k.ring.view();
    context.violation_write_index = k.write_index.view();
    return context;
  }
  PlanInputs Inputs() const {
    PlanInputs in = testing::BatchInputs(rp.view(), prefix.view(), extend.view(), table.view());
    if (verify_sample > 1) {
      in.verify_sample = verify_sample;
      in.verify_phase = phase.view();
    }
    return in;
  }
  // The forward's offsets-only plan: counts and write plan into `plan`, offsets into `scratch`.
  PlanArgs PlanCall() const {
    PlanArgs args;
    args.inputs = Inputs();
    args.verify_plan_out = VerifyPlanView{TensorView(), TensorView(),          TensorView(),
                                          TensorView(), plan.num_valid.view(), plan.enable.view()};
    args.write_plan_out = plan.write();
    args.verify_capacity = 16;
    args.verify_offsets_scratch = scratch.view();
    return args;
  }
  FusedVerifyArgs VerifyCall() const {
    FusedVerifyArgs args{.context = k.Context(kTailK),
                         .paired_context = VContext(),
                         .inputs = Inputs(),
                         .verify_offsets_scratch = scratch.view(),
                         .verify_num_valid = plan.num_valid.view(),
                         .verify_enable = plan.enable.view(),
                         .verify_capacity = 16};
    args.inputs.extend_seq_lens = TensorView();
    return args;
  }
  WriteArgs WriteCall() const {
    WriteArgs args =
        testing::WriteCallOver(k.Context(kTailK), plan, ids.view(), positions.view(), slots.view());
    args.paired_context = VContext();
    return args;
  }
  // Sampled verify, one run in K, over `phase`.
  void SampleEvery(int64_t k) { verify_sample = k; }
  FusedStageArgs StageCall(bool with_plan) const {
    return {.plan = with_plan ? std::optional<PlanArgs>(PlanCall()) : std::nullopt,
            .verify = VerifyCall(),
            .write = WriteCall()};
  }

  void ExpectSameAs(const StageWorld& other) const {
    EXPECT_EQ(k.canary.values(), other.k.canary.values());
    EXPECT_EQ(v.canary.values(), other.v.canary.values());
    EXPECT_EQ(k.rows(), other.k.rows());
    EXPECT_EQ(k.write_index[0], other.k.write_index[0]);
    EXPECT_EQ(k.slot_run_counter[0], other.k.slot_run_counter[0]);
    EXPECT_EQ(v.slot_run_counter[0], other.v.slot_run_counter[0]);
    EXPECT_EQ(k.kernel_run_counter[0], other.k.kernel_run_counter[0]);
    EXPECT_EQ(v.kernel_run_counter[0], other.v.kernel_run_counter[0]);
    EXPECT_EQ(scratch.values(), other.scratch.values());
    EXPECT_EQ(plan.offsets.values(), other.plan.offsets.values());
    EXPECT_EQ(plan.seeds.values(), other.plan.seeds.values());
    EXPECT_EQ(plan.num_valid[0], other.plan.num_valid[0]);
    EXPECT_EQ(plan.enable[0], other.plan.enable[0]);
    EXPECT_EQ(plan.num_valid_reqs[0], other.plan.num_valid_reqs[0]);
  }

  CanaryState k, v;
  PlanBuffers plan;
  HostTensor<int64_t> scratch = HostTensor<int64_t>({3}, -3);
  HostTensor<int32_t> table = HostTensor<int32_t>({3, 8}, 0);
  HostTensor<int64_t> rp = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix = HostTensor<int64_t>::Of({5, 3});
  HostTensor<int64_t> extend = HostTensor<int64_t>::Of({2, 2});
  HostTensor<int64_t> ids = HostTensor<int64_t>::Of({7, 8, 9, 10});
  HostTensor<int64_t> positions = HostTensor<int64_t>::Of({5, 6, 3, 4});
  HostTensor<int64_t> slots = HostTensor<int64_t>::Of({15, 22, 23, 24});
  HostTensor<int64_t> phase = HostTensor<int64_t>({3}, 0);
  int64_t verify_sample = 1;
};

// The world under test, and a twin driven by the separate ops.
class FusedStageTest : public ::testing::Test, protected StageWorld {
 protected:
  StageWorld separate;
};

TEST_F(FusedStageTest, HeadEqualsPlanThenFusedVerifyThenWrite) {
  Plan(separate.PlanCall());
  FusedVerify(separate.VerifyCall());
  Write(separate.WriteCall());

  FusedStage(StageCall(/*with_plan=*/true));

  ExpectSameAs(separate);
  EXPECT_EQ(plan.num_valid[0], 8);        // 5 + 3 prefix positions verified
  EXPECT_EQ(k.slot_run_counter[0], 12);   // 8 verified + 4 written
  EXPECT_EQ(k.kernel_run_counter[0], 2);  // a verify and a write
  EXPECT_FALSE(k.rows().empty());
}

// Slot 22 is read by row 2's verify and rewritten by row 1's write: a verify that ran after the
// write would report a different record there.
TEST_F(FusedStageTest, TheVerifySeesNoRecordOfTheStagesWrite) {
  const Record before = k.record(22);
  FusedStage(StageCall(/*with_plan=*/true));
  ASSERT_NE(k.record(22), before) << "the write must land on the verified slot";
  int reported = 0;  // the noise record at 22 fails its check: the row shows what was read
  for (const ViolationRow& row : k.rows()) {
    if (row.slot_idx == 22 && row.kernel_kind == kTailK) {
      EXPECT_EQ(row.stored_token, before.token);
      ++reported;
    }
  }
  EXPECT_EQ(reported, 1);
}

TEST_F(FusedStageTest, TailEqualsFusedVerifyThenWrite) {
  Plan(separate.PlanCall());
  Plan(PlanCall());
  FusedVerify(separate.VerifyCall());
  Write(separate.WriteCall());

  FusedStage(StageCall(/*with_plan=*/false));

  ExpectSameAs(separate);
}

// A sampled forward's TAIL advances its rows' phases after its verify read them.
TEST_F(FusedStageTest, TailWithTheAdvanceEqualsTheOpsThenAdvanceVerifyPhase) {
  Plan(separate.PlanCall());
  Plan(PlanCall());
  for (StageWorld* world : {static_cast<StageWorld*>(this), &separate}) {
    world->phase.values()[0] = 5;
    world->phase.values()[2] = 9;
  }
  separate.SampleEvery(2);
  SampleEvery(2);
  FusedVerify(separate.VerifyCall());
  Write(separate.WriteCall());
  AdvanceVerifyPhase({separate.phase.view(), separate.rp.view()});

  FusedStageArgs args = StageCall(/*with_plan=*/false);
  args.advance_phase = AdvanceVerifyPhaseArgs{phase.view(), rp.view()};
  FusedStage(args);

  ExpectSameAs(separate);
  EXPECT_EQ(testing::Head(phase, 3), (std::vector<int64_t>{5, 1, 10}));
  EXPECT_EQ(phase.values(), separate.phase.values());
}

// Every part is checked before any part runs: a bad write leaves the plan's outputs, the
// records, the ring and the counters as they were.
TEST_F(FusedStageTest, ABadPartRaisesBeforeAnyPartRuns) {
  ByteSnapshot snapshot(k.canary, v.canary, k.ring, k.write_index, k.kernel_run_counter,
                        k.slot_run_counter, scratch, plan.offsets, plan.seeds, plan.num_valid,
                        plan.enable, plan.num_valid_reqs);
  FusedStageArgs bad_write = StageCall(true);
  const HostTensor<int64_t> short_ids = HostTensor<int64_t>::Of({7, 8, 9});
  bad_write.write.input_ids = short_ids.view();
  EXPECT_KVC_ERROR(FusedStage(bad_write),
                   "kv-canary: fused_stage write: positions length must be 3, got 4");
  EXPECT_TRUE(snapshot.Unchanged());

  FusedStageArgs bad_verify = StageCall(true);
  bad_verify.verify.verify_capacity = -1;
  EXPECT_KVC_ERROR(FusedStage(bad_verify),
                   "kv-canary: fused_stage verify: fused_verify verify_capacity must be in [0, "
                   "2147483647], got -1");
  EXPECT_TRUE(snapshot.Unchanged());

  FusedStageArgs bad_advance = StageCall(true);
  const HostTensor<int32_t> phase32({3}, 0);
  bad_advance.advance_phase = AdvanceVerifyPhaseArgs{phase32.view(), rp.view()};
  EXPECT_KVC_ERROR(
      FusedStage(bad_advance),
      "kv-canary: fused_stage advance_phase: verify_phase must have dtype torch.int64, "
      "got torch.int32");
  EXPECT_TRUE(snapshot.Unchanged());

  FusedStageArgs bad_plan = StageCall(true);
  bad_plan.plan->verify_offsets_scratch = TensorView();
  EXPECT_KVC_ERROR(FusedStage(bad_plan),
                   "kv-canary: fused_stage plan: launch_canary_plan_kernels requires "
                   "verify_offsets_scratch for an "
                   "offsets-only plan (no verify entry arrays: fused_verify reads the offsets), "
                   "got None");
  EXPECT_TRUE(snapshot.Unchanged());
}

TEST_F(FusedStageTest, APlanWithEntryArraysIsRefused) {
  ByteSnapshot snapshot(k.canary, scratch, plan.offsets, plan.slots);
  FusedStageArgs args = StageCall(true);
  args.plan->verify_plan_out = plan.verify();
  EXPECT_KVC_ERROR(FusedStage(args),
                   "kv-canary: fused_stage plan must be offsets-only (no verify entry arrays: the "
                   "stage's verify derives its entries), got verify_plan_out with entry arrays");
  EXPECT_TRUE(snapshot.Unchanged());
}

TEST_F(FusedStageTest, ThePartsMustShareADevice) {
  ByteSnapshot snapshot(k.canary, scratch, plan.offsets);
  FusedStageArgs args = StageCall(true);
  // A write whose every tensor is on another device passes its own one-device check.
  args.write.context.canary_buf = testing::OnCuda(k.canary);
  args.write.context.violation_ring = testing::OnCuda(k.ring);
  args.write.context.violation_write_index = testing::OnCuda(k.write_index);
  args.write.context.slot_run_counter = testing::OnCuda(k.slot_run_counter);
  args.write.context.kernel_run_counter = testing::OnCuda(k.kernel_run_counter);
  args.write.context.enable_chain_position_assert = testing::OnCuda(k.chain_assert);
  args.write.plan.write_offsets = testing::OnCuda(plan.offsets);
  args.write.plan.write_seed_slot_indices = testing::OnCuda(plan.seeds);
  args.write.plan.write_num_valid_reqs = testing::OnCuda(plan.num_valid_reqs);
  args.write.input_ids = testing::OnCuda(ids);
  args.write.positions = testing::OnCuda(positions);
  args.write.out_cache_loc = testing::OnCuda(slots);
  args.write.paired_context.reset();
  EXPECT_KVC_ERROR(FusedStage(args),
                   "kv-canary: write.context.canary_buf must be on verify.context.canary_buf's "
                   "device cpu, got cuda:0");
  EXPECT_TRUE(snapshot.Unchanged());
}

}  // namespace
}  // namespace kvcanary
