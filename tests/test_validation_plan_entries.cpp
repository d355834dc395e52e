// Validation of launch_plan_entries_kernel, the second plan stage: presence, then each tensor's
// contiguity, dtype, rank and length, req_to_token's row stride, one device, writability and
// backend support; and the CPU offsets/entries contract check.
//
// Each row starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and the valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call matching the offsets stage's baseline: scratch {0, 3, 5} (T = 5), enable 1, the
// token pool with valid lengths 8, four verify arrays of capacity 16.
struct EntriesCase : KeptTensors {
  using OpArgs = PlanEntriesArgs;
  OpArgs Args() const {
    PlanEntriesArgs args;
    args.inputs =
        BatchInputs(req_pool_indices.view(), prefix_lens.view(), TensorView(), req_to_token.view());
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
  static void Run(const PlanEntriesArgs& args) { PlanEntries(args); }

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

// req_to_token as a [4, 8] slice (row stride 16) of a wider table that `c` keeps alive.
TensorView KeptSlicedTable(KeptTensors& c) {
  return c.Keep(WideTable().buffer).view({4, 8}, {16, 1});
}

// Every tensor on one device.
void AllOnDevice(Device device, PlanEntriesArgs& args) {
  MoveToDevice(
      device, {&args.inputs.req_pool_indices, &args.inputs.prefix_lens, &args.inputs.req_to_token,
               &args.inputs.full_to_swa_index_mapping, &args.verify_offsets_scratch,
               &args.verify_enable, &args.inputs.req_to_verify_expected_tokens,
               &args.inputs.req_to_verify_expected_tokens_valid_lens, &args.out_verify_slot_indices,
               &args.out_verify_expected_tokens, &args.out_verify_expected_positions,
               &args.out_verify_prev_slot_indices});
}

using Row = RejectRow<EntriesCase>;

const Row kRows[] = {
    {"EntriesPresenceVerifyEnableMissing",
     [](EntriesCase&, PlanEntriesArgs& a) { a.verify_enable = TensorView(); },
     "kv-canary: verify_enable is required, got None"},
    {"E1PoolWithoutValidLens",
     [](EntriesCase&, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
     },
     "kv-canary: launch_plan_entries_kernel requires req_to_verify_expected_tokens_valid_lens "
     "when req_to_verify_expected_tokens is set"},
    // The unnumbered checks, in order: each tensor's contiguity, dtype, rank and length.
    {"EReqPoolIndicesNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_pool_indices = EveryOther(c.Keep(HostTensor<int64_t>::Of({1, 0, 2, 0})));
     },
     "kv-canary: req_pool_indices must be contiguous"},
    {"EReqPoolIndicesWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_pool_indices = c.Keep(HostTensor<int32_t>::Of({1, 2})).view();
     },
     "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32"},
    {"EReqPoolIndicesNot1D",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_pool_indices = c.req_pool_indices.view({1, 2});
     },
     "kv-canary: req_pool_indices must be 1-D, got shape (1, 2)"},
    {"EPrefixLensNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.prefix_lens = EveryOther(c.Keep(HostTensor<int64_t>::Of({3, 0, 2, 0})));
     },
     "kv-canary: prefix_lens must be contiguous"},
    {"EPrefixLensLength",
     [](EntriesCase& c, PlanEntriesArgs& a) { a.inputs.prefix_lens = c.prefix_lens.view({1}); },
     "kv-canary: prefix_lens length must be 2, got 1"},
    {"EScratchNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_offsets_scratch = EveryOther(c.Keep(HostTensor<int64_t>::Of({0, 0, 3, 0, 5, 0})));
     },
     "kv-canary: verify_offsets_scratch must be contiguous"},
    {"EScratchWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_offsets_scratch = c.Keep(HostTensor<int32_t>::Of({0, 3, 5})).view();
     },
     "kv-canary: verify_offsets_scratch must have dtype torch.int64, got torch.int32"},
    {"EScratchNot1D",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_offsets_scratch = c.scratch.view({3, 1});
     },
     "kv-canary: verify_offsets_scratch must be 1-D, got shape (3, 1)"},
    {"E2ScratchTooShort",
     [](EntriesCase& c, PlanEntriesArgs& a) { a.verify_offsets_scratch = c.scratch.view({2}); },
     "kv-canary: verify_offsets_scratch length must be >= bs_padded + 1"},
    // A one-element tensor is always contiguous (torch's rule), so this is a strided pair.
    {"EVerifyEnableNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_enable = EveryOther(c.Keep(HostTensor<int32_t>::Of({1, 0, 1, 0})));
     },
     "kv-canary: verify_enable must be contiguous"},
    {"EVerifyEnableWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_enable = c.Keep(HostTensor<int64_t>::Of({1})).view();
     },
     "kv-canary: verify_enable must have dtype torch.int32, got torch.int64"},
    {"EVerifyEnableLength",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.verify_enable = c.Keep(HostTensor<int32_t>::Of({1, 1})).view();
     },
     "kv-canary: verify_enable length must be 1, got 2"},
    {"ESlotIndicesNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_slot_indices =
           EveryOther(c.KeepOutput(Poisoned<int64_t>({2 * kVerifyCapacity})));
     },
     "kv-canary: out_verify_slot_indices must be contiguous"},
    {"EExpectedTokensWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_expected_tokens = c.KeepOutput(Poisoned<int32_t>({kVerifyCapacity})).view();
     },
     "kv-canary: out_verify_expected_tokens must have dtype torch.int64, got torch.int32"},
    {"EExpectedPositionsNot1D",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_expected_positions = c.positions.view({kVerifyCapacity, 1});
     },
     "kv-canary: out_verify_expected_positions must be 1-D, got shape (16, 1)"},
    {"EPrevSlotIndicesNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_prev_slot_indices =
           EveryOther(c.KeepOutput(Poisoned<int64_t>({2 * kVerifyCapacity})));
     },
     "kv-canary: out_verify_prev_slot_indices must be contiguous"},
    // The common length is len(out_verify_slot_indices).
    {"EPrevSlotIndicesLength",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_prev_slot_indices = c.prevs.view({kVerifyCapacity - 1});
     },
     "kv-canary: out_verify_prev_slot_indices length must be 16, got 15"},
    {"EReqToTokenTransposedD10",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
     },
     D10Message("(1, 4)")},
    {"EReqToTokenExpandedD10",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({4, 8}, {0, 1});
     },
     D10Message("(0, 1)")},
    {"EReqToTokenRequiredContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_token = KeptSlicedTable(c);
       a.inputs.require_contiguous_req_to_token = true;
     },
     "kv-canary: req_to_token must be contiguous"},
    {"EReqToTokenWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_token = c.Keep(HostTensor<int64_t>({4, 8})).view();
     },
     "kv-canary: req_to_token must have dtype torch.int32, got torch.int64"},
    {"EReqToTokenNot2D",
     [](EntriesCase& c, PlanEntriesArgs& a) { a.inputs.req_to_token = c.req_to_token.view({32}); },
     "kv-canary: req_to_token must be 2-D, got shape (32,)"},
    {"ELutNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.full_to_swa_index_mapping = EveryOther(c.Keep(HostTensor<int64_t>({2 * kLutLen})));
     },
     "kv-canary: lut_tensor must be contiguous"},
    {"ELutWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.Keep(HostTensor<int32_t>({kLutLen})).view();
     },
     "kv-canary: lut_tensor must have dtype torch.int64, got torch.int32"},
    {"ELutNot1D",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
     },
     "kv-canary: lut_tensor must be 1-D, got shape (8, 8)"},
    {"EEmptyLut",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.lut.view({0});
     },
     "kv-canary: lut_tensor length must be >= 1, got 0"},
    {"EPoolNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens =
           c.Keep(HostTensor<int32_t>({4, 16})).view({4, 8}, {16, 1});
     },
     "kv-canary: req_to_verify_expected_tokens must be contiguous"},
    {"EPoolWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens = c.Keep(HostTensor<int64_t>({4, 8})).view();
     },
     "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got torch.int64"},
    {"EPoolNot2D",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens = c.pool.view({32});
     },
     "kv-canary: req_to_verify_expected_tokens must be 2-D, got shape (32,)"},
    {"EValidLensNotContiguous",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens =
           EveryOther(c.Keep(HostTensor<int64_t>::Of({8, 0, 8, 0})));
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens must be contiguous"},
    {"EValidLensWrongDtype",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens =
           c.Keep(HostTensor<int32_t>::Of({8, 8})).view();
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens must have dtype torch.int64, got "
     "torch.int32"},
    {"EValidLensLength",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens = c.valid_lens.view({1});
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 1"},
    // One device, the reference being verify_offsets_scratch.
    {"EReqPoolIndicesOnOtherDevice",
     [](EntriesCase&, PlanEntriesArgs& a) {
       a.inputs.req_pool_indices = OnCuda(a.inputs.req_pool_indices);
     },
     "kv-canary: req_pool_indices must be on verify_offsets_scratch's device cpu, got cuda:0"},
    {"EPrevSlotIndicesOnOtherDevice",
     [](EntriesCase&, PlanEntriesArgs& a) {
       a.out_verify_prev_slot_indices = OnCuda(a.out_verify_prev_slot_indices);
     },
     "kv-canary: out_verify_prev_slot_indices must be on verify_offsets_scratch's device cpu, got "
     "cuda:0"},
    {"G8EntriesSlotIndicesReadOnly",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_slot_indices = c.slots.read_only_view();
     },
     "kv-canary: out_verify_slot_indices must be writable"},
    {"G8EntriesPrevSlotIndicesReadOnly",
     [](EntriesCase& c, PlanEntriesArgs& a) {
       a.out_verify_prev_slot_indices = c.prevs.read_only_view();
     },
     "kv-canary: out_verify_prev_slot_indices must be writable"},
    // G9: every tensor on one device that no backend of this build supports.
    {"G9EntriesAllOnUnsupportedDevice",
     [](EntriesCase&, PlanEntriesArgs& a) { AllOnDevice(UnsupportedDevice(), a); },
     "kv-canary: verify_offsets_scratch is on unsupported device dlpack_device_8:0"},
#if !defined(KVC_HAVE_CUDA)
    {"G9EntriesAllOnCudaWithoutBackend",
     [](EntriesCase&, PlanEntriesArgs& a) { AllOnDevice(Device::CUDA(0), a); },
     "kv-canary: verify_offsets_scratch is on unsupported device cuda:0"},
#endif
    // The data-dependent contract check: the CPU backend raises before writing (CUDA traps).
    {"EContractTotalAboveCapacity",
     [](EntriesCase& c, PlanEntriesArgs&) { c.scratch[2] = kVerifyCapacity + 1; },
     "kv-canary: plan_entries: total_verify=17 exceeds verify_capacity=16 with verify_enable=1 "
     "(offsets/entries contract broken)"},
};

KVC_REJECTION_TABLE(PlanEntriesRejects, EntriesCase, kRows);

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

TEST(PlanValidation, D10EntriesSlicedReqToTokenReadsTheRightRows) {
  EntriesCase c;
  const WideTable table;
  PlanEntriesArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  PlanEntries(args);
  ExpectBaselineEntries(c);
}

// Accepted calls that must write nothing: verification disabled (even past capacity), or no
// verify entries at all.
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
