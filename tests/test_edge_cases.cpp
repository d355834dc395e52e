// Edge cases of spec/kernels.md §12 (items 1-8) and the deliberate deviations of §13 that the CPU
// backend makes observable (D1-D4, D6, D7). Each test builds the smallest input that shows the
// rule, with values chosen so that the other plausible behaviour gives a different answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;

constexpr int64_t kTail = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);
constexpr int64_t kHead = static_cast<int64_t>(CanaryLaunchTag::kHeadKFull);
constexpr int64_t kChain = FailReason::kVerifyChainHashMismatch;
constexpr int64_t kRealKv = FailReason::kVerifyRealKvHashMismatch;
const int64_t kHeadHash = ToSigned(ChainHeadHash());

std::vector<int64_t> Head(const HostTensor<int64_t>& t, int64_t n) {
  return std::vector<int64_t>(t.values().begin(), t.values().begin() + n);
}

// req_to_token[row][col] = row * 8 + col + 1: every slot distinct and non-zero.
HostTensor<int32_t> Table(int64_t rows, int64_t width) {
  HostTensor<int32_t> table({rows, width});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) table.at(r, c) = static_cast<int32_t>(r * 8 + c + 1);
  }
  return table;
}

// ---------------------------------------------------------------------------------------------
// Plan.

struct PlanCase {
  std::vector<int64_t> rp, prefix, extend;
  HostTensor<int32_t> req_to_token = Table(3, 8);
  int64_t window = 0;
  std::vector<int64_t> lut;  // empty: no LUT
  std::optional<HostTensor<int32_t>> pool;
  std::vector<int64_t> valid_lens;
  int64_t token_offset = 0;
};

PlanArgs PlanArgsOf(const PlanCase& c, const PlanBuffers& out, const HostTensor<int64_t>& rp,
                    const HostTensor<int64_t>& prefix, const HostTensor<int64_t>& extend,
                    const HostTensor<int64_t>& lut, const HostTensor<int64_t>& valid_lens) {
  PlanArgs args;
  args.verify_plan_out = out.verify();
  args.write_plan_out = out.write();
  args.req_pool_indices = rp.view();
  args.prefix_lens = prefix.view();
  args.extend_seq_lens = extend.view();
  args.req_to_token = c.req_to_token.view();
  args.swa_window_size = c.window;
  if (!c.lut.empty()) args.full_to_swa_index_mapping = lut.view();
  args.verify_capacity = out.slots.shape()[0];
  if (c.pool.has_value()) {
    args.req_to_verify_expected_tokens = c.pool->view();
    args.req_to_verify_expected_tokens_valid_lens = valid_lens.view();
  }
  args.kv_token_id_vs_position_offset = c.token_offset;
  return args;
}

PlanBuffers RunPlan(const PlanCase& c, int64_t verify_capacity = 64, int64_t write_capacity = 8) {
  PlanBuffers out(verify_capacity, write_capacity);
  const auto rp = HostTensor<int64_t>::Of(c.rp);
  const auto prefix = HostTensor<int64_t>::Of(c.prefix);
  const auto extend = HostTensor<int64_t>::Of(c.extend);
  const auto lut = HostTensor<int64_t>::Of(c.lut);
  const auto valid_lens = HostTensor<int64_t>::Of(c.valid_lens);
  Plan(PlanArgsOf(c, out, rp, prefix, extend, lut, valid_lens));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Verify and write.

struct HandEntry {
  int64_t slot = 0;
  int64_t prev = -1;
  int64_t position = 0;
  int64_t token = -1;
};

// A verify plan of exactly these entries (capacity = their number).
PlanBuffers HandPlan(const std::vector<HandEntry>& entries) {
  PlanBuffers plan(static_cast<int64_t>(entries.size()), 1);
  for (size_t e = 0; e < entries.size(); ++e) {
    plan.slots[e] = entries[e].slot;
    plan.prevs[e] = entries[e].prev;
    plan.positions[e] = entries[e].position;
    plan.tokens[e] = entries[e].token;
  }
  plan.num_valid[0] = static_cast<int32_t>(entries.size());
  plan.enable[0] = 1;
  return plan;
}

void RunVerify(const LaunchContext& context, const PlanBuffers& plan, bool check_token = false) {
  Verify(VerifyArgs{context, plan.verify(), check_token});
}

struct WriteBatch {
  std::vector<int64_t> offsets;  // [R + 1]
  std::vector<int64_t> seeds;    // [R]
  std::vector<int64_t> ids, positions, slots;
  std::vector<int64_t> expected_ids, expected_positions;  // given: input assert on
  std::optional<int32_t> num_valid_reqs;                  // absent: R
};

void RunWrite(const LaunchContext& context, const WriteBatch& b) {
  const auto offsets = HostTensor<int64_t>::Of(b.offsets);
  const auto seeds = HostTensor<int64_t>::Of(b.seeds);
  const HostTensor<int32_t> num_valid_reqs(
      {1}, b.num_valid_reqs.value_or(static_cast<int32_t>(b.seeds.size())));
  const auto ids = HostTensor<int64_t>::Of(b.ids);
  const auto positions = HostTensor<int64_t>::Of(b.positions);
  const auto slots = HostTensor<int64_t>::Of(b.slots);
  const auto expected_ids = HostTensor<int64_t>::Of(b.expected_ids);
  const auto expected_positions = HostTensor<int64_t>::Of(b.expected_positions);
  WriteArgs args;
  args.context = context;
  args.plan = WritePlanView{offsets.view(), seeds.view(), num_valid_reqs.view()};
  args.input_ids = ids.view();
  args.positions = positions.view();
  args.out_cache_loc = slots.view();
  args.enable_write_input_assert = !b.expected_ids.empty();
  if (args.enable_write_input_assert) {
    args.expected_input_tokens = expected_ids.view();
    args.expected_input_positions = expected_positions.view();
  }
  Write(args);
}

// Fills every record with non-zero bytes, so any entry that is checked fails.
void FillGarbage(CanaryState& state) {
  for (size_t i = 0; i < state.canary.values().size(); ++i) {
    state.canary.values()[i] = static_cast<uint8_t>(0x11 + i * 7);
  }
}

// The slots of the rows recorded so far, in ring order.
std::vector<int64_t> RowSlots(const CanaryState& state) {
  std::vector<int64_t> slots;
  for (const ViolationRow& row : state.rows()) slots.push_back(row.slot);
  return slots;
}

// A uint8 [rows, 16] real-KV source whose row r holds bytes r*16 .. r*16+15, with page size 1.
struct ByteSource {
  explicit ByteSource(int64_t rows) : bytes({rows, 16}) {
    for (size_t i = 0; i < bytes.values().size(); ++i) bytes.values()[i] = static_cast<uint8_t>(i);
  }
  RealKvSource Source() const { return MakeRealKvSource(bytes.view(), 1, 16, 16); }
  HostTensor<uint8_t> bytes;
};

LaunchContext WithSources(LaunchContext context, const std::vector<RealKvSource>& sources,
                          RealKvHashMode mode) {
  for (size_t i = 0; i < sources.size(); ++i) context.real_kv_sources[i] = sources[i];
  context.num_real_kv_sources = static_cast<int>(sources.size());
  context.real_kv_hash_mode = static_cast<int32_t>(mode);
  return context;
}

// ---------------------------------------------------------------------------------------------
// §12 edge cases.

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

// ---------------------------------------------------------------------------------------------
// §13 deviations.

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
  // Spec §17 L3: width 256, row 1 holds slots 256 + pos; LUT [1000..1257] (length 258).
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
  // Spec §17 L4: req_to_token[1] = [10, 11, 12, 13], prefix 6.
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
  args.req_pool_indices = rp.view();
  args.prefix_lens = ones.view();
  args.extend_seq_lens = ones.view();
  args.req_to_token = c.req_to_token.view();
  args.out_verify_offsets_scratch = scratch.view();
  args.out_write_offsets = staged.offsets.view();
  args.out_write_seed_slot_indices = staged.seeds.view();
  args.out_verify_num_valid = staged.num_valid.view();
  args.out_verify_enable = staged.enable.view();
  args.out_write_num_valid_reqs = staged.num_valid_reqs.view();
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
  // Spec §17: one source over 00..0F fingerprints to 0xd6d75024dfd6c30c; the narrow source then
  // folds in 0 for slot 2, and slot 4 lies just past the end of both.
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
}  // namespace kvcanary
