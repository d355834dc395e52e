// Validation of launch_canary_plan_kernels (spec/kernels.md §11 rows P1-P10, deviation D10) and of
// the plan allocation sizes (V11, V12, W13, W14).
//
// Each test starts from a valid call (PlanCase), breaks exactly one thing, and checks the exact
// message and that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged"
// is not the same as "still zero", and the valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kMaxCount = 2147483647;

// A valid call: bs=2 live rows on req_to_token rows 1 and 2 with prefixes 3 and 2 and extends 2
// and 1 (T = 5 verify entries), a [4, 8] table, verify capacity 16, write capacity 4, and every
// optional input given (LUT with W = 0, token pool, scratch).
struct PlanCase {
  PlanCase() : plan(kVerifyCapacity, kWriteCapacity) {
    Poison(plan.slots);
    Poison(plan.tokens);
    Poison(plan.positions);
    Poison(plan.prevs);
    Poison(plan.num_valid);
    Poison(plan.enable);
    Poison(plan.offsets);
    Poison(plan.seeds);
    Poison(plan.num_valid_reqs);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 8; ++c) {
        req_to_token.at(r, c) = static_cast<int32_t>(TableSlot(r, c));
        pool.at(r, c) = PoolToken(r, c);
      }
    }
    for (int64_t i = 0; i < kLutLen; ++i) lut[i] = kLutBase + i;
  }

  PlanArgs Args() const {
    PlanArgs args;
    args.verify_plan_out = plan.verify();
    args.write_plan_out = plan.write();
    args.inputs.req_pool_indices = req_pool_indices.view();
    args.inputs.prefix_lens = prefix_lens.view();
    args.inputs.extend_seq_lens = extend_seq_lens.view();
    args.inputs.req_to_token = req_to_token.view();
    args.inputs.full_to_swa_index_mapping = lut.view();
    args.verify_capacity = kVerifyCapacity;
    args.inputs.req_to_verify_expected_tokens = pool.view();
    args.inputs.req_to_verify_expected_tokens_valid_lens = valid_lens.view();
    args.verify_offsets_scratch = scratch.view();
    return args;
  }

  // Every buffer the op may write.
  ByteSnapshot Snapshot() {
    return ByteSnapshot(plan.slots, plan.tokens, plan.positions, plan.prevs, plan.num_valid,
                        plan.enable, plan.offsets, plan.seeds, plan.num_valid_reqs, scratch);
  }

  PlanBuffers plan;
  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({3, 2});
  HostTensor<int64_t> extend_seq_lens = HostTensor<int64_t>::Of({2, 1});
  HostTensor<int32_t> req_to_token{{4, 8}};
  HostTensor<int64_t> lut{{kLutLen}};
  HostTensor<int32_t> pool{{4, 8}};
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({8, 8});
  HostTensor<int64_t> scratch = Poisoned<int64_t>({3});
};

// Plan(args) must throw exactly `message` and leave every output of `c`, and every replacement
// output in `extra`, byte-for-byte unchanged.
template <typename... Extra>
void ExpectPlanRaises(PlanCase& c, const PlanArgs& args, const std::string& message,
                      Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  EXPECT_KVC_ERROR(Plan(args), message);
  EXPECT_TRUE(before.Unchanged()) << "a rejected call wrote an output";
}

// The outputs of the baseline call: entries [0, 5) written, the rest of the verify arrays and the
// seeds of rows [bs, R) untouched, write_offsets[bs+1..R] zeroed.
void ExpectBaselinePlan(const PlanCase& c) {
  const std::vector<int64_t> rows = {1, 1, 1, 2, 2};
  const std::vector<int64_t> positions = {0, 1, 2, 0, 1};
  EXPECT_EQ(c.plan.num_valid[0], 5);
  EXPECT_EQ(c.plan.enable[0], 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t rp = rows[i];
    const int64_t pos = positions[i];
    EXPECT_EQ(c.plan.slots[i], Translated(TableSlot(rp, pos))) << "entry " << i;
    EXPECT_EQ(c.plan.prevs[i], pos > 0 ? Translated(TableSlot(rp, pos - 1)) : -1) << "entry " << i;
    EXPECT_EQ(c.plan.positions[i], pos) << "entry " << i;
    EXPECT_EQ(c.plan.tokens[i], PoolToken(rp, pos)) << "entry " << i;
  }
  for (int64_t i = 5; i < kVerifyCapacity; ++i) EXPECT_EQ(c.plan.slots[i], kPoison);
  EXPECT_EQ(Values(c.plan.offsets), (std::vector<int64_t>{0, 2, 3, 0, 0}));
  EXPECT_EQ(Values(c.plan.seeds),
            (std::vector<int64_t>{Translated(TableSlot(1, 2)), Translated(TableSlot(2, 1)), kPoison,
                                  kPoison}));
  EXPECT_EQ(c.plan.num_valid_reqs[0], 2);
}

TEST(PlanValidation, ValidBaselineSucceedsAndWrites) {
  PlanCase c;
  const ByteSnapshot before = c.Snapshot();
  Plan(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselinePlan(c);
}

TEST(PlanValidation, PresenceReqToTokenMissingRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = TensorView();
  ExpectPlanRaises(c, args, "kv-canary: req_to_token is required, got None");
}

TEST(PlanValidation, PresenceVerifySlotIndicesMissingRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = TensorView();
  ExpectPlanRaises(c, args, "kv-canary: out_verify_slot_indices is required, got None");
}

TEST(PlanValidation, P1SwaWindowWithoutLutRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.swa_window_size = 2;
  args.inputs.full_to_swa_index_mapping = TensorView();
  ExpectPlanRaises(c, args,
                   "kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
                   "swa_window_size > 0");
}

// P2 is SGLang's CUDA-only bs <= 4096 limit; kvcanary drops it (D6): only bs <= write_req_capacity.
TEST(PlanValidation, P2BatchAbove4096IsAccepted) {
  constexpr int64_t kBs = 4097;
  PlanCase c;
  PlanBuffers big(kVerifyCapacity, kBs);
  const HostTensor<int64_t> zeros({kBs});
  PlanArgs args = c.Args();
  args.verify_plan_out = big.verify();
  args.write_plan_out = big.write();
  args.inputs.req_pool_indices = zeros.view();
  args.inputs.prefix_lens = zeros.view();
  args.inputs.extend_seq_lens = zeros.view();
  args.inputs.req_to_verify_expected_tokens = TensorView();
  args.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
  args.verify_offsets_scratch = TensorView();
  Plan(args);
  EXPECT_EQ(big.num_valid_reqs[0], kBs);
  EXPECT_EQ(big.num_valid[0], 0);
}

TEST(PlanValidation, P3VerifyCapacityMismatchRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_capacity = 15;
  ExpectPlanRaises(c, args,
                   "kv-canary: launch_canary_plan_kernels verify_capacity=15 does not match "
                   "verify_plan_out.verify_slot_indices.shape[0]=16");
}

// V12 also guards the plan op (verify_num_valid is int32). Validation reads no element, so the
// view may claim more elements than its memory holds.
TEST(PlanValidation, V12PlanVerifyCapacityAboveInt32Raises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = c.plan.slots.view({kMaxCount + 1});
  args.verify_capacity = kMaxCount + 1;
  ExpectPlanRaises(c, args,
                   "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648");
}

TEST(PlanValidation, P4PoolWithoutValidLensRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
  ExpectPlanRaises(c, args,
                   "kv-canary: launch_plan_entries_kernel requires "
                   "req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens "
                   "is set");
}

// P5 = O1: contiguity, first, middle and last of the list.
TEST(PlanValidation, P5O1ReqPoolIndicesNotContiguousRaises) {
  PlanCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1, 0, 2, 0});
  PlanArgs args = c.Args();
  args.inputs.req_pool_indices = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: req_pool_indices must be contiguous");
}

TEST(PlanValidation, P5O1LutNotContiguousRaises) {
  PlanCase c;
  const HostTensor<int64_t> wide({2 * kLutLen});
  PlanArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: lut_tensor must be contiguous");
}

TEST(PlanValidation, P5O1WriteNumValidReqsNotContiguousRaises) {
  PlanCase c;
  HostTensor<int32_t> wide = Poisoned<int32_t>({4});
  PlanArgs args = c.Args();
  args.write_plan_out.write_num_valid_reqs = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: out_write_num_valid_reqs must be contiguous", wide);
}

// P5 = O2: dtypes.
TEST(PlanValidation, P5O2ReqPoolIndicesWrongDtypeRaises) {
  PlanCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({1, 2});
  PlanArgs args = c.Args();
  args.inputs.req_pool_indices = narrow.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, P5O2ReqToTokenWrongDtypeRaises) {
  PlanCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanArgs args = c.Args();
  args.inputs.req_to_token = wide.view();
  ExpectPlanRaises(c, args, "kv-canary: req_to_token must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, P5O2LutWrongDtypeRaises) {
  PlanCase c;
  const HostTensor<int32_t> narrow({kLutLen});
  PlanArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = narrow.view();
  ExpectPlanRaises(c, args, "kv-canary: lut_tensor must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, P5O2WriteNumValidReqsWrongDtypeRaises) {
  PlanCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({1});
  PlanArgs args = c.Args();
  args.write_plan_out.write_num_valid_reqs = wide.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: out_write_num_valid_reqs must have dtype torch.int32, got "
                   "torch.int64",
                   wide);
}

// P5 = O12, O13: batch lengths and the table's rank.
TEST(PlanValidation, P5O12ReqPoolIndicesNot1DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_pool_indices = c.req_pool_indices.view({2, 1});
  ExpectPlanRaises(c, args, "kv-canary: req_pool_indices must be 1-D, got shape (2, 1)");
}

TEST(PlanValidation, P5O12PrefixLensLengthRaises) {
  PlanCase c;
  const HostTensor<int64_t> longer = HostTensor<int64_t>::Of({3, 2, 0});
  PlanArgs args = c.Args();
  args.inputs.prefix_lens = longer.view();
  ExpectPlanRaises(c, args, "kv-canary: prefix_lens length must be 2, got 3");
}

TEST(PlanValidation, P5O12ExtendSeqLensLengthRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.extend_seq_lens = c.extend_seq_lens.view({1});
  ExpectPlanRaises(c, args, "kv-canary: extend_seq_lens length must be 2, got 1");
}

TEST(PlanValidation, P5O13ReqToTokenNot2DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({32});
  ExpectPlanRaises(c, args, "kv-canary: req_to_token must be 2-D, got shape (32,)");
}

// P5 = O15: plan arrays and the LUT's rank.
TEST(PlanValidation, P5O15WriteOffsetsNot1DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.write_plan_out.write_offsets = c.plan.offsets.view({kWriteCapacity + 1, 1});
  ExpectPlanRaises(c, args, "kv-canary: out_write_offsets must be 1-D, got shape (5, 1)");
}

TEST(PlanValidation, P5O15VerifyNumValidLengthRaises) {
  PlanCase c;
  HostTensor<int32_t> two = Poisoned<int32_t>({2});
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_num_valid = two.view();
  ExpectPlanRaises(c, args, "kv-canary: out_verify_num_valid length must be 1, got 2", two);
}

TEST(PlanValidation, P5O15WriteNumValidReqsLengthRaises) {
  PlanCase c;
  HostTensor<int32_t> two = Poisoned<int32_t>({2});
  PlanArgs args = c.Args();
  args.write_plan_out.write_num_valid_reqs = two.view();
  ExpectPlanRaises(c, args, "kv-canary: out_write_num_valid_reqs length must be 1, got 2", two);
}

TEST(PlanValidation, P5O15LutNot1DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
  ExpectPlanRaises(c, args, "kv-canary: lut_tensor must be 1-D, got shape (8, 8)");
}

// P5 = O16-O18.
TEST(PlanValidation, P5O16WriteOffsetsLengthMismatchRaises) {
  PlanCase c;
  HostTensor<int64_t> offsets = Poisoned<int64_t>({kWriteCapacity});
  PlanArgs args = c.Args();
  args.write_plan_out.write_offsets = offsets.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4",
                   offsets);
}

TEST(PlanValidation, P5O17BatchExceedsWriteCapacityRaises) {
  PlanCase c;
  PlanBuffers small(kVerifyCapacity, 1);
  Poison(small.offsets);
  Poison(small.seeds);
  Poison(small.num_valid_reqs);
  PlanArgs args = c.Args();
  args.write_plan_out = small.write();
  ExpectPlanRaises(c, args, "kv-canary: bs=2 exceeds write_req_capacity=1", small.offsets,
                   small.seeds, small.num_valid_reqs);
}

TEST(PlanValidation, P5O18ReqToTokenStride0MismatchRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token_stride0 = 16;
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8");
}

TEST(PlanValidation, P6EmptyLutRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({0});
  ExpectPlanRaises(c, args, "kv-canary: lut_tensor length must be >= 1, got 0");
}

// P7: the four verify arrays, checked one after the other.
TEST(PlanValidation, P7SlotIndicesNotContiguousRaises) {
  PlanCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: out_verify_slot_indices must be contiguous", wide);
}

TEST(PlanValidation, P7SlotIndicesWrongDtypeRaises) {
  PlanCase c;
  HostTensor<int32_t> narrow = Poisoned<int32_t>({kVerifyCapacity});
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = narrow.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: out_verify_slot_indices must have dtype torch.int64, got "
                   "torch.int32",
                   narrow);
}

TEST(PlanValidation, P7ExpectedPositionsNot1DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_expected_positions = c.plan.positions.view({kVerifyCapacity, 1});
  ExpectPlanRaises(c, args,
                   "kv-canary: out_verify_expected_positions must be 1-D, got shape (16, 1)");
}

TEST(PlanValidation, P7PrevSlotIndicesNotContiguousRaises) {
  PlanCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_prev_slot_indices = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: out_verify_prev_slot_indices must be contiguous", wide);
}

TEST(PlanValidation, P7PrevSlotIndicesLengthRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_prev_slot_indices = c.plan.prevs.view({kVerifyCapacity - 1});
  ExpectPlanRaises(c, args, "kv-canary: out_verify_prev_slot_indices length must be 16, got 15");
}

// P8: the expected-token pool and its valid lengths.
TEST(PlanValidation, P8PoolNotContiguousRaises) {
  PlanCase c;
  const HostTensor<int32_t> wide({4, 16});
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = wide.view({4, 8}, {16, 1});
  ExpectPlanRaises(c, args, "kv-canary: req_to_verify_expected_tokens must be contiguous");
}

TEST(PlanValidation, P8PoolWrongDtypeRaises) {
  PlanCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = wide.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got "
                   "torch.int64");
}

TEST(PlanValidation, P8PoolNot2DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = c.pool.view({32});
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_verify_expected_tokens must be 2-D, got shape (32,)");
}

TEST(PlanValidation, P8ValidLensNotContiguousRaises) {
  PlanCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({8, 0, 8, 0});
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = EveryOther(wide);
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_verify_expected_tokens_valid_lens must be contiguous");
}

TEST(PlanValidation, P8ValidLensWrongDtypeRaises) {
  PlanCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({8, 8});
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = narrow.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_verify_expected_tokens_valid_lens must have dtype "
                   "torch.int64, got torch.int32");
}

TEST(PlanValidation, P8ValidLensLengthRaises) {
  PlanCase c;
  const HostTensor<int64_t> longer = HostTensor<int64_t>::Of({8, 8, 8});
  PlanArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = longer.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 3");
}

// P9: the optional workspace.
TEST(PlanValidation, P9ScratchNotContiguousRaises) {
  PlanCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({6});
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = EveryOther(wide);
  ExpectPlanRaises(c, args, "kv-canary: verify_offsets_scratch must be contiguous", wide);
}

TEST(PlanValidation, P9ScratchWrongDtypeRaises) {
  PlanCase c;
  HostTensor<int32_t> narrow = Poisoned<int32_t>({3});
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = narrow.view();
  ExpectPlanRaises(c, args,
                   "kv-canary: verify_offsets_scratch must have dtype torch.int64, got "
                   "torch.int32",
                   narrow);
}

TEST(PlanValidation, P9ScratchNot1DRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({3, 1});
  ExpectPlanRaises(c, args, "kv-canary: verify_offsets_scratch must be 1-D, got shape (3, 1)");
}

TEST(PlanValidation, P9ScratchTooShortRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({2});
  ExpectPlanRaises(c, args, "kv-canary: verify_offsets_scratch length must be >= 3, got 2");
}

// P10: one device, the reference being verify_plan_out.verify_slot_indices.
TEST(PlanValidation, P10ExpectedTokensOnOtherDeviceRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_expected_tokens = OnCuda(args.verify_plan_out.verify_expected_tokens);
  ExpectPlanRaises(c, args,
                   "kv-canary: out_verify_expected_tokens must be on out_verify_slot_indices's "
                   "device cpu, got cuda:0");
}

TEST(PlanValidation, P10ReqToTokenOnOtherDeviceRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = OnCuda(args.inputs.req_to_token);
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_token must be on out_verify_slot_indices's device cpu, got "
                   "cuda:0");
}

TEST(PlanValidation, P10ScratchOnOtherDeviceRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = OnCuda(args.verify_offsets_scratch);
  ExpectPlanRaises(c, args,
                   "kv-canary: verify_offsets_scratch must be on out_verify_slot_indices's device "
                   "cpu, got cuda:0");
}

TEST(PlanValidation, P10ReferenceOnOtherDeviceRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = OnCuda(args.verify_plan_out.verify_slot_indices);
  ExpectPlanRaises(c, args,
                   "kv-canary: out_verify_expected_tokens must be on out_verify_slot_indices's "
                   "device cuda:0, got cpu");
}

// G8: outputs must be writable.
TEST(PlanValidation, G8SlotIndicesReadOnlyRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_plan_out.verify_slot_indices = c.plan.slots.read_only_view();
  ExpectPlanRaises(c, args, "kv-canary: out_verify_slot_indices must be writable");
}

TEST(PlanValidation, G8WriteNumValidReqsReadOnlyRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.write_plan_out.write_num_valid_reqs = c.plan.num_valid_reqs.read_only_view();
  ExpectPlanRaises(c, args, "kv-canary: out_write_num_valid_reqs must be writable");
}

TEST(PlanValidation, G8ScratchReadOnlyRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.read_only_view();
  ExpectPlanRaises(c, args, "kv-canary: verify_offsets_scratch must be writable");
}

// G9: every tensor on one device that no backend of this build supports.
void AllOnDevice(Device device, PlanArgs& args) {
  VerifyPlanView& v = args.verify_plan_out;
  WritePlanView& w = args.write_plan_out;
  MoveToDevice(device,
               {&v.verify_slot_indices, &v.verify_expected_tokens, &v.verify_expected_positions,
                &v.verify_prev_slot_indices, &v.verify_num_valid, &v.enable, &w.write_offsets,
                &w.write_seed_slot_indices, &w.write_num_valid_reqs, &args.inputs.req_pool_indices,
                &args.inputs.prefix_lens, &args.inputs.extend_seq_lens, &args.inputs.req_to_token,
                &args.inputs.full_to_swa_index_mapping, &args.inputs.req_to_verify_expected_tokens,
                &args.inputs.req_to_verify_expected_tokens_valid_lens, &args.verify_offsets_scratch});
}

// DLPack's Metal: supported by no build.
TEST(PlanValidation, G9AllOnUnsupportedDeviceRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  AllOnDevice(Device{DeviceType::kOther, 0, 8}, args);
  ExpectPlanRaises(c, args,
                   "kv-canary: out_verify_slot_indices is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
// Built without the CUDA backend, a call on cuda:0 is refused too (the host memory behind the
// views is never touched).
TEST(PlanValidation, G9AllOnCudaWithoutBackendRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectPlanRaises(c, args, "kv-canary: out_verify_slot_indices is on unsupported device cuda:0");
}
#endif

// D10: the C++ API reads req_to_token through its row stride (WideTable).
TEST(PlanValidation, D10SlicedReqToTokenReadsTheRightRows) {
  PlanCase c;
  const WideTable table;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  Plan(args);
  ExpectBaselinePlan(c);
}

TEST(PlanValidation, D10SlicedReqToTokenWithMatchingStride0Passes) {
  PlanCase c;
  const WideTable table;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.req_to_token_stride0 = 16;
  Plan(args);
  ExpectBaselinePlan(c);
}

TEST(PlanValidation, D10SlicedReqToTokenWithStaleStride0Raises) {
  PlanCase c;
  const WideTable table;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.req_to_token_stride0 = 8;
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_token_stride0=8 does not match req_to_token.stride(0)=16");
}

TEST(PlanValidation, D10SlicedReqToTokenRequiredContiguousRaises) {
  PlanCase c;
  const WideTable table;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.require_contiguous_req_to_token = true;
  ExpectPlanRaises(c, args, "kv-canary: req_to_token must be contiguous");
}

TEST(PlanValidation, D10TransposedReqToTokenRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_token must have stride 1 in its last dimension and a row "
                   "stride >= its width, got shape (4, 8) strides (1, 4)");
}

TEST(PlanValidation, D10ExpandedReqToTokenRaises) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({4, 8}, {0, 1});
  ExpectPlanRaises(c, args,
                   "kv-canary: req_to_token must have stride 1 in its last dimension and a row "
                   "stride >= its width, got shape (4, 8) strides (0, 1)");
}

// Allocation sizes: VerifyPlan 4*C*8 + 2*4 bytes, WritePlan (2R+1)*8 + 4 bytes.
TEST(PlanValidation, AllocationBytesOfValidCapacities) {
  EXPECT_EQ(VerifyPlanAllocationBytes(16), 4 * 16 * 8 + 2 * 4);
  EXPECT_EQ(VerifyPlanAllocationBytes(kMaxCount), 4 * kMaxCount * 8 + 2 * 4);
  EXPECT_EQ(WritePlanAllocationBytes(4), (2 * 4 + 1) * 8 + 4);
  EXPECT_EQ(WritePlanAllocationBytes(kMaxCount), (2 * kMaxCount + 1) * 8 + 4);
}

TEST(PlanValidation, V11VerifyCapacityZeroRaises) {
  EXPECT_KVC_ERROR(VerifyPlanAllocationBytes(0),
                   "kv-canary: VerifyPlan verify_capacity must be positive, got 0");
}

TEST(PlanValidation, V11VerifyCapacityNegativeRaises) {
  EXPECT_KVC_ERROR(VerifyPlanAllocationBytes(-3),
                   "kv-canary: VerifyPlan verify_capacity must be positive, got -3");
}

TEST(PlanValidation, V12VerifyCapacityAboveInt32Raises) {
  EXPECT_KVC_ERROR(VerifyPlanAllocationBytes(kMaxCount + 1),
                   "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648");
}

TEST(PlanValidation, W13WriteCapacityZeroRaises) {
  EXPECT_KVC_ERROR(WritePlanAllocationBytes(0),
                   "kv-canary: WritePlan write_req_capacity must be positive, got 0");
}

TEST(PlanValidation, W13WriteCapacityNegativeRaises) {
  EXPECT_KVC_ERROR(WritePlanAllocationBytes(-1),
                   "kv-canary: WritePlan write_req_capacity must be positive, got -1");
}

TEST(PlanValidation, W14WriteCapacityAboveInt32Raises) {
  EXPECT_KVC_ERROR(WritePlanAllocationBytes(kMaxCount + 1),
                   "kv-canary: WritePlan write_req_capacity must be <= 2147483647, got 2147483648");
}

}  // namespace
}  // namespace kvcanary::testing
