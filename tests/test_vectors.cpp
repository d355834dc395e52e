// The published test vectors (docs/format.md): the [11,22,33,44,55] chain, the decode step, verify
// after corruption, the write asserts and the real-KV fingerprints (the plan hand cases are in
// test_plan_vectors.cpp). Every op
// test runs on the CPU and on CUDA (BackendRunner), against the same expected values; where a
// launch records several rows, CUDA's are compared as a multiset.
#include <gtest/gtest.h>

#include <numeric>

#include "backend_runner.h"
#include "kvcanary/kvcanary.h"
#include "plan_args.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::BackendTest;
using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;
using testing::WriteCall;

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
    WriteArgs args =
        WriteCall(state_.Context(kTail), plan.write(), ids.view(), pos.view(), loc.view());
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
  backend.Write(WriteCall(context, plan.write(), ids.view(), pos.view(), loc.view()));
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

KVC_ON_EVERY_BACKEND(ChainVectors);
KVC_ON_EVERY_BACKEND(RealKvWrite);

}  // namespace
}  // namespace kvcanary
