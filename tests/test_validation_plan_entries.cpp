// Validation of launch_plan_entries_kernel, the second plan stage (spec/kernels.md §7.4, §11 E
// rows, deviation D10) and the CPU offsets/entries contract check.
//
// Each test starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and each valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call matching OffsetsCase: scratch {0, 3, 5} (T = 5), enable 1, the token pool with
// valid lengths 8, four verify arrays of capacity 16.
struct EntriesCase {
  PlanEntriesArgs Args() const {
    PlanEntriesArgs args;
    args.inputs.req_pool_indices = req_pool_indices.view();
    args.inputs.prefix_lens = prefix_lens.view();
    args.inputs.req_to_token = req_to_token.view();
    args.inputs.full_to_swa_index_mapping = lut.view();
    args.verify_offsets_scratch = scratch.view();
    args.verify_enable = verify_enable.view();
    args.inputs.req_to_verify_expected_tokens = pool.view();
    args.inputs.req_to_verify_expected_tokens_valid_lens = valid_lens.view();
    args.out_verify_slot_indices = slots.view();
    args.out_verify_expected_tokens = tokens.view();
    args.out_verify_expected_positions = positions.view();
    args.out_verify_prev_slot_indices = prevs.view();
    return args;
  }

  ByteSnapshot Snapshot() { return ByteSnapshot(slots, tokens, positions, prevs); }

  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({3, 2});
  HostTensor<int32_t> req_to_token = MakeTable();
  HostTensor<int64_t> lut = MakeLut();
  HostTensor<int64_t> scratch = HostTensor<int64_t>::Of({0, 3, 5});
  HostTensor<int32_t> verify_enable = HostTensor<int32_t>::Of({1});
  HostTensor<int32_t> pool = MakePool();
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({8, 8});
  HostTensor<int64_t> slots = Poisoned<int64_t>({kVerifyCapacity});
  HostTensor<int64_t> tokens = Poisoned<int64_t>({kVerifyCapacity});
  HostTensor<int64_t> positions = Poisoned<int64_t>({kVerifyCapacity});
  HostTensor<int64_t> prevs = Poisoned<int64_t>({kVerifyCapacity});
};

template <typename... Extra>
void ExpectEntriesRaises(EntriesCase& c, const PlanEntriesArgs& args, const std::string& message,
                         Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  ExpectRaisesUnchanged([&] { PlanEntries(args); }, before, message);
}

// The baseline's entries [0, 5); entries [5, 16) are left as they were.
void ExpectBaselineEntries(const EntriesCase& c) {
  const std::vector<int64_t> rows = {1, 1, 1, 2, 2};
  const std::vector<int64_t> positions = {0, 1, 2, 0, 1};
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t rp = rows[i];
    const int64_t pos = positions[i];
    EXPECT_EQ(c.slots[i], Translated(TableSlot(rp, pos))) << "entry " << i;
    EXPECT_EQ(c.prevs[i], pos > 0 ? Translated(TableSlot(rp, pos - 1)) : -1) << "entry " << i;
    EXPECT_EQ(c.positions[i], pos) << "entry " << i;
    EXPECT_EQ(c.tokens[i], PoolToken(rp, pos)) << "entry " << i;
  }
  for (int64_t i = 5; i < kVerifyCapacity; ++i) EXPECT_EQ(c.slots[i], kPoison);
}

TEST(PlanValidation, EntriesValidBaselineSucceedsAndWrites) {
  EntriesCase c;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselineEntries(c);
}

TEST(PlanValidation, EntriesPresenceVerifyEnableMissingRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_enable = TensorView();
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable is required, got None");
}

TEST(PlanValidation, E1PoolWithoutValidLensRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
  ExpectEntriesRaises(c, args,
                      "kv-canary: launch_plan_entries_kernel requires "
                      "req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens "
                      "is set");
}

// The unnumbered E checks, in the spec's order.
TEST(PlanValidation, EReqPoolIndicesNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1, 0, 2, 0});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_pool_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: req_pool_indices must be contiguous");
}

TEST(PlanValidation, EReqPoolIndicesWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({1, 2});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_pool_indices = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, EReqPoolIndicesNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_pool_indices = c.req_pool_indices.view({1, 2});
  ExpectEntriesRaises(c, args, "kv-canary: req_pool_indices must be 1-D, got shape (1, 2)");
}

TEST(PlanValidation, EPrefixLensNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({3, 0, 2, 0});
  PlanEntriesArgs args = c.Args();
  args.inputs.prefix_lens = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: prefix_lens must be contiguous");
}

TEST(PlanValidation, EPrefixLensLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.prefix_lens = c.prefix_lens.view({1});
  ExpectEntriesRaises(c, args, "kv-canary: prefix_lens length must be 2, got 1");
}

TEST(PlanValidation, EScratchNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({0, 0, 3, 0, 5, 0});
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch must be contiguous");
}

TEST(PlanValidation, EScratchWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({0, 3, 5});
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: verify_offsets_scratch must have dtype torch.int64, got "
                      "torch.int32");
}

TEST(PlanValidation, EScratchNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({3, 1});
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch must be 1-D, got shape (3, 1)");
}

TEST(PlanValidation, E2ScratchTooShortRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({2});
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch length must be >= bs_padded + 1");
}

// A one-element tensor is always contiguous (torch's rule), so the G1 case is a strided pair.
TEST(PlanValidation, EVerifyEnableNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int32_t> wide = HostTensor<int32_t>::Of({1, 0, 1, 0});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable must be contiguous");
}

TEST(PlanValidation, EVerifyEnableWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: verify_enable must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, EVerifyEnableLengthRaises) {
  EntriesCase c;
  const HostTensor<int32_t> two = HostTensor<int32_t>::Of({1, 1});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = two.view();
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable length must be 1, got 2");
}

TEST(PlanValidation, ESlotIndicesNotContiguousRaises) {
  EntriesCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_slot_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_slot_indices must be contiguous", wide);
}

TEST(PlanValidation, EExpectedTokensWrongDtypeRaises) {
  EntriesCase c;
  HostTensor<int32_t> narrow = Poisoned<int32_t>({kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_expected_tokens = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_expected_tokens must have dtype torch.int64, got "
                      "torch.int32",
                      narrow);
}

TEST(PlanValidation, EExpectedPositionsNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_expected_positions = c.positions.view({kVerifyCapacity, 1});
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_expected_positions must be 1-D, got shape (16, 1)");
}

TEST(PlanValidation, EPrevSlotIndicesNotContiguousRaises) {
  EntriesCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices must be contiguous", wide);
}

// The common length is len(out_verify_slot_indices).
TEST(PlanValidation, EPrevSlotIndicesLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = c.prevs.view({kVerifyCapacity - 1});
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices length must be 16, got 15");
}

TEST(PlanValidation, EReqToTokenTransposedRaisesD10) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
  ExpectEntriesRaises(c, args, D10Message("(1, 4)"));
}

TEST(PlanValidation, EReqToTokenExpandedRaisesD10) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({4, 8}, {0, 1});
  ExpectEntriesRaises(c, args, D10Message("(0, 1)"));
}

TEST(PlanValidation, EReqToTokenRequiredContiguousRaises) {
  EntriesCase c;
  const WideTable table;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.require_contiguous_req_to_token = true;
  ExpectEntriesRaises(c, args, "kv-canary: req_to_token must be contiguous");
}

TEST(PlanValidation, EReqToTokenWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_token must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, EReqToTokenNot2DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({32});
  ExpectEntriesRaises(c, args, "kv-canary: req_to_token must be 2-D, got shape (32,)");
}

TEST(PlanValidation, D10EntriesSlicedReqToTokenReadsTheRightRows) {
  EntriesCase c;
  const WideTable table;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  PlanEntries(args);
  ExpectBaselineEntries(c);
}

TEST(PlanValidation, ELutNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({2 * kLutLen});
  PlanEntriesArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor must be contiguous");
}

TEST(PlanValidation, ELutWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow({kLutLen});
  PlanEntriesArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: lut_tensor must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, ELutNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor must be 1-D, got shape (8, 8)");
}

TEST(PlanValidation, EEmptyLutRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({0});
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor length must be >= 1, got 0");
}

TEST(PlanValidation, EPoolNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int32_t> wide({4, 16});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = wide.view({4, 8}, {16, 1});
  ExpectEntriesRaises(c, args, "kv-canary: req_to_verify_expected_tokens must be contiguous");
}

TEST(PlanValidation, EPoolWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got "
                      "torch.int64");
}

TEST(PlanValidation, EPoolNot2DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens = c.pool.view({32});
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens must be 2-D, got shape (32,)");
}

TEST(PlanValidation, EValidLensNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({8, 0, 8, 0});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = EveryOther(wide);
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens_valid_lens must be contiguous");
}

TEST(PlanValidation, EValidLensWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({8, 8});
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens_valid_lens must have dtype "
                      "torch.int64, got torch.int32");
}

TEST(PlanValidation, EValidLensLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_verify_expected_tokens_valid_lens = c.valid_lens.view({1});
  ExpectEntriesRaises(
      c, args, "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 1");
}

// One device, the reference being verify_offsets_scratch.
TEST(PlanValidation, EReqPoolIndicesOnOtherDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_pool_indices = OnCuda(args.inputs.req_pool_indices);
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_pool_indices must be on verify_offsets_scratch's device cpu, "
                      "got cuda:0");
}

TEST(PlanValidation, EPrevSlotIndicesOnOtherDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = OnCuda(args.out_verify_prev_slot_indices);
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_prev_slot_indices must be on verify_offsets_scratch's "
                      "device cpu, got cuda:0");
}

TEST(PlanValidation, G8EntriesSlotIndicesReadOnlyRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_slot_indices = c.slots.read_only_view();
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_slot_indices must be writable");
}

TEST(PlanValidation, G8EntriesPrevSlotIndicesReadOnlyRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = c.prevs.read_only_view();
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices must be writable");
}

void AllOnDevice(Device device, PlanEntriesArgs& args) {
  MoveToDevice(device,
               {&args.inputs.req_pool_indices, &args.inputs.prefix_lens, &args.inputs.req_to_token,
                &args.inputs.full_to_swa_index_mapping, &args.verify_offsets_scratch, &args.verify_enable,
                &args.inputs.req_to_verify_expected_tokens, &args.inputs.req_to_verify_expected_tokens_valid_lens,
                &args.out_verify_slot_indices, &args.out_verify_expected_tokens,
                &args.out_verify_expected_positions, &args.out_verify_prev_slot_indices});
}

TEST(PlanValidation, G9EntriesAllOnUnsupportedDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  AllOnDevice(UnsupportedDevice(), args);
  ExpectEntriesRaises(
      c, args, "kv-canary: verify_offsets_scratch is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST(PlanValidation, G9EntriesAllOnCudaWithoutBackendRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch is on unsupported device cuda:0");
}
#endif

// The data-dependent contract check: the CPU backend raises before writing (CUDA traps).
TEST(PlanValidation, EContractTotalAboveCapacityRaises) {
  EntriesCase c;
  c.scratch[2] = kVerifyCapacity + 1;
  ExpectEntriesRaises(c, c.Args(),
                      "kv-canary: plan_entries: total_verify=17 exceeds verify_capacity=16 with "
                      "verify_enable=1 (offsets/entries contract broken)");
}

TEST(PlanValidation, EContractTotalAboveCapacityDisabledWritesNothing) {
  EntriesCase c;
  c.scratch[2] = kVerifyCapacity + 1;
  c.verify_enable[0] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}

TEST(PlanValidation, EDisabledWritesNothing) {
  EntriesCase c;
  c.verify_enable[0] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}

TEST(PlanValidation, EZeroTotalWritesNothing) {
  EntriesCase c;
  c.scratch[1] = 0;
  c.scratch[2] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}
}  // namespace
}  // namespace kvcanary::testing
