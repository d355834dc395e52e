// The published test vectors (docs/format.md): the [11,22,33,44,55] chain, the decode step, verify
// after corruption, the write asserts, the real-KV fingerprints and the plan hand cases. Every op
// test runs on the CPU and on CUDA (BackendRunner), against the same expected values; where a
// launch records several rows, CUDA's are compared as a multiset.
#include <gtest/gtest.h>

#include <numeric>

#include "backend_runner.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::BackendTest;
using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;

constexpr int64_t kTail = static_cast<int64_t>(CanaryLaunchTag::kTailKFull);

int64_t S(uint64_t u) { return ToSigned(u); }

// The chain world: 8 slots, req_to_token[1] = [1..7, 0].
class ChainVectors : public BackendTest {
 protected:
  ChainVectors() : state_(8), req_to_token({2, 8}) {
    for (int c = 0; c < 7; ++c) req_to_token.at(1, c) = c + 1;
  }

  // Plans (rp 1, prefix, extend) and returns the plan buffers.
  PlanBuffers PlanStep(int64_t prefix, int64_t extend, const TensorView& pool = {},
                       const TensorView& valid_lens = {}) {
    PlanBuffers plan(16, 4);
    HostTensor<int64_t> rp = HostTensor<int64_t>::Of({1});
    HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({prefix});
    HostTensor<int64_t> extend_lens = HostTensor<int64_t>::Of({extend});
    PlanArgs args = testing::PlanCallOver(plan, rp.view(), prefix_lens.view(), extend_lens.view(),
                                          req_to_token.view());
    args.inputs.req_to_verify_expected_tokens = pool;
    args.inputs.req_to_verify_expected_tokens_valid_lens = valid_lens;
    backend.Plan(args);
    return plan;
  }

  void WriteTokens(const PlanBuffers& plan, std::vector<int64_t> tokens,
                   std::vector<int64_t> positions, std::vector<int64_t> slots,
                   const std::vector<int64_t>& expected_tokens = {},
                   const std::vector<int64_t>& expected_positions = {}) {
    HostTensor<int64_t> ids = HostTensor<int64_t>::Of(tokens);
    HostTensor<int64_t> pos = HostTensor<int64_t>::Of(positions);
    HostTensor<int64_t> loc = HostTensor<int64_t>::Of(slots);
    HostTensor<int64_t> exp_ids = HostTensor<int64_t>::Of(expected_tokens);
    HostTensor<int64_t> exp_pos = HostTensor<int64_t>::Of(expected_positions);
    WriteArgs args;
    args.context = state_.Context(kTail);
    args.plan = plan.write();
    args.input_ids = ids.view();
    args.positions = pos.view();
    args.out_cache_loc = loc.view();
    args.enable_write_input_assert = !expected_tokens.empty();
    if (args.enable_write_input_assert) {
      args.expected_input_tokens = exp_ids.view();
      args.expected_input_positions = exp_pos.view();
    }
    backend.Write(args);
  }

  void VerifyPlan(const PlanBuffers& plan, bool check_token = false) {
    VerifyArgs args;
    args.context = state_.Context(kTail);
    args.plan = plan.verify();
    args.check_verify_expected_token = check_token;
    backend.Verify(args);
  }

  // The rows recorded so far, and `expected`, in the order the backend defines.
  void ExpectRows(const std::vector<ViolationRow>& expected) {
    EXPECT_EQ(backend.InLaunchOrder(state_.rows()), backend.InLaunchOrder(expected));
  }

  // Writes the five-token prefill, then the decode of token 66 into slot 6.
  void WriteChainAndDecode() {
    WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
    PlanBuffers decode = PlanStep(5, 1);
    VerifyPlan(decode);
    WriteTokens(decode, {66}, {5}, {6});
  }

  CanaryState state_;
  HostTensor<int32_t> req_to_token;
};

TEST_P(ChainVectors, PrefillWritesThePublishedChain) {
  WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
  const int64_t expected_prev[] = {-2414019407054260458LL, -8517104317260626359LL,
                                   6305883652896473243LL, -775092142951646884LL,
                                   6894519779082095460LL};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(state_.record(i + 1), (Record{11 * (i + 1), i, expected_prev[i], 0})) << i;
  }
  EXPECT_EQ(state_.kernel_run_counter[0], 1);
  EXPECT_EQ(state_.slot_run_counter[0], 5);
  EXPECT_EQ(ComputeSlotHash(state_.canary.view(), 5), 0xae76343810f54045ull);
  EXPECT_EQ(ComputeSlotHash(state_.canary.view(), -1), ChainHeadHash());
}

TEST_P(ChainVectors, DecodeStepPlansVerifiesAndWrites) {
  WriteTokens(PlanStep(0, 5), {11, 22, 33, 44, 55}, {0, 1, 2, 3, 4}, {1, 2, 3, 4, 5});
  PlanBuffers decode = PlanStep(5, 1);
  EXPECT_EQ(decode.num_valid[0], 5);
  EXPECT_EQ(decode.enable[0], 1);
  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(decode.slots[e], e + 1);
    EXPECT_EQ(decode.prevs[e], e == 0 ? -1 : e);
    EXPECT_EQ(decode.positions[e], e);
  }
  EXPECT_EQ(decode.offsets[0], 0);
  EXPECT_EQ(decode.offsets[1], 1);
  EXPECT_EQ(decode.seeds[0], 5);

  VerifyPlan(decode);
  EXPECT_EQ(state_.write_index[0], 0);
  EXPECT_EQ(state_.slot_run_counter[0], 10);
  WriteTokens(decode, {66}, {5}, {6});
  EXPECT_EQ(state_.record(6), (Record{66, 5, -5875451248450912187LL, 0}));
}

TEST_P(ChainVectors, TokenCorruptionBreaksTheSuccessorsChain) {
  WriteChainAndDecode();
  state_.set_record(3, Record{34, 2, state_.record(3).prev_hash, 0});
  VerifyPlan(PlanStep(6, 0));
  ASSERT_EQ(state_.rows().size(), 1u);
  EXPECT_EQ(state_.rows()[0],
            (ViolationRow{2, 4, 3, 44, -1, S(0xf53e51cd772bb95c), S(0x8b2a107792878536), 1}));
}

TEST_P(ChainVectors, PositionCorruptionFlagsTheSlotAndItsSuccessor) {
  WriteChainAndDecode();
  Record record = state_.record(2);
  record.position = 9;
  state_.set_record(2, record);
  VerifyPlan(PlanStep(6, 0));
  ExpectRows({ViolationRow{2, 2, 9, 22, -1, S(0x89cd2abfbebc0649), S(0x89cd2abfbebc0649), 2},
              ViolationRow{2, 3, 2, 33, -1, S(0x5782ffc5b5d6409b), S(0xc8d30aaa5ec35a95), 1}});
}

TEST_P(ChainVectors, TokenCheckFlagsAPoolMismatch) {
  WriteChainAndDecode();
  HostTensor<int32_t> pool({2, 8}, {0, 0, 0, 0, 0, 0, 0, 0, 11, 22, 33, 45, 55, 66, 0, 0});
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({6});
  VerifyPlan(PlanStep(6, 0, pool.view(), valid_lens.view()), /*check_token=*/true);
  ASSERT_EQ(state_.rows().size(), 1u);
  EXPECT_EQ(state_.rows()[0],
            (ViolationRow{2, 4, 3, 44, 45, S(0xf53e51cd772bb95c), S(0xf53e51cd772bb95c), 32}));
}

TEST_P(ChainVectors, WriteAssertsRecordInputThenChainRows) {
  WriteChainAndDecode();
  state_.chain_assert[0] = 1;
  // Seed slot 5 (position 4): a request with prefix 5 whose last prefix slot is 5.
  PlanBuffers plan = PlanStep(5, 1);
  WriteTokens(plan, {77}, {7}, {7}, {78}, {7});
  ExpectRows({ViolationRow{2, 7, 7, 77, 78, S(0xae76343810f54045), 7, 8},
              ViolationRow{2, 7, 7, 77, 77, S(0xae76343810f54045), 5, 16}});
  EXPECT_EQ(state_.record(7), (Record{77, 7, -5875451248450912187LL, 0}));
}

HostTensor<uint8_t> Bytes(int64_t rows, int64_t cols, uint8_t first) {
  HostTensor<uint8_t> t({rows, cols});
  std::iota(t.values().begin(), t.values().end(), first);
  return t;
}

// Real-KV fingerprints, through the host helper (here) and through a write (RealKvWrite).
class RealKvVectors : public ::testing::Test {
 protected:
  static uint64_t Hash(const std::vector<RealKvSource>& sources, RealKvHashMode mode,
                       int64_t slot) {
    return RealKvHash(sources.data(), static_cast<int>(sources.size()), static_cast<int32_t>(mode),
                      slot);
  }
};

TEST_F(RealKvVectors, OneSixteenByteSource) {
  HostTensor<uint8_t> kv = Bytes(1, 16, 0);
  const RealKvSource source = MakeRealKvSource(kv.view(), 1, 16, 16);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kPartial, 0), 0xd6d75024dfd6c30cull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 0), 0xd6d75024dfd6c30cull);
  EXPECT_EQ(ToSigned(Hash({source}, RealKvHashMode::kAll, 0)), -2965813710295743732LL);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kNone, 0), 0u);
}

TEST_F(RealKvVectors, ThirtyTwoBytesFoldAllOrOnlySixteen) {
  HostTensor<uint8_t> kv = Bytes(1, 32, 0);
  const RealKvSource source = MakeRealKvSource(kv.view(), 1, 32, 32);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 0), 0xb44181dfe9420039ull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kPartial, 0), 0xd6d75024dfd6c30cull);
}

TEST_F(RealKvVectors, TwoSourcesCombineInOrder) {
  HostTensor<uint8_t> a = Bytes(1, 16, 0x00);
  HostTensor<uint8_t> b = Bytes(1, 16, 0x10);
  EXPECT_EQ(Hash({MakeRealKvSource(a.view(), 1, 16, 16), MakeRealKvSource(b.view(), 1, 16, 16)},
                 RealKvHashMode::kAll, 0),
            0xb6209a488c3f52b0ull);
}

TEST_F(RealKvVectors, ZeroBytesFingerprintToZero) {
  HostTensor<uint8_t> kv({1, 16});
  EXPECT_EQ(Hash({MakeRealKvSource(kv.view(), 1, 16, 16)}, RealKvHashMode::kPartial, 0), 0u);
}

TEST_F(RealKvVectors, PagedSourceAddressesStripsByPageAndRow) {
  HostTensor<uint8_t> kv = Bytes(3, 64, 0);
  std::fill(kv.values().begin() + 128, kv.values().end(), uint8_t{0});
  const RealKvSource source = MakeRealKvSource(kv.view(), 2, 32, 32);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 1), 0x9f04b7ee5eee5bd3ull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 2), 0x4e612227cd041419ull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 3), 0x40612c9889df0761ull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kAll, 4), 0x0ull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kPartial, 1), 0x2c75ca2b6b98a11aull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kPartial, 2), 0x8d15d2b76f386f4bull);
  EXPECT_EQ(Hash({source}, RealKvHashMode::kPartial, 3), 0x344bdaf9666261f8ull);
}

using RealKvWrite = BackendTest;

TEST_P(RealKvWrite, WriteStoresTheFingerprintAndVerifyRechecksIt) {
  CanaryState state(8);
  HostTensor<uint8_t> kv = Bytes(8, 16, 0);
  for (int i = 0; i < 16; ++i) kv.at(1, i) = static_cast<uint8_t>(i);
  LaunchContext context = state.Context(kTail);
  context.real_kv_sources[0] = MakeRealKvSource(kv.view(), 1, 16, 16);
  context.num_real_kv_sources = 1;
  context.real_kv_hash_mode = static_cast<int32_t>(RealKvHashMode::kPartial);

  PlanBuffers plan(4, 1);
  plan.offsets[1] = 1;
  plan.seeds[0] = -1;
  plan.num_valid_reqs[0] = 1;
  HostTensor<int64_t> ids = HostTensor<int64_t>::Of({11});
  HostTensor<int64_t> pos = HostTensor<int64_t>::Of({0});
  HostTensor<int64_t> loc = HostTensor<int64_t>::Of({1});
  WriteArgs write;
  write.context = context;
  write.plan = plan.write();
  write.input_ids = ids.view();
  write.positions = pos.view();
  write.out_cache_loc = loc.view();
  backend.Write(write);
  EXPECT_EQ(state.record(1).real_kv_hash, -2965813710295743732LL);

  plan.slots[0] = 1;
  plan.prevs[0] = -1;
  plan.positions[0] = 0;
  plan.num_valid[0] = 1;
  kv.at(1, 15) ^= 0x01;  // KV changed after the record was written
  backend.Verify(VerifyArgs{context, plan.verify(), false});
  ASSERT_EQ(state.rows().size(), 1u);
  EXPECT_EQ(state.rows()[0].slot_idx, 1);
  EXPECT_EQ(state.rows()[0].fail_reason_bits, FailReason::kVerifyRealKvHashMismatch);
}

// Plan hand cases: req_to_token[rp][c] = rp * 16 + c, width 16, verify capacity 16, write
// capacity 8, no LUT, no pool.
class PlanHandCases : public BackendTest {
 protected:
  PlanHandCases() : req_to_token({4, 16}), plan_(16, 8) {
    for (int64_t i = 0; i < 64; ++i) req_to_token[i] = static_cast<int32_t>(i);
  }

  void Run(std::vector<int64_t> rp, std::vector<int64_t> prefix, std::vector<int64_t> extend,
           int64_t verify_capacity = 16) {
    if (verify_capacity != 16) plan_ = PlanBuffers(verify_capacity, 8);
    HostTensor<int64_t> rp_t = HostTensor<int64_t>::Of(rp);
    HostTensor<int64_t> prefix_t = HostTensor<int64_t>::Of(prefix);
    HostTensor<int64_t> extend_t = HostTensor<int64_t>::Of(extend);
    backend.Plan(testing::PlanCallOver(plan_, rp_t.view(), prefix_t.view(), extend_t.view(),
                                       req_to_token.view()));
  }

  void ExpectEntries(const std::vector<int64_t>& slots, const std::vector<int64_t>& prevs,
                     const std::vector<int64_t>& positions) {
    ASSERT_EQ(plan_.num_valid[0], static_cast<int32_t>(slots.size()));
    EXPECT_EQ(plan_.enable[0], 1);
    for (size_t e = 0; e < slots.size(); ++e) {
      EXPECT_EQ(plan_.slots[e], slots[e]) << e;
      EXPECT_EQ(plan_.prevs[e], prevs[e]) << e;
      EXPECT_EQ(plan_.positions[e], positions[e]) << e;
      EXPECT_EQ(plan_.tokens[e], -1) << e;
    }
  }

  void ExpectOffsets(const std::vector<int64_t>& head) {
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(plan_.offsets[i], i < static_cast<int64_t>(head.size()) ? head[i] : 0) << i;
    }
  }

  HostTensor<int32_t> req_to_token;
  PlanBuffers plan_;
};

TEST_P(PlanHandCases, H1FreshPrefillHasNoEntries) {
  Run({1}, {0}, {5});
  ExpectEntries({}, {}, {});
  ExpectOffsets({0, 5});
  EXPECT_EQ(plan_.seeds[0], -1);
  EXPECT_EQ(plan_.num_valid_reqs[0], 1);
}

TEST_P(PlanHandCases, H2DecodeVerifiesThePrefix) {
  Run({1}, {7}, {1});
  ExpectEntries({16, 17, 18, 19, 20, 21, 22}, {-1, 16, 17, 18, 19, 20, 21}, {0, 1, 2, 3, 4, 5, 6});
  ExpectOffsets({0, 1});
  EXPECT_EQ(plan_.seeds[0], 22);
}

TEST_P(PlanHandCases, H3PaddingRowContributesNothing) {
  Run({1, 0, 2}, {3, 5, 2}, {1, 1, 1});
  ExpectEntries({16, 17, 18, 32, 33}, {-1, 16, 17, -1, 32}, {0, 1, 2, 0, 1});
  ExpectOffsets({0, 1, 1, 2});
  EXPECT_EQ(plan_.seeds[0], 18);
  EXPECT_EQ(plan_.seeds[1], -1);
  EXPECT_EQ(plan_.seeds[2], 33);
  EXPECT_EQ(plan_.num_valid_reqs[0], 3);
}

TEST_P(PlanHandCases, H4OverflowDisablesVerifyAndWritesNoEntry) {
  plan_ = PlanBuffers(4, 8);
  std::fill(plan_.slots.values().begin(), plan_.slots.values().end(), 99);
  HostTensor<int64_t> rp = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix = HostTensor<int64_t>::Of({5, 3});
  HostTensor<int64_t> extend = HostTensor<int64_t>::Of({1, 1});
  PlanArgs args;
  args.verify_plan_out = plan_.verify();
  args.write_plan_out = plan_.write();
  args.inputs.req_pool_indices = rp.view();
  args.inputs.prefix_lens = prefix.view();
  args.inputs.extend_seq_lens = extend.view();
  args.inputs.req_to_token = req_to_token.view();
  args.verify_capacity = 4;
  Plan(args);
  EXPECT_EQ(plan_.num_valid[0], 4);
  EXPECT_EQ(plan_.enable[0], 0);
  for (int e = 0; e < 4; ++e) EXPECT_EQ(plan_.slots[e], 99);
  ExpectOffsets({0, 1, 2});
  EXPECT_EQ(plan_.seeds[0], 20);
  EXPECT_EQ(plan_.seeds[1], 34);
}

TEST_P(PlanHandCases, H5VerifyOnlyPlanHasNoSeed) {
  Run({1}, {6}, {0});
  ExpectEntries({16, 17, 18, 19, 20, 21}, {-1, 16, 17, 18, 19, 20}, {0, 1, 2, 3, 4, 5});
  ExpectOffsets({0, 0});
  EXPECT_EQ(plan_.seeds[0], -1);
}

TEST_P(PlanHandCases, H6ShorterBatchZeroesStaleOffsets) {
  Run({1, 0, 2}, {3, 5, 2}, {1, 1, 1});
  Run({1}, {0}, {5});
  ExpectOffsets({0, 5});
}

// SWA and clamp cases L1-L5.
class PlanSwaCases : public BackendTest {
 protected:
  struct Inputs {
    std::vector<int64_t> rp, prefix, extend;
    int64_t window = 0;
    const HostTensor<int64_t>* lut = nullptr;
    const HostTensor<int32_t>* pool = nullptr;
    const HostTensor<int64_t>* valid_lens = nullptr;
    int64_t offset = 0;
  };

  PlanBuffers Run(const HostTensor<int32_t>& req_to_token, const Inputs& in,
                  int64_t capacity = 256) {
    PlanBuffers plan(capacity, 4);
    HostTensor<int64_t> rp = HostTensor<int64_t>::Of(in.rp);
    HostTensor<int64_t> prefix = HostTensor<int64_t>::Of(in.prefix);
    HostTensor<int64_t> extend = HostTensor<int64_t>::Of(in.extend);
    PlanArgs args =
        testing::PlanCallOver(plan, rp.view(), prefix.view(), extend.view(), req_to_token.view());
    args.inputs.swa_window_size = in.window;
    if (in.lut) args.inputs.full_to_swa_index_mapping = in.lut->view();
    if (in.pool) args.inputs.req_to_verify_expected_tokens = in.pool->view();
    if (in.valid_lens) args.inputs.req_to_verify_expected_tokens_valid_lens = in.valid_lens->view();
    args.inputs.kv_token_id_vs_position_offset = in.offset;
    backend.Plan(args);
    return plan;
  }

  // width 256, row 1 slots 256 + pos; LUT len 1025, LUT[i] = i - 200 for i >= 300 else 0.
  static HostTensor<int32_t> WideTable() {
    HostTensor<int32_t> t({2, 256});
    for (int c = 0; c < 256; ++c) t.at(1, c) = 256 + c;
    return t;
  }
  static HostTensor<int64_t> ShiftLut() {
    HostTensor<int64_t> lut({1025});
    for (int i = 300; i < 1025; ++i) lut[i] = i - 200;
    return lut;
  }
};

TEST_P(PlanSwaCases, L1WindowVerifiesTheLastWPositions) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut = ShiftLut();
  PlanBuffers plan = Run(table, {{1}, {200}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 128);
  EXPECT_EQ(plan.positions[0], 72);
  EXPECT_EQ(plan.slots[0], 128);
  EXPECT_EQ(plan.prevs[0], 127);
  EXPECT_EQ(plan.slots[127], 255);
  EXPECT_EQ(plan.positions[127], 199);
  EXPECT_EQ(plan.seeds[0], 255);
}

TEST_P(PlanSwaCases, L2EvictedSlotsTranslateToZero) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut = ShiftLut();
  PlanBuffers plan = Run(table, {{1}, {100}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 100);
  for (int e = 0; e < 44; ++e) EXPECT_EQ(plan.slots[e], 0) << e;
  EXPECT_EQ(plan.slots[44], 100);
  EXPECT_EQ(plan.prevs[44], 0);
  EXPECT_EQ(plan.seeds[0], 155);
}

TEST_P(PlanSwaCases, L3LutIndexPastTheEndClamps) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut({258});
  std::iota(lut.values().begin(), lut.values().end(), 1000);
  PlanBuffers plan = Run(table, {{1}, {3}, {1}, 0, &lut});
  ASSERT_EQ(plan.num_valid[0], 3);
  EXPECT_EQ(plan.slots[0], 1256);
  EXPECT_EQ(plan.slots[1], 1257);
  EXPECT_EQ(plan.slots[2], 1257);
  EXPECT_EQ(plan.prevs[0], -1);
  EXPECT_EQ(plan.prevs[1], 1256);
  EXPECT_EQ(plan.prevs[2], 1257);
  EXPECT_EQ(plan.seeds[0], 1257);
}

TEST_P(PlanSwaCases, L4PositionsPastTheRowClampToItsLastColumn) {
  HostTensor<int32_t> table({2, 4}, {0, 0, 0, 0, 10, 11, 12, 13});
  PlanBuffers plan = Run(table, {{1}, {6}, {1}});
  const int64_t slots[] = {10, 11, 12, 13, 13, 13};
  const int64_t prevs[] = {-1, 10, 11, 12, 13, 13};
  ASSERT_EQ(plan.num_valid[0], 6);
  for (int e = 0; e < 6; ++e) {
    EXPECT_EQ(plan.slots[e], slots[e]) << e;
    EXPECT_EQ(plan.prevs[e], prevs[e]) << e;
  }
  EXPECT_EQ(plan.seeds[0], 13);
}

TEST_P(PlanSwaCases, L5TokenPoolUsesBatchRowValidLensAndDraftOffset) {
  HostTensor<int32_t> table({3, 8});
  HostTensor<int32_t> pool({3, 8});
  for (int c = 0; c < 8; ++c) {
    table.at(2, c) = 40 + c;
    pool.at(2, c) = 100 + c;
  }
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({0, 4});
  PlanBuffers plan = Run(table, {{0, 2}, {9, 4}, {3, 1}, 0, nullptr, &pool, &valid_lens, 1});
  ASSERT_EQ(plan.num_valid[0], 4);
  const int64_t tokens[] = {101, 102, 103, -1};
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(plan.slots[e], 40 + e);
    EXPECT_EQ(plan.positions[e], e);
    EXPECT_EQ(plan.tokens[e], tokens[e]) << e;
  }
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[1], 0);
  EXPECT_EQ(plan.offsets[2], 1);
  EXPECT_EQ(plan.seeds[0], -1);
  EXPECT_EQ(plan.seeds[1], 43);
  EXPECT_EQ(plan.num_valid_reqs[0], 2);
}

KVC_ON_EVERY_BACKEND(ChainVectors);
KVC_ON_EVERY_BACKEND(RealKvWrite);
KVC_ON_EVERY_BACKEND(PlanHandCases);
KVC_ON_EVERY_BACKEND(PlanSwaCases);

}  // namespace
}  // namespace kvcanary
