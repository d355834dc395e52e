// kvcanary's deliberate deviations from SGLang's kernels that the CPU backend makes observable
// (D1-D4, D6, D7; each test's name says what it shows).
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
#include "plan_args.h"
#include "testutil.h"

namespace kvcanary::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// Deviations from SGLang.

TEST(EdgeCases, D1NonPositiveVerifySlotsAreSkippedButCounted) {
  CanaryState state(8);
  FillGarbage(state);
  RunVerify(state.Context(), HandPlan({{-1, -1, 0},
                                       {std::numeric_limits<int64_t>::min(), 3, 1},
                                       {0, 2, 2},
                                       {-7, -1, 0},
                                       {2, -1, 0}}));
  EXPECT_EQ(state.slot_run_counter[0], 5);
  EXPECT_EQ(RowSlots(state), (std::vector<int64_t>{2}));  // only the real slot is checked
}

TEST(EdgeCases, D2NegativeAndOversizedDeviceCountsClampToTheCapacity) {
  CanaryState state(8);
  FillGarbage(state);
  PlanBuffers plan = HandPlan({{1, -1, 0}, {2, -1, 0}, {3, -1, 0}});
  plan.num_valid[0] = -4;
  RunVerify(state.Context(), plan);
  EXPECT_EQ(state.kernel_run_counter[0], 1);
  EXPECT_EQ(state.slot_run_counter[0], 0);
  EXPECT_EQ(state.write_index[0], 0);
  plan.num_valid[0] = 1000;
  RunVerify(state.Context(), plan);
  EXPECT_EQ(state.slot_run_counter[0], 3);
  EXPECT_EQ(RowSlots(state), (std::vector<int64_t>{1, 2, 3}));

  CanaryState writes(8);
  WriteBatch batch{{0, 1, 2}, {-1, -1}, {5, 6}, {0, 0}, {1, 2}};
  batch.num_valid_reqs = -1;
  RunWrite(writes.Context(), batch);
  EXPECT_EQ(writes.slot_run_counter[0], 0);
  EXPECT_EQ(writes.record(1), (Record{}));
  batch.num_valid_reqs = 99;
  RunWrite(writes.Context(), batch);
  EXPECT_EQ(writes.kernel_run_counter[0], 2);
  EXPECT_EQ(writes.slot_run_counter[0], 2);
  EXPECT_EQ(writes.record(2).token, 6);
}

TEST(EdgeCases, D3LutIndicesPastTheEndClampToTheLastEntryAndNeverRaise) {
  // Plan hand case L3 (docs/format.md): width 256, row 1 holds slots 256 + pos; LUT
  // [1000..1257] (length 258).
  PlanCase c;
  c.req_to_token = HostTensor<int32_t>({2, 256});
  for (int64_t pos = 0; pos < 256; ++pos) {
    c.req_to_token.at(1, pos) = static_cast<int32_t>(256 + pos);
  }
  for (int64_t i = 0; i < 258; ++i) c.lut.push_back(1000 + i);
  c.rp = {1};
  c.prefix = {3};
  c.extend = {1};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(Head(plan.slots, 3), (std::vector<int64_t>{1256, 1257, 1257}));
  EXPECT_EQ(Head(plan.prevs, 3), (std::vector<int64_t>{-1, 1256, 1257}));
  EXPECT_EQ(plan.seeds[0], 1257);

  const auto lut = HostTensor<int64_t>::Of(c.lut);
  const auto slots = HostTensor<int64_t>::Of({257, 258, int64_t{1} << 50, -3});
  HostTensor<int64_t> out({4});
  SwaTranslate(SwaTranslateArgs{slots.view(), lut.view(), out.view()});
  EXPECT_EQ(Head(out, 4), (std::vector<int64_t>{1257, 1257, 1257, -3}));
}

TEST(EdgeCases, D4SeedAndVerifyPositionsPastTheRowWidthClampToTheLastColumn) {
  // Plan hand case L4 (docs/format.md): req_to_token[1] = [10, 11, 12, 13], prefix 6.
  PlanCase c;
  c.req_to_token = HostTensor<int32_t>({2, 4});
  for (int64_t col = 0; col < 4; ++col) c.req_to_token.at(1, col) = static_cast<int32_t>(10 + col);
  c.rp = {1};
  c.prefix = {6};
  c.extend = {1};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(Head(plan.slots, 6), (std::vector<int64_t>{10, 11, 12, 13, 13, 13}));
  EXPECT_EQ(Head(plan.prevs, 6), (std::vector<int64_t>{-1, 10, 11, 12, 13, 13}));
  EXPECT_EQ(Head(plan.positions, 6), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(plan.seeds[0], 13);
}

TEST(EdgeCases, D6PlanHasNoBatchSizeLimitButPlanOffsetsKeepsIt) {
  constexpr int64_t kBs = 5000;
  PlanCase c;
  c.req_to_token = Table(kBs + 1, 2);
  for (int64_t r = 0; r < kBs; ++r) {
    c.rp.push_back(r + 1);
    c.prefix.push_back(1);
    c.extend.push_back(1);
  }
  const PlanBuffers plan = RunPlan(c, kBs, kBs);
  EXPECT_EQ(plan.num_valid[0], kBs);
  EXPECT_EQ(plan.enable[0], 1);
  EXPECT_EQ(plan.slots[kBs - 1], kBs * 8 + 1);  // rt(5000, 0)
  EXPECT_EQ(plan.offsets[kBs], kBs);
  EXPECT_EQ(plan.seeds[kBs - 1], kBs * 8 + 1);
  EXPECT_EQ(plan.num_valid_reqs[0], kBs);

  const auto rp = HostTensor<int64_t>::Of(c.rp);
  const auto ones = HostTensor<int64_t>::Of(c.prefix);
  HostTensor<int64_t> scratch({kBs + 1});
  PlanBuffers staged(kBs, kBs);
  PlanOffsetsArgs args;
  args.inputs.req_pool_indices = rp.view();
  args.inputs.prefix_lens = ones.view();
  args.inputs.extend_seq_lens = ones.view();
  args.inputs.req_to_token = c.req_to_token.view();
  SetPlanOffsetsOutputs(args, staged, scratch);
  args.verify_capacity = kBs;
  EXPECT_KVC_ERROR(PlanOffsets(args),
                   "kv-canary: offsets kernel bs must be in [0, 4096], got 5000");
}

TEST(EdgeCases, D7VerifySkipsSlotsPastTheBufferAndLeavesSuchPredecessorsUnchecked) {
  CanaryState state(8);
  FillGarbage(state);
  state.set_record(2, Record{20, 1, 31337, 0});  // wrong prev_hash, but prev 8 is unreachable
  RunVerify(state.Context(), HandPlan({{8, -1, 0}, {100, -1, 0}, {2, 8, 1}, {2, 1000, 1}}));
  EXPECT_EQ(state.slot_run_counter[0], 4);
  EXPECT_EQ(state.write_index[0], 0);
}

TEST(EdgeCases, D7WriteSkipsSlotsPastTheBufferWithoutAdvancingTheChain) {
  CanaryState state(8);
  RunWrite(state.Context(), WriteBatch{{0, 3}, {-1}, {1, 2, 3}, {0, 1, 1}, {8, 3, 1 << 20}});
  EXPECT_EQ(state.slot_run_counter[0], 1);
  EXPECT_EQ(state.record(3), (Record{2, 1, kHeadHash, 0}));
}

TEST(EdgeCases, D7SeedPastTheBufferStartsAtTheAnchorWithoutChainPositionAssert) {
  CanaryState state(8);
  state.chain_assert[0] = 1;
  RunWrite(state.Context(), WriteBatch{{0, 1}, {8}, {5}, {42}, {3}});
  EXPECT_EQ(state.write_index[0], 0);
  EXPECT_EQ(state.record(3), (Record{5, 42, kHeadHash, 0}));
}

TEST(EdgeCases, D7TokenPoolGatherOutsideThePoolIsMinusOne) {
  PlanCase c;
  c.rp = {1, 2};
  c.prefix = {5, 2};
  c.extend = {1, 1};
  c.pool = HostTensor<int32_t>({2, 3}, std::vector<int32_t>{0, 1, 2, 10, 11, 12});
  c.valid_lens = {10, 10};  // valid, but past the pool's width and rows
  EXPECT_EQ(Head(RunPlan(c).tokens, 7), (std::vector<int64_t>{10, 11, 12, -1, -1, -1, -1}));
}

TEST(EdgeCases, D7RealKvRowOutsideTheSourceHashesZeroForThatSource) {
  ByteSource wide(4);    // rows for slots 0..3
  ByteSource narrow(2);  // rows for slots 0 and 1: slot 2 is the first one past its end
  for (int64_t b = 0; b < 16; ++b) wide.bytes.at(2, b) = static_cast<uint8_t>(b);  // 00 .. 0F
  const std::vector<RealKvSource> sources = {wide.Source(), narrow.Source()};
  // Published real-KV vector: one source over 00..0F fingerprints to 0xd6d75024dfd6c30c; the
  // narrow source then folds in 0 for slot 2, and slot 4 lies just past the end of both.
  const uint64_t slot2 = Splitmix64(0xd6d75024dfd6c30cull);
  EXPECT_EQ(RealKvHash(sources.data(), 2, 2, 2), slot2);
  EXPECT_EQ(RealKvHash(sources.data() + 1, 1, 2, 2), 0u);
  EXPECT_EQ(RealKvHash(sources.data(), 2, 2, 4), 0u);

  CanaryState state(8);
  const LaunchContext context = WithSources(state.Context(), sources, RealKvHashMode::kAll);
  RunWrite(context, WriteBatch{{0, 2}, {-1}, {1, 2}, {0, 1}, {2, 4}});
  EXPECT_EQ(state.record(2).real_kv_hash, ToSigned(slot2));
  EXPECT_EQ(state.record(4).real_kv_hash, 0);
  RunVerify(context, HandPlan({{2, -1, 0}, {4, 2, 1}}));
  EXPECT_EQ(state.write_index[0], 0);
}

TEST(EdgeCases, D7RingDropsRowsOutsideItsRangeWhileTheWriteIndexKeepsCounting) {
  CanaryState state(8, /*ring_capacity=*/2);
  FillGarbage(state);
  const PlanBuffers plan = HandPlan({{1, -1, 0}, {2, -1, 0}, {3, -1, 0}, {4, -1, 0}, {5, -1, 0}});
  RunVerify(state.Context(), plan);
  EXPECT_EQ(state.write_index[0], 5);
  EXPECT_EQ(RowSlots(state), (std::vector<int64_t>{1, 2}));
  RunVerify(state.Context(), plan);  // fill-once: the first rows stay
  EXPECT_EQ(state.write_index[0], 10);
  EXPECT_EQ(RowSlots(state), (std::vector<int64_t>{1, 2}));

  CanaryState negative(8, /*ring_capacity=*/2);
  FillGarbage(negative);
  negative.write_index[0] = -2;  // reservations -2 and -1 are dropped, 0 is stored
  RunVerify(negative.Context(), HandPlan({{1, -1, 0}, {2, -1, 0}, {3, -1, 0}}));
  EXPECT_EQ(negative.write_index[0], 1);
  EXPECT_EQ(RowSlots(negative), (std::vector<int64_t>{3}));
}

TEST(EdgeCases, D7ReqToTokenRowClampsIntoTheTable) {
  PlanCase c;  // 3 rows: row 0 = 1..8, row 2 = 17..24
  c.rp = {7, -1};
  c.prefix = {2, 2};
  c.extend = {1, 1};
  const PlanBuffers plan = RunPlan(c);
  EXPECT_EQ(Head(plan.slots, 4), (std::vector<int64_t>{17, 18, 1, 2}));
  EXPECT_EQ(Head(plan.seeds, 2), (std::vector<int64_t>{18, 2}));
}

TEST(EdgeCases, D7WriteRangesClampToTheForwardsTokens) {
  CanaryState state(8);
  // Row 0 owns [-5, 1) -> [0, 1); row 1 owns [1, 10) -> [1, 3); row 2's range is empty.
  RunWrite(state.Context(),
           WriteBatch{{-5, 1, 10, 4}, {-1, -1, -1}, {1, 2, 3}, {0, 0, 1}, {1, 2, 3}});
  EXPECT_EQ(state.slot_run_counter[0], 3);
  EXPECT_EQ(state.record(1), (Record{1, 0, kHeadHash, 0}));
  EXPECT_EQ(state.record(3), (Record{3, 1, ToSigned(ChainStep(ChainHeadHash(), 2, 0)), 0}));
}

TEST(EdgeCases, D7ScatterSkipsRowsOutsideThePool) {
  HostTensor<int32_t> pool({2, 3}, -9);
  const auto flat = HostTensor<int64_t>::Of({1, 2, 3, 4, 5, 6, 7, 8, 9});
  const auto offsets = HostTensor<int64_t>::Of({0, 3, 6, 9});
  const auto rps = HostTensor<int64_t>::Of({-1, 2, 1});
  Scatter(ScatterArgs{flat.view(), offsets.view(), rps.view(), pool.view()});
  EXPECT_EQ(pool.values(), (HostTensor<int32_t>({2, 3}, {-9, -9, -9, 7, 8, 9}).values()));

  // Flat indices outside [0, total) are skipped too: row 0 starts 2 before flat_in, row 1 ends
  // 2 past its end.
  const auto bad_offsets = HostTensor<int64_t>::Of({-2, 8, 11});
  const auto both_rows = HostTensor<int64_t>::Of({0, 1});
  Scatter(ScatterArgs{flat.view(), bad_offsets.view(), both_rows.view(), pool.view()});
  EXPECT_EQ(pool.values(), (HostTensor<int32_t>({2, 3}, {-9, -9, 1, 9, 8, 9}).values()));
}

}  // namespace
}  // namespace kvcanary::testing
