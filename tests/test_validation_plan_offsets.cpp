// Validation of launch_plan_offsets_kernel, the first plan stage: presence, contiguity, dtypes, the
// batch bound, the scalar arguments, lengths and ranks, req_to_token's row stride, one device,
// writability and backend support.
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

constexpr int64_t kScratchLen = 4097;  // SGLang's fixed offsets block

// A valid call: bs=2 live rows on req_to_token rows 1 and 2 with prefixes 3 and 2 and extends 2
// and 1, a [4, 8] table, a 64-entry LUT, verify capacity 16, write capacity 4.
struct OffsetsCase : KeptTensors {
  using OpArgs = PlanOffsetsArgs;
  OpArgs Args() const {
    PlanOffsetsArgs args;
    args.inputs = BatchInputs(req_pool_indices.view(), prefix_lens.view(), extend_seq_lens.view(),
                              req_to_token.view());
    args.inputs.full_to_swa_index_mapping = lut.view();
    args.out_verify_offsets_scratch = scratch.view();
    args.out_write_offsets = write_offsets.view();
    args.out_write_seed_slot_indices = seeds.view();
    args.out_verify_num_valid = verify_num_valid.view();
    args.out_verify_enable = verify_enable.view();
    args.out_write_num_valid_reqs = write_num_valid_reqs.view();
    args.verify_capacity = kVerifyCapacity;
    return args;
  }
  ByteSnapshot Snapshot() {
    return ByteSnapshot(scratch, write_offsets, seeds, verify_num_valid, verify_enable,
                        write_num_valid_reqs);
  }
  static void Run(const PlanOffsetsArgs& args) { PlanOffsets(args); }

  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({3, 2});
  HostTensor<int64_t> extend_seq_lens = HostTensor<int64_t>::Of({2, 1});
  HostTensor<int32_t> req_to_token = MakeTable();
  HostTensor<int64_t> lut = MakeLut();
  HostTensor<int64_t> scratch = Poisoned<int64_t>({kScratchLen});
  HostTensor<int64_t> write_offsets = Poisoned<int64_t>({kWriteCapacity + 1});
  HostTensor<int64_t> seeds = Poisoned<int64_t>({kWriteCapacity});
  HostTensor<int32_t> verify_num_valid = Poisoned<int32_t>({1});
  HostTensor<int32_t> verify_enable = Poisoned<int32_t>({1});
  HostTensor<int32_t> write_num_valid_reqs = Poisoned<int32_t>({1});
};

// A batch of `bs` padding rows (no work) with a write plan that fits it; `c` keeps the tensors
// and checks the (poisoned) write plan too.
void UsePaddingBatch(int64_t bs, OffsetsCase& c, PlanOffsetsArgs& args) {
  const TensorView zeros = c.Keep(HostTensor<int64_t>({bs})).view();
  args.inputs.req_pool_indices = zeros;
  args.inputs.prefix_lens = zeros;
  args.inputs.extend_seq_lens = zeros;
  args.out_write_offsets = c.KeepOutput(Poisoned<int64_t>({bs + 1})).view();
  args.out_write_seed_slot_indices = c.KeepOutput(Poisoned<int64_t>({bs})).view();
}

// req_to_token as a [4, 8] slice (row stride 16) of a wider table that `c` keeps alive.
TensorView KeptSlicedTable(KeptTensors& c) {
  return c.Keep(WideTable().buffer).view({4, 8}, {16, 1});
}

// Every tensor on one device.
void AllOnDevice(Device device, PlanOffsetsArgs& args) {
  MoveToDevice(
      device,
      {&args.inputs.req_pool_indices, &args.inputs.prefix_lens, &args.inputs.extend_seq_lens,
       &args.inputs.req_to_token, &args.inputs.full_to_swa_index_mapping,
       &args.out_verify_offsets_scratch, &args.out_write_offsets, &args.out_write_seed_slot_indices,
       &args.out_verify_num_valid, &args.out_verify_enable, &args.out_write_num_valid_reqs});
}

using Row = RejectRow<OffsetsCase>;

const Row kRows[] = {
    {"OffsetsPresenceScratchMissing",
     [](OffsetsCase&, PlanOffsetsArgs& a) { a.out_verify_offsets_scratch = TensorView(); },
     "kv-canary: out_verify_offsets_scratch is required, got None"},
    // O1: contiguity, in SGLang's order.
    {"O1ReqPoolIndicesNotContiguous",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_pool_indices = EveryOther(c.Keep(HostTensor<int64_t>::Of({1, 0, 2, 0})));
     },
     "kv-canary: req_pool_indices must be contiguous"},
    {"O1ReqToTokenTransposedD10",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
     },
     D10Message("(1, 4)")},
    {"O1ReqToTokenRequiredContiguous",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_to_token = KeptSlicedTable(c);
       a.inputs.require_contiguous_req_to_token = true;
     },
     "kv-canary: req_to_token must be contiguous"},
    {"O1LutNotContiguous",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.full_to_swa_index_mapping = EveryOther(c.Keep(HostTensor<int64_t>({2 * kLutLen})));
     },
     "kv-canary: lut_tensor must be contiguous"},
    {"O1ScratchNotContiguous",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_offsets_scratch =
           EveryOther(c.KeepOutput(Poisoned<int64_t>({2 * kScratchLen})));
     },
     "kv-canary: out_verify_offsets_scratch must be contiguous"},
    {"O1WriteNumValidReqsNotContiguous",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_num_valid_reqs = EveryOther(c.KeepOutput(Poisoned<int32_t>({4})));
     },
     "kv-canary: out_write_num_valid_reqs must be contiguous"},
    // O2: dtypes.
    {"O2ReqPoolIndicesWrongDtype",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_pool_indices = c.Keep(HostTensor<int32_t>::Of({1, 2})).view();
     },
     "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32"},
    {"O2ReqToTokenWrongDtype",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_to_token = c.Keep(HostTensor<int64_t>({4, 8})).view();
     },
     "kv-canary: req_to_token must have dtype torch.int32, got torch.int64"},
    {"O2ScratchWrongDtype",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_offsets_scratch = c.KeepOutput(Poisoned<int32_t>({kScratchLen})).view();
     },
     "kv-canary: out_verify_offsets_scratch must have dtype torch.int64, got torch.int32"},
    {"O2WriteNumValidReqsWrongDtype",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_num_valid_reqs = c.KeepOutput(Poisoned<int64_t>({1})).view();
     },
     "kv-canary: out_write_num_valid_reqs must have dtype torch.int32, got torch.int64"},
    // O3: bs is len(req_pool_indices), so "bs < 0" cannot arise; 4097 is the smallest bad batch.
    {"O3BatchAbove4096", [](OffsetsCase& c, PlanOffsetsArgs& a) { UsePaddingBatch(4097, c, a); },
     "kv-canary: offsets kernel bs must be in [0, 4096], got 4097"},
    {"O4EmptyWriteOffsets",
     [](OffsetsCase& c, PlanOffsetsArgs& a) { a.out_write_offsets = c.write_offsets.view({0}); },
     "kv-canary: write_offsets_len must be positive, got 0"},
    // O5 (write_req_capacity < 0) cannot arise: the C++ API derives write_req_capacity from
    // len(out_write_seed_slot_indices), which is never negative.
    {"O6VerifyCapacityAboveTheInt32Counts",
     [](OffsetsCase&, PlanOffsetsArgs& a) { a.verify_capacity = int64_t{1} << 31; },
     "kv-canary: verify_capacity must be <= 2147483647, got 2147483648"},
    {"O6NegativeVerifyCapacity", [](OffsetsCase&, PlanOffsetsArgs& a) { a.verify_capacity = -1; },
     "kv-canary: verify_capacity must be non-negative, got -1"},
    {"O7ZeroReqToTokenStride0",
     [](OffsetsCase&, PlanOffsetsArgs& a) { a.inputs.req_to_token_stride0 = 0; },
     "kv-canary: req_to_token_stride0 must be positive, got 0"},
    {"O7NegativeReqToTokenStride0",
     [](OffsetsCase&, PlanOffsetsArgs& a) { a.inputs.req_to_token_stride0 = -8; },
     "kv-canary: req_to_token_stride0 must be positive, got -8"},
    // Derived from the view, too: a one-row table expanded to row stride 0 is contiguous (torch's
    // rule ignores size-1 dimensions) but has no positive pitch.
    {"O7ExpandedOneRowReqToToken",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_to_token = c.req_to_token.view({1, 8}, {0, 1});
     },
     "kv-canary: req_to_token_stride0 must be positive, got 0"},
    {"O8NegativeLutLen", [](OffsetsCase&, PlanOffsetsArgs& a) { a.lut_len = -1; },
     "kv-canary: lut_len must be non-negative, got -1"},
    // O9 (has_swa_lut not a bool) cannot arise: the C++ API derives has_swa_lut from whether
    // full_to_swa_index_mapping is given.
    {"O10ZeroLutLenWithLut", [](OffsetsCase&, PlanOffsetsArgs& a) { a.lut_len = 0; },
     "kv-canary: lut_len must be positive when has_swa_lut is True"},
    {"O10EmptyLut",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.lut.view({0});
     },
     "kv-canary: lut_len must be positive when has_swa_lut is True"},
    {"O11LutLenWithoutLut",
     [](OffsetsCase&, PlanOffsetsArgs& a) {
       a.inputs.full_to_swa_index_mapping = TensorView();
       a.lut_len = 4;
     },
     "kv-canary: lut_len must be 0 when has_swa_lut is False"},
    // O12, O13: batch lengths, table rank.
    {"O12ReqPoolIndicesNot1D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.req_pool_indices = c.req_pool_indices.view({2, 1});
     },
     "kv-canary: req_pool_indices must be 1-D, got shape (2, 1)"},
    {"O12PrefixLensLength",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.prefix_lens = c.Keep(HostTensor<int64_t>::Of({3, 2, 0})).view();
     },
     "kv-canary: prefix_lens length must be 2, got 3"},
    {"O12ExtendSeqLensLength",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.extend_seq_lens = c.extend_seq_lens.view({1});
     },
     "kv-canary: extend_seq_lens length must be 2, got 1"},
    {"O13ReqToTokenNot2D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) { a.inputs.req_to_token = c.req_to_token.view({32}); },
     "kv-canary: req_to_token must be 2-D, got shape (32,)"},
    // O14: the LUT covers lut_len; the scratch holds SGLang's 4097-entry block.
    {"O14LutShorterThanLutLen", [](OffsetsCase&, PlanOffsetsArgs& a) { a.lut_len = kLutLen + 1; },
     "kv-canary: lut_tensor length must be >= 65, got 64"},
    {"O14LutNot1D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
     },
     "kv-canary: lut_tensor must be 1-D, got shape (8, 8)"},
    {"O14ScratchNot1D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_offsets_scratch = c.scratch.view({kScratchLen, 1});
     },
     "kv-canary: out_verify_offsets_scratch must be 1-D, got shape (4097, 1)"},
    {"O14ScratchTooShort",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_offsets_scratch = c.scratch.view({kScratchLen - 1});
     },
     "kv-canary: out_verify_offsets_scratch length must be >= 4097, got 4096"},
    // O15: plan arrays (their lengths define write_offsets_len and write_req_capacity).
    {"O15WriteOffsetsNot1D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_offsets = c.write_offsets.view({kWriteCapacity + 1, 1});
     },
     "kv-canary: out_write_offsets must be 1-D, got shape (5, 1)"},
    {"O15SeedsNot1D",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_seed_slot_indices = c.seeds.view({kWriteCapacity, 1});
     },
     "kv-canary: out_write_seed_slot_indices must be 1-D, got shape (4, 1)"},
    {"O15VerifyNumValidLength",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_num_valid = c.KeepOutput(Poisoned<int32_t>({2})).view();
     },
     "kv-canary: out_verify_num_valid length must be 1, got 2"},
    {"O15WriteNumValidReqsLength",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_num_valid_reqs = c.KeepOutput(Poisoned<int32_t>({2})).view();
     },
     "kv-canary: out_write_num_valid_reqs length must be 1, got 2"},
    {"O16WriteOffsetsLengthMismatch",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_offsets = c.write_offsets.view({kWriteCapacity});
     },
     "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4"},
    {"O17BatchExceedsWriteCapacity",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_offsets = c.write_offsets.view({2});
       a.out_write_seed_slot_indices = c.seeds.view({1});
     },
     "kv-canary: bs=2 exceeds write_req_capacity=1"},
    {"O18ReqToTokenStride0Mismatch",
     [](OffsetsCase&, PlanOffsetsArgs& a) { a.inputs.req_to_token_stride0 = 16; },
     "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8"},
    // O19: one device, the reference being out_verify_offsets_scratch.
    {"O19ReqPoolIndicesOnOtherDevice",
     [](OffsetsCase&, PlanOffsetsArgs& a) {
       a.inputs.req_pool_indices = OnCuda(a.inputs.req_pool_indices);
     },
     "kv-canary: req_pool_indices must be on out_verify_offsets_scratch's device cpu, got cuda:0"},
    {"O19WriteNumValidReqsOnOtherDevice",
     [](OffsetsCase&, PlanOffsetsArgs& a) {
       a.out_write_num_valid_reqs = OnCuda(a.out_write_num_valid_reqs);
     },
     "kv-canary: out_write_num_valid_reqs must be on out_verify_offsets_scratch's device cpu, got "
     "cuda:0"},
    {"G8OffsetsScratchReadOnly",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_verify_offsets_scratch = c.scratch.read_only_view();
     },
     "kv-canary: out_verify_offsets_scratch must be writable"},
    {"G8OffsetsWriteNumValidReqsReadOnly",
     [](OffsetsCase& c, PlanOffsetsArgs& a) {
       a.out_write_num_valid_reqs = c.write_num_valid_reqs.read_only_view();
     },
     "kv-canary: out_write_num_valid_reqs must be writable"},
    // G9: every tensor on one device that no backend of this build supports.
    {"G9OffsetsAllOnUnsupportedDevice",
     [](OffsetsCase&, PlanOffsetsArgs& a) { AllOnDevice(UnsupportedDevice(), a); },
     "kv-canary: out_verify_offsets_scratch is on unsupported device dlpack_device_8:0"},
#if !defined(KVC_HAVE_CUDA)
    {"G9OffsetsAllOnCudaWithoutBackend",
     [](OffsetsCase&, PlanOffsetsArgs& a) { AllOnDevice(Device::CUDA(0), a); },
     "kv-canary: out_verify_offsets_scratch is on unsupported device cuda:0"},
#endif
};

KVC_REJECTION_TABLE(PlanOffsetsRejects, OffsetsCase, kRows);

// The baseline's outputs: scratch [0, bs], the counts, write_offsets[0..bs] and seeds [0, bs);
// write_offsets[bs+1..] and the other seeds are left as they were.
void ExpectBaselineOffsets(const OffsetsCase& c) {
  EXPECT_EQ(c.scratch[0], 0);
  EXPECT_EQ(c.scratch[1], 3);
  EXPECT_EQ(c.scratch[2], 5);
  EXPECT_EQ(c.scratch[3], kPoison);
  EXPECT_EQ(c.verify_num_valid[0], 5);
  EXPECT_EQ(c.verify_enable[0], 1);
  EXPECT_EQ(Values(c.write_offsets), (std::vector<int64_t>{0, 2, 3, kPoison, kPoison}));
  EXPECT_EQ(Values(c.seeds), (std::vector<int64_t>{Translated(TableSlot(1, 2)),
                                                   Translated(TableSlot(2, 1)), kPoison, kPoison}));
  EXPECT_EQ(c.write_num_valid_reqs[0], 2);
}

TEST(PlanValidation, OffsetsValidBaselineSucceedsAndWrites) {
  OffsetsCase c;
  const ByteSnapshot before = c.Snapshot();
  PlanOffsets(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselineOffsets(c);
}

TEST(PlanValidation, O3BatchOf4096IsAccepted) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  UsePaddingBatch(4096, c, args);
  PlanOffsets(args);
  EXPECT_EQ(c.write_num_valid_reqs[0], 4096);
  EXPECT_EQ(c.verify_num_valid[0], 0);
  EXPECT_EQ(c.scratch[4096], 0);
}

TEST(PlanValidation, D10OffsetsSlicedReqToTokenWithMatchingStride0Passes) {
  OffsetsCase c;
  const WideTable table;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.req_to_token_stride0 = 16;
  PlanOffsets(args);
  ExpectBaselineOffsets(c);
}

}  // namespace
}  // namespace kvcanary::testing
