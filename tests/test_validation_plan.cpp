// Validation of launch_canary_plan_kernels (rows P1-P10, deviation D10) and of the plan allocation
// sizes (V11, V12, W13, W14).
//
// Each row starts from a valid call (PlanCase), breaks exactly one thing, and checks the exact
// message and that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged"
// is not the same as "still zero", and the valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int64_t kMaxCount = 2147483647;

// A valid call: bs=2 live rows on req_to_token rows 1 and 2 with prefixes 3 and 2 and extends 2
// and 1 (T = 5 verify entries), a [4, 8] table, verify capacity 16, write capacity 4, and every
// optional input given (LUT with W = 0, token pool, scratch).
struct PlanCase : KeptTensors {
  using OpArgs = PlanArgs;

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
  }

  OpArgs Args() const {
    PlanArgs args = PlanCallOver(plan, req_pool_indices.view(), prefix_lens.view(),
                                 extend_seq_lens.view(), req_to_token.view());
    args.inputs.full_to_swa_index_mapping = lut.view();
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

  static void Run(const PlanArgs& args) { Plan(args); }

  PlanBuffers plan;
  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({3, 2});
  HostTensor<int64_t> extend_seq_lens = HostTensor<int64_t>::Of({2, 1});
  HostTensor<int32_t> req_to_token = MakeTable();
  HostTensor<int64_t> lut = MakeLut();
  HostTensor<int32_t> pool = MakePool();
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({8, 8});
  HostTensor<int64_t> scratch = Poisoned<int64_t>({3});
  // The same table sliced out of a wider one (D10 rows).
  WideTable wide_table;
};

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

// G9: every tensor on one device.
void AllOnDevice(Device device, PlanArgs& args) {
  VerifyPlanView& v = args.verify_plan_out;
  WritePlanView& w = args.write_plan_out;
  MoveToDevice(
      device,
      {&v.verify_slot_indices, &v.verify_expected_tokens, &v.verify_expected_positions,
       &v.verify_prev_slot_indices, &v.verify_num_valid, &v.enable, &w.write_offsets,
       &w.write_seed_slot_indices, &w.write_num_valid_reqs, &args.inputs.req_pool_indices,
       &args.inputs.prefix_lens, &args.inputs.extend_seq_lens, &args.inputs.req_to_token,
       &args.inputs.full_to_swa_index_mapping, &args.inputs.req_to_verify_expected_tokens,
       &args.inputs.req_to_verify_expected_tokens_valid_lens, &args.verify_offsets_scratch});
}

using Row = RejectRow<PlanCase>;

const Row kRows[] = {
    {"OverlapTwoOutputsShareMemory",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_seed_slot_indices = c.plan.offsets.view({4});
     },
     "kv-canary: out_write_offsets overlaps out_write_seed_slot_indices in memory; an output needs "
     "memory of its own"},
    {"PresenceReqToTokenMissing",
     [](PlanCase&, PlanArgs& a) { a.inputs.req_to_token = TensorView(); },
     "kv-canary: req_to_token is required, got None"},
    {"PresenceVerifySlotIndicesMissing",
     [](PlanCase&, PlanArgs& a) { a.verify_plan_out.verify_slot_indices = TensorView(); },
     "kv-canary: out_verify_slot_indices is required, got None"},
    {"P1SwaWindowWithoutLut",
     [](PlanCase&, PlanArgs& a) {
       a.inputs.swa_window_size = 2;
       a.inputs.full_to_swa_index_mapping = TensorView();
     },
     "kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
     "swa_window_size > 0"},
    {"P3VerifyCapacityMismatch", [](PlanCase&, PlanArgs& a) { a.verify_capacity = 15; },
     "kv-canary: launch_canary_plan_kernels verify_capacity=15 does not match "
     "verify_plan_out.verify_slot_indices.shape[0]=16"},
    // V12 also guards the plan op (verify_num_valid is int32). Validation reads no element, so the
    // view may claim more elements than its memory holds.
    {"V12PlanVerifyCapacityAboveInt32",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_slot_indices = c.plan.slots.view({kMaxCount + 1});
       a.verify_capacity = kMaxCount + 1;
     },
     "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648"},
    {"P4PoolWithoutValidLens",
     [](PlanCase&, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens = TensorView();
     },
     "kv-canary: launch_plan_entries_kernel requires req_to_verify_expected_tokens_valid_lens "
     "when req_to_verify_expected_tokens is set"},
    // P5 = O1: contiguity, first, middle and last of the list.
    {"P5O1ReqPoolIndicesNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_pool_indices = EveryOther(c.Keep(HostTensor<int64_t>::Of({1, 0, 2, 0})));
     },
     "kv-canary: req_pool_indices must be contiguous"},
    {"P5O1LutNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.full_to_swa_index_mapping = EveryOther(c.Keep(HostTensor<int64_t>({2 * kLutLen})));
     },
     "kv-canary: lut_tensor must be contiguous"},
    {"P5O1WriteNumValidReqsNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_num_valid_reqs = EveryOther(c.KeepOutput(Poisoned<int32_t>({4})));
     },
     "kv-canary: out_write_num_valid_reqs must be contiguous"},
    // P5 = O2: dtypes.
    {"P5O2ReqPoolIndicesWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_pool_indices = c.Keep(HostTensor<int32_t>::Of({1, 2})).view();
     },
     "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32"},
    {"P5O2ReqToTokenWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_token = c.Keep(HostTensor<int64_t>({4, 8})).view();
     },
     "kv-canary: req_to_token must have dtype torch.int32, got torch.int64"},
    {"P5O2LutWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.Keep(HostTensor<int32_t>({kLutLen})).view();
     },
     "kv-canary: lut_tensor must have dtype torch.int64, got torch.int32"},
    {"P5O2WriteNumValidReqsWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_num_valid_reqs = c.KeepOutput(Poisoned<int64_t>({1})).view();
     },
     "kv-canary: out_write_num_valid_reqs must have dtype torch.int32, got torch.int64"},
    // P5 = O12, O13: batch lengths and the table's rank.
    {"P5O12ReqPoolIndicesNot1D",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_pool_indices = c.req_pool_indices.view({2, 1});
     },
     "kv-canary: req_pool_indices must be 1-D, got shape (2, 1)"},
    {"P5O12PrefixLensLength",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.prefix_lens = c.Keep(HostTensor<int64_t>::Of({3, 2, 0})).view();
     },
     "kv-canary: prefix_lens length must be 2, got 3"},
    {"P5O12ExtendSeqLensLength",
     [](PlanCase& c, PlanArgs& a) { a.inputs.extend_seq_lens = c.extend_seq_lens.view({1}); },
     "kv-canary: extend_seq_lens length must be 2, got 1"},
    {"P5O13ReqToTokenNot2D",
     [](PlanCase& c, PlanArgs& a) { a.inputs.req_to_token = c.req_to_token.view({32}); },
     "kv-canary: req_to_token must be 2-D, got shape (32,)"},
    // P5 = O15: plan arrays and the LUT's rank.
    {"P5O15WriteOffsetsNot1D",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_offsets = c.plan.offsets.view({kWriteCapacity + 1, 1});
     },
     "kv-canary: out_write_offsets must be 1-D, got shape (5, 1)"},
    {"P5O15VerifyNumValidLength",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_num_valid = c.KeepOutput(Poisoned<int32_t>({2})).view();
     },
     "kv-canary: out_verify_num_valid length must be 1, got 2"},
    {"P5O15WriteNumValidReqsLength",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_num_valid_reqs = c.KeepOutput(Poisoned<int32_t>({2})).view();
     },
     "kv-canary: out_write_num_valid_reqs length must be 1, got 2"},
    {"P5O15LutNot1D",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
     },
     "kv-canary: lut_tensor must be 1-D, got shape (8, 8)"},
    // P5 = O16-O18.
    {"P5O16WriteOffsetsLengthMismatch",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_offsets = c.KeepOutput(Poisoned<int64_t>({kWriteCapacity})).view();
     },
     "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4"},
    {"P5O17BatchExceedsWriteCapacity",
     [](PlanCase& c, PlanArgs& a) {
       // A write plan of capacity 1.
       a.write_plan_out = WritePlanView{c.KeepOutput(Poisoned<int64_t>({2})).view(),
                                        c.KeepOutput(Poisoned<int64_t>({1})).view(),
                                        c.KeepOutput(Poisoned<int32_t>({1})).view()};
     },
     "kv-canary: bs=2 exceeds write_req_capacity=1"},
    {"P5O18ReqToTokenStride0Mismatch",
     [](PlanCase&, PlanArgs& a) { a.inputs.req_to_token_stride0 = 16; },
     "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8"},
    {"P6EmptyLut",
     [](PlanCase& c, PlanArgs& a) { a.inputs.full_to_swa_index_mapping = c.lut.view({0}); },
     "kv-canary: lut_tensor length must be >= 1, got 0"},
    // P7: the four verify arrays, checked one after the other.
    {"P7SlotIndicesNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_slot_indices =
           EveryOther(c.KeepOutput(Poisoned<int64_t>({2 * kVerifyCapacity})));
     },
     "kv-canary: out_verify_slot_indices must be contiguous"},
    {"P7SlotIndicesWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_slot_indices =
           c.KeepOutput(Poisoned<int32_t>({kVerifyCapacity})).view();
     },
     "kv-canary: out_verify_slot_indices must have dtype torch.int64, got torch.int32"},
    {"P7ExpectedPositionsNot1D",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_expected_positions = c.plan.positions.view({kVerifyCapacity, 1});
     },
     "kv-canary: out_verify_expected_positions must be 1-D, got shape (16, 1)"},
    {"P7PrevSlotIndicesNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_prev_slot_indices =
           EveryOther(c.KeepOutput(Poisoned<int64_t>({2 * kVerifyCapacity})));
     },
     "kv-canary: out_verify_prev_slot_indices must be contiguous"},
    {"P7PrevSlotIndicesLength",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_prev_slot_indices = c.plan.prevs.view({kVerifyCapacity - 1});
     },
     "kv-canary: out_verify_prev_slot_indices length must be 16, got 15"},
    // P8: the expected-token pool and its valid lengths.
    {"P8PoolNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens =
           c.Keep(HostTensor<int32_t>({4, 16})).view({4, 8}, {16, 1});
     },
     "kv-canary: req_to_verify_expected_tokens must be contiguous"},
    {"P8PoolWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens = c.Keep(HostTensor<int64_t>({4, 8})).view();
     },
     "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got torch.int64"},
    {"P8PoolNot2D",
     [](PlanCase& c, PlanArgs& a) { a.inputs.req_to_verify_expected_tokens = c.pool.view({32}); },
     "kv-canary: req_to_verify_expected_tokens must be 2-D, got shape (32,)"},
    {"P8ValidLensNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens =
           EveryOther(c.Keep(HostTensor<int64_t>::Of({8, 0, 8, 0})));
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens must be contiguous"},
    {"P8ValidLensWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens =
           c.Keep(HostTensor<int32_t>::Of({8, 8})).view();
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens must have dtype torch.int64, got "
     "torch.int32"},
    {"P8ValidLensLength",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_verify_expected_tokens_valid_lens =
           c.Keep(HostTensor<int64_t>::Of({8, 8, 8})).view();
     },
     "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 3"},
    // P9: the optional workspace.
    {"P9ScratchNotContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_offsets_scratch = EveryOther(c.KeepOutput(Poisoned<int64_t>({6})));
     },
     "kv-canary: verify_offsets_scratch must be contiguous"},
    {"P9ScratchWrongDtype",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_offsets_scratch = c.KeepOutput(Poisoned<int32_t>({3})).view();
     },
     "kv-canary: verify_offsets_scratch must have dtype torch.int64, got torch.int32"},
    {"P9ScratchNot1D",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_offsets_scratch = c.scratch.view({3, 1});
     },
     "kv-canary: verify_offsets_scratch must be 1-D, got shape (3, 1)"},
    {"P9ScratchTooShort",
     [](PlanCase& c, PlanArgs& a) { a.verify_offsets_scratch = c.scratch.view({2}); },
     "kv-canary: verify_offsets_scratch length must be >= 3, got 2"},
    // P10: one device, the reference being verify_plan_out.verify_slot_indices.
    {"P10ExpectedTokensOnOtherDevice",
     [](PlanCase&, PlanArgs& a) {
       a.verify_plan_out.verify_expected_tokens = OnCuda(a.verify_plan_out.verify_expected_tokens);
     },
     "kv-canary: out_verify_expected_tokens must be on out_verify_slot_indices's device cpu, got "
     "cuda:0"},
    {"P10ReqToTokenOnOtherDevice",
     [](PlanCase&, PlanArgs& a) { a.inputs.req_to_token = OnCuda(a.inputs.req_to_token); },
     "kv-canary: req_to_token must be on out_verify_slot_indices's device cpu, got cuda:0"},
    {"P10ScratchOnOtherDevice",
     [](PlanCase&, PlanArgs& a) { a.verify_offsets_scratch = OnCuda(a.verify_offsets_scratch); },
     "kv-canary: verify_offsets_scratch must be on out_verify_slot_indices's device cpu, got "
     "cuda:0"},
    {"P10ReferenceOnOtherDevice",
     [](PlanCase&, PlanArgs& a) {
       a.verify_plan_out.verify_slot_indices = OnCuda(a.verify_plan_out.verify_slot_indices);
     },
     "kv-canary: out_verify_expected_tokens must be on out_verify_slot_indices's device cuda:0, "
     "got cpu"},
    // G8: outputs must be writable.
    {"G8SlotIndicesReadOnly",
     [](PlanCase& c, PlanArgs& a) {
       a.verify_plan_out.verify_slot_indices = c.plan.slots.read_only_view();
     },
     "kv-canary: out_verify_slot_indices must be writable"},
    {"G8WriteNumValidReqsReadOnly",
     [](PlanCase& c, PlanArgs& a) {
       a.write_plan_out.write_num_valid_reqs = c.plan.num_valid_reqs.read_only_view();
     },
     "kv-canary: out_write_num_valid_reqs must be writable"},
    {"G8ScratchReadOnly",
     [](PlanCase& c, PlanArgs& a) { a.verify_offsets_scratch = c.scratch.read_only_view(); },
     "kv-canary: verify_offsets_scratch must be writable"},
    // G9: every tensor on one device that no backend of this build supports (DLPack's Metal in
    // every build; cuda:0 without the CUDA backend, whose host memory is never touched).
    {"G9AllOnUnsupportedDevice",
     [](PlanCase&, PlanArgs& a) { AllOnDevice(UnsupportedDevice(), a); },
     "kv-canary: out_verify_slot_indices is on unsupported device dlpack_device_8:0"},
#if !defined(KVC_HAVE_CUDA)
    {"G9AllOnCudaWithoutBackend", [](PlanCase&, PlanArgs& a) { AllOnDevice(Device::CUDA(0), a); },
     "kv-canary: out_verify_slot_indices is on unsupported device cuda:0"},
#endif
    // D10: req_to_token is read through its row stride, which must be sane.
    {"D10SlicedReqToTokenWithStaleStride0",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_token = c.wide_table.Sliced();
       a.inputs.req_to_token_stride0 = 8;
     },
     "kv-canary: req_to_token_stride0=8 does not match req_to_token.stride(0)=16"},
    {"D10SlicedReqToTokenRequiredContiguous",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_token = c.wide_table.Sliced();
       a.inputs.require_contiguous_req_to_token = true;
     },
     "kv-canary: req_to_token must be contiguous"},
    {"D10TransposedReqToToken",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
     },
     "kv-canary: req_to_token must have stride 1 in its last dimension and a row stride >= its "
     "width, got shape (4, 8) strides (1, 4)"},
    {"D10ExpandedReqToToken",
     [](PlanCase& c, PlanArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({4, 8}, {0, 1});
     },
     "kv-canary: req_to_token must have stride 1 in its last dimension and a row stride >= its "
     "width, got shape (4, 8) strides (0, 1)"},
};

KVC_REJECTION_TABLE(PlanRejects, PlanCase, kRows);

TEST(PlanValidation, ValidBaselineSucceedsAndWrites) {
  PlanCase c;
  const ByteSnapshot before = c.Snapshot();
  Plan(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselinePlan(c);
}

// P2 is SGLang's CUDA-only bs <= 4096 limit; kvcanary drops it (D6): only bs <= write_req_capacity.
TEST(PlanValidation, P2BatchAbove4096IsAccepted) {
  constexpr int64_t kBs = 4097;
  PlanCase c;
  PlanBuffers big(kVerifyCapacity, kBs);
  const HostTensor<int64_t> zeros({kBs});
  PlanArgs args =
      PlanCallOver(big, zeros.view(), zeros.view(), zeros.view(), c.req_to_token.view());
  args.inputs.full_to_swa_index_mapping = c.lut.view();
  Plan(args);
  EXPECT_EQ(big.num_valid_reqs[0], kBs);
  EXPECT_EQ(big.num_valid[0], 0);
}

// D10: the C++ API reads req_to_token through its row stride (WideTable).
TEST(PlanValidation, D10SlicedReqToTokenReadsTheRightRows) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = c.wide_table.Sliced();
  Plan(args);
  ExpectBaselinePlan(c);
}

TEST(PlanValidation, D10SlicedReqToTokenWithMatchingStride0Passes) {
  PlanCase c;
  PlanArgs args = c.Args();
  args.inputs.req_to_token = c.wide_table.Sliced();
  args.inputs.req_to_token_stride0 = 16;
  Plan(args);
  ExpectBaselinePlan(c);
}

// Allocation sizes: VerifyPlan 4*C*8 + 2*4 bytes, WritePlan (2R+1)*8 + 4 bytes.
TEST(PlanValidation, AllocationBytesOfValidCapacities) {
  EXPECT_EQ(VerifyPlanAllocationBytes(16), 4 * 16 * 8 + 2 * 4);
  EXPECT_EQ(VerifyPlanAllocationBytes(kMaxCount), 4 * kMaxCount * 8 + 2 * 4);
  EXPECT_EQ(WritePlanAllocationBytes(4), (2 * 4 + 1) * 8 + 4);
  EXPECT_EQ(WritePlanAllocationBytes(kMaxCount), (2 * kMaxCount + 1) * 8 + 4);
}

// Rejected allocation sizes: {name, the size function, the capacity, the exact message}.
struct AllocationRow {
  std::string name;
  int64_t (*bytes)(int64_t capacity);
  int64_t capacity;
  std::string message;
};

void PrintTo(const AllocationRow& row, std::ostream* os) { *os << row.name; }

const AllocationRow kAllocationRows[] = {
    {"V11VerifyCapacityZero", VerifyPlanAllocationBytes, 0,
     "kv-canary: VerifyPlan verify_capacity must be positive, got 0"},
    {"V11VerifyCapacityNegative", VerifyPlanAllocationBytes, -3,
     "kv-canary: VerifyPlan verify_capacity must be positive, got -3"},
    {"V12VerifyCapacityAboveInt32", VerifyPlanAllocationBytes, kMaxCount + 1,
     "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648"},
    {"W13WriteCapacityZero", WritePlanAllocationBytes, 0,
     "kv-canary: WritePlan write_req_capacity must be positive, got 0"},
    {"W13WriteCapacityNegative", WritePlanAllocationBytes, -1,
     "kv-canary: WritePlan write_req_capacity must be positive, got -1"},
    {"W14WriteCapacityAboveInt32", WritePlanAllocationBytes, kMaxCount + 1,
     "kv-canary: WritePlan write_req_capacity must be <= 2147483647, got 2147483648"},
};

class PlanAllocationRejects : public ::testing::TestWithParam<AllocationRow> {};

TEST_P(PlanAllocationRejects, Raises) {
  EXPECT_KVC_ERROR(GetParam().bytes(GetParam().capacity), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(Rows, PlanAllocationRejects, ::testing::ValuesIn(kAllocationRows),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvcanary::testing
