// Edge cases of SGLang's kernels (eight rules, one test or more each).
// Each test builds the smallest input that shows the rule, with values chosen so that the other
// plausible behaviour gives a different answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "edge_case_util.h"
#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// Edge cases.

TEST(EdgeCases, PaddingRowsPlanNothingWriteNothingButCountAsWriteRows) {
  PlanCase c;
  c.rp = {0, 1, 0, 2, 0};
  c.prefix = {4, 2, 3, 0, 1};
  c.extend = {3, 1, 2, 2, 1};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(plan.num_valid[0], 2);  // only row 1's prefix: slots 9, 10
  EXPECT_EQ(Head(plan.slots, 2), (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(Head(plan.prevs, 2), (std::vector<int64_t>{-1, 9}));
  EXPECT_EQ(Head(plan.offsets, 6), (std::vector<int64_t>{0, 0, 1, 1, 3, 3}));
  EXPECT_EQ(Head(plan.seeds, 5), (std::vector<int64_t>{-1, 10, -1, -1, -1}));
  EXPECT_EQ(plan.num_valid_reqs[0], 5);

  // Live tokens first (row 1: one, row 3: two), then padded tokens that no row owns.
  CanaryState state(32);
  RunWrite(state.Context(), WriteBatch{Head(plan.offsets, 6),
                                       Head(plan.seeds, 5),
                                       {101, 201, 202, 900, 901},
                                       {2, 0, 1, 0, 0},
                                       {11, 17, 18, 0, 5}});
  EXPECT_EQ(state.slot_run_counter[0], 3);
  EXPECT_EQ(state.record(11).token, 101);
  EXPECT_EQ(state.record(17), (Record{201, 0, kHeadHash, 0}));
  EXPECT_EQ(state.record(18).token, 202);
  EXPECT_EQ(state.record(0), (Record{}));
  EXPECT_EQ(state.record(5), (Record{}));
}

TEST(EdgeCases, NonPositivePrefixPlansNoEntriesNoSeedAndNoChainPositionAssert) {
  PlanCase c;
  c.rp = {1, 2};
  c.prefix = {0, -3};
  c.extend = {2, 1};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(plan.num_valid[0], 0);
  EXPECT_EQ(plan.enable[0], 1);
  EXPECT_EQ(Head(plan.offsets, 3), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(Head(plan.seeds, 2), (std::vector<int64_t>{-1, -1}));

  // Unseeded rows start at the anchor and skip the chain-position assert even when it is on.
  CanaryState state(16);
  state.chain_assert[0] = 1;
  RunWrite(state.Context(), WriteBatch{{0, 2, 3}, {-1, -1}, {7, 8, 9}, {5, 9, 4}, {1, 2, 3}});
  EXPECT_EQ(state.write_index[0], 0);
  EXPECT_EQ(state.record(1), (Record{7, 5, kHeadHash, 0}));
  EXPECT_EQ(state.record(3), (Record{9, 4, kHeadHash, 0}));
}

TEST(EdgeCases, NonPositiveExtendIsAVerifyOnlyRowWithoutSeed) {
  PlanCase c;
  c.rp = {1, 2};
  c.prefix = {3, 2};
  c.extend = {0, -4};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(plan.num_valid[0], 5);
  EXPECT_EQ(Head(plan.slots, 5), (std::vector<int64_t>{9, 10, 11, 17, 18}));
  EXPECT_EQ(Head(plan.offsets, 3), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(Head(plan.seeds, 2), (std::vector<int64_t>{-1, -1}));
}

TEST(EdgeCases, VerifySkipsSlotZeroLeavesPrevZeroUncheckedAndTakesNegativePrevAsHead) {
  CanaryState state(8);
  state.set_record(0, Record{1, 2, 3, 4});           // padding slot: never checked
  state.set_record(1, Record{10, 3, 999, 0});        // prev 0: chain unchecked
  state.set_record(2, Record{20, 0, kHeadHash, 0});  // prev -5: a chain head, correct
  state.set_record(3, Record{30, 0, 12345, 0});      // prev -1: a chain head, wrong
  RunVerify(state.Context(), HandPlan({{0, -1, 0}, {1, 0, 3}, {2, -5, 0}, {3, -1, 0}}));
  EXPECT_EQ(state.slot_run_counter[0], 4);
  ASSERT_EQ(state.rows().size(), 1u);
  EXPECT_EQ(state.rows()[0], (ViolationRow{kTail, 3, 0, 30, -1, 12345, kHeadHash, kChain}));
}

TEST(EdgeCases, WriteWritesSlotZeroAndALutValueMinusOneSkipsTheToken) {
  // Full slots 5, 6, 0 translate to -1 (evicted: skip), 4 and 0.
  const auto lut = HostTensor<int64_t>::Of({0, 0, 0, 0, 0, -1, 4});
  const auto full = HostTensor<int64_t>::Of({5, 6, 0});
  HostTensor<int64_t> translated({3});
  SwaTranslate(SwaTranslateArgs{full.view(), lut.view(), translated.view()});
  ASSERT_EQ(Head(translated, 3), (std::vector<int64_t>{-1, 4, 0}));

  CanaryState state(8);
  RunWrite(state.Context(), WriteBatch{{0, 3}, {-1}, {11, 22, 33}, {0, 1, 2}, Head(translated, 3)});
  EXPECT_EQ(state.slot_run_counter[0], 2);
  EXPECT_EQ(state.record(4), (Record{22, 1, kHeadHash, 0}));
  EXPECT_EQ(state.record(0), (Record{33, 2, ToSigned(ChainStep(ChainHeadHash(), 22, 1)), 0}));
}

TEST(EdgeCases, SkippedTokenAdvancesNeitherTheChainNorThePositionTracker) {
  CanaryState state(16);
  state.set_record(5, Record{55, 4, 777, 0});
  state.chain_assert[0] = 1;
  // Position 5 is skipped, then written for real; a tracker that advanced would flag it.
  RunWrite(state.Context(), WriteBatch{{0, 3}, {5}, {66, 66, 77}, {5, 5, 6}, {-1, 6, 7}});
  const uint64_t seed_hash = ChainStep(ToUnsigned(777), 55, 4);
  EXPECT_EQ(state.write_index[0], 0);
  EXPECT_EQ(state.slot_run_counter[0], 2);
  EXPECT_EQ(state.record(6), (Record{66, 5, ToSigned(seed_hash), 0}));
  EXPECT_EQ(state.record(7), (Record{77, 6, ToSigned(ChainStep(seed_hash, 66, 5)), 0}));
}

TEST(EdgeCases, InputAssertReportsBothMismatchesInOneRowAndStillWrites) {
  CanaryState state(8);
  WriteBatch batch{{0, 1}, {-1}, {9}, {3}, {2}};
  batch.expected_ids = {8};
  batch.expected_positions = {2};
  RunWrite(state.Context(), batch);
  ASSERT_EQ(state.rows().size(), 1u);
  EXPECT_EQ(state.rows()[0],
            (ViolationRow{kTail, 2, 3, 9, 8, kHeadHash, 2,
                          FailReason::kWriteTokenMismatch | FailReason::kWritePositionMismatch}));
  EXPECT_EQ(state.record(2), (Record{9, 3, kHeadHash, 0}));
}

TEST(EdgeCases, TokenPoolUsesTheBatchRowsValidLenAndTheDraftOffset) {
  // rp 2 is batch row 0 with valid_len 1; indexing valid_lens by rp would give it 2.
  PlanCase c;
  c.rp = {2, 1, 0};
  c.prefix = {3, 3, 2};
  c.extend = {1, 1, 1};
  c.pool = HostTensor<int32_t>({3, 8});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t q = 0; q < 8; ++q) c.pool->at(r, q) = static_cast<int32_t>(r * 10 + q);
  }
  c.valid_lens = {1, 3, 2};
  EXPECT_EQ(Head(RunPlan(c).tokens, 6), (std::vector<int64_t>{20, -1, -1, 10, 11, 12}));
  c.token_offset = 1;  // EAGLE draft: position p expects the token of p + 1
  EXPECT_EQ(Head(RunPlan(c).tokens, 6), (std::vector<int64_t>{-1, -1, -1, 11, 12, -1}));

  // Verify with the token check on compares only entries whose expected token is known.
  CanaryState state(8);
  state.set_record(1, Record{5, 0, kHeadHash, 0});
  state.set_record(2, Record{6, 0, kHeadHash, 0});
  const PlanBuffers plan = HandPlan({{1, -1, 0, -1}, {2, -1, 0, 7}});
  RunVerify(state.Context(), plan, /*check_token=*/false);
  EXPECT_EQ(state.write_index[0], 0);
  RunVerify(state.Context(), plan, /*check_token=*/true);
  ASSERT_EQ(state.rows().size(), 1u);
  EXPECT_EQ(state.rows()[0], (ViolationRow{kTail, 2, 0, 6, 7, kHeadHash, kHeadHash,
                                           FailReason::kVerifyTokenMismatch}));
}

TEST(EdgeCases, NeverWrittenRecordsHashToZero) {
  CanaryState state(8);
  EXPECT_EQ(Splitmix64Mix3(0, 0, 0), 0u);
  EXPECT_EQ(ComputeSlotHash(state.canary.view(), 1), 0u);
  state.set_record(2, Record{5, 1, 0, 0});
  state.set_record(3, Record{6, 1, 42, 0});
  RunVerify(state.Context(), HandPlan({{2, 1, 1}, {3, 1, 1}}));
  ASSERT_EQ(state.rows().size(), 1u);
  EXPECT_EQ(state.rows()[0], (ViolationRow{kTail, 3, 1, 6, -1, 42, 0, kChain}));

  // A write seeded from a never-written slot stores prev_hash 0.
  RunWrite(state.Context(), WriteBatch{{0, 1}, {4}, {7}, {1}, {5}});
  EXPECT_EQ(state.record(5), (Record{7, 1, 0, 0}));
}

TEST(EdgeCases, HeadRecordsCarryZeroRealKvAndTailRecordsTheFingerprint) {
  const ByteSource kv(2);  // slot 1's strip is 10 11 ... 1F
  const std::vector<RealKvSource> sources = {kv.Source()};
  const uint64_t fingerprint = RealKvHash(sources.data(), 1, 2, 1);
  ASSERT_NE(fingerprint, 0u);
  CanaryState head(4);
  CanaryState tail(4);
  const LaunchContext head_context = WithSources(head.Context(kHead), {}, RealKvHashMode::kAll);
  const LaunchContext tail_context = WithSources(tail.Context(), sources, RealKvHashMode::kAll);
  const WriteBatch token{{0, 1}, {-1}, {11}, {0}, {1}};
  RunWrite(head_context, token);
  RunWrite(tail_context, token);
  EXPECT_EQ(head.record(1), (Record{11, 0, kHeadHash, 0}));
  EXPECT_EQ(tail.record(1), (Record{11, 0, kHeadHash, ToSigned(fingerprint)}));

  const PlanBuffers plan = HandPlan({{1, -1, 0}});
  RunVerify(head_context, plan);
  RunVerify(tail_context, plan);
  EXPECT_EQ(head.write_index[0], 0);
  EXPECT_EQ(tail.write_index[0], 0);
  // Verifying a HEAD record against the KV bytes, or a TAIL record without them, both fail.
  RunVerify(WithSources(head.Context(kHead), sources, RealKvHashMode::kAll), plan);
  RunVerify(tail.Context(), plan);
  ASSERT_EQ(head.rows().size(), 1u);
  EXPECT_EQ(head.rows()[0].kernel_kind, kHead);
  EXPECT_EQ(head.rows()[0].fail_reason_bits, kRealKv);
  ASSERT_EQ(tail.rows().size(), 1u);
  EXPECT_EQ(tail.rows()[0].fail_reason_bits, kRealKv);

  // Mode NONE ignores the sources it is given.
  CanaryState none(4);
  RunWrite(WithSources(none.Context(), sources, RealKvHashMode::kNone), token);
  EXPECT_EQ(none.record(1).real_kv_hash, 0);
}

TEST(EdgeCases, CapacitiesAboveInt32DeviceCountsAreRejected) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(VerifyPlanAllocationBytes(kMax), 4 * kMax * 8 + 2 * 4);
  EXPECT_EQ(WritePlanAllocationBytes(kMax), (2 * kMax + 1) * 8 + 4);
  EXPECT_KVC_ERROR(VerifyPlanAllocationBytes(kMax + 1),
                   "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648");
  EXPECT_KVC_ERROR(WritePlanAllocationBytes(kMax + 1),
                   "kv-canary: WritePlan write_req_capacity must be <= 2147483647, got 2147483648");

  // A plan whose verify arrays claim 2^31 entries (never touched: validation throws first).
  PlanCase c;
  c.rp = {1};
  c.prefix = {1};
  c.extend = {1};
  const PlanBuffers out(1, 1);
  const auto rp = HostTensor<int64_t>::Of(c.rp);
  PlanArgs args = PlanArgsOf(c, out, rp, rp, rp, rp, rp);
  int64_t fake[1] = {0};
  const TensorView huge(fake, DType::kInt64, Device::CPU(), {kMax + 1});
  args.verify_plan_out.verify_slot_indices = args.verify_plan_out.verify_expected_tokens = huge;
  args.verify_plan_out.verify_expected_positions = args.verify_plan_out.verify_prev_slot_indices =
      huge;
  args.verify_capacity = kMax + 1;
  EXPECT_KVC_ERROR(Plan(args),
                   "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648");
  EXPECT_EQ(fake[0], 0);
}

}  // namespace
}  // namespace kvcanary::testing
