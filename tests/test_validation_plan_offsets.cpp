// Validation of launch_plan_offsets_kernel, the first plan stage (spec/kernels.md §7.3, §11 rows
// O1-O19, deviation D10).
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

constexpr int64_t kScratchLen = 4097;  // SGLang's fixed offsets block (O14)

// A valid call: bs=2 live rows on req_to_token rows 1 and 2 with prefixes 3 and 2 and extends 2
// and 1, a [4, 8] table, a 64-entry LUT, verify capacity 16, write capacity 4.
struct OffsetsCase {
  PlanOffsetsArgs Args() const {
    PlanOffsetsArgs args;
    args.inputs.req_pool_indices = req_pool_indices.view();
    args.inputs.prefix_lens = prefix_lens.view();
    args.inputs.extend_seq_lens = extend_seq_lens.view();
    args.inputs.req_to_token = req_to_token.view();
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

// PlanOffsets(args) must throw exactly `message` and write none of the outputs of `c` nor the
// replacement outputs in `extra`.
template <typename... Extra>
void ExpectOffsetsRaises(OffsetsCase& c, const PlanOffsetsArgs& args, const std::string& message,
                         Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  ExpectRaisesUnchanged([&] { PlanOffsets(args); }, before, message);
}

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

// A batch of `bs` padding rows (no work) with a write plan that fits it.
struct PaddingBatch {
  explicit PaddingBatch(int64_t bs) : zeros({bs}), offsets({bs + 1}), seeds({bs}) {}
  void ApplyTo(PlanOffsetsArgs& args) const {
    args.inputs.req_pool_indices = zeros.view();
    args.inputs.prefix_lens = zeros.view();
    args.inputs.extend_seq_lens = zeros.view();
    args.out_write_offsets = offsets.view();
    args.out_write_seed_slot_indices = seeds.view();
  }
  HostTensor<int64_t> zeros;
  HostTensor<int64_t> offsets;
  HostTensor<int64_t> seeds;
};

TEST(PlanValidation, OffsetsValidBaselineSucceedsAndWrites) {
  OffsetsCase c;
  const ByteSnapshot before = c.Snapshot();
  PlanOffsets(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselineOffsets(c);
}

TEST(PlanValidation, OffsetsPresenceScratchMissingRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = TensorView();
  ExpectOffsetsRaises(c, args, "kv-canary: out_verify_offsets_scratch is required, got None");
}

// O1: contiguity, in SGLang's order.
TEST(PlanValidation, O1ReqPoolIndicesNotContiguousRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1, 0, 2, 0});
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_pool_indices = EveryOther(wide);
  ExpectOffsetsRaises(c, args, "kv-canary: req_pool_indices must be contiguous");
}

TEST(PlanValidation, O1ReqToTokenTransposedRaisesD10) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
  ExpectOffsetsRaises(c, args, D10Message("(1, 4)"));
}

TEST(PlanValidation, O1ReqToTokenRequiredContiguousRaises) {
  OffsetsCase c;
  const WideTable table;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = table.Sliced();
  args.inputs.require_contiguous_req_to_token = true;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token must be contiguous");
}

TEST(PlanValidation, O1LutNotContiguousRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> wide({2 * kLutLen});
  PlanOffsetsArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = EveryOther(wide);
  ExpectOffsetsRaises(c, args, "kv-canary: lut_tensor must be contiguous");
}

TEST(PlanValidation, O1ScratchNotContiguousRaises) {
  OffsetsCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kScratchLen});
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = EveryOther(wide);
  ExpectOffsetsRaises(c, args, "kv-canary: out_verify_offsets_scratch must be contiguous", wide);
}

TEST(PlanValidation, O1WriteNumValidReqsNotContiguousRaises) {
  OffsetsCase c;
  HostTensor<int32_t> wide = Poisoned<int32_t>({4});
  PlanOffsetsArgs args = c.Args();
  args.out_write_num_valid_reqs = EveryOther(wide);
  ExpectOffsetsRaises(c, args, "kv-canary: out_write_num_valid_reqs must be contiguous", wide);
}

// O2: dtypes.
TEST(PlanValidation, O2ReqPoolIndicesWrongDtypeRaises) {
  OffsetsCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({1, 2});
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_pool_indices = narrow.view();
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, O2ReqToTokenWrongDtypeRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = wide.view();
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_to_token must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, O2ScratchWrongDtypeRaises) {
  OffsetsCase c;
  HostTensor<int32_t> narrow = Poisoned<int32_t>({kScratchLen});
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = narrow.view();
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_verify_offsets_scratch must have dtype torch.int64, got "
                      "torch.int32",
                      narrow);
}

TEST(PlanValidation, O2WriteNumValidReqsWrongDtypeRaises) {
  OffsetsCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({1});
  PlanOffsetsArgs args = c.Args();
  args.out_write_num_valid_reqs = wide.view();
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_write_num_valid_reqs must have dtype torch.int32, got "
                      "torch.int64",
                      wide);
}

// O3: bs is len(req_pool_indices), so "bs < 0" cannot arise; bs = 4097 is the smallest bad batch.
TEST(PlanValidation, O3BatchAbove4096Raises) {
  OffsetsCase c;
  PaddingBatch batch(4097);
  Poison(batch.offsets);
  Poison(batch.seeds);
  PlanOffsetsArgs args = c.Args();
  batch.ApplyTo(args);
  ExpectOffsetsRaises(c, args, "kv-canary: offsets kernel bs must be in [0, 4096], got 4097",
                      batch.offsets, batch.seeds);
}

TEST(PlanValidation, O3BatchOf4096IsAccepted) {
  OffsetsCase c;
  const PaddingBatch batch(4096);
  PlanOffsetsArgs args = c.Args();
  batch.ApplyTo(args);
  PlanOffsets(args);
  EXPECT_EQ(c.write_num_valid_reqs[0], 4096);
  EXPECT_EQ(c.verify_num_valid[0], 0);
  EXPECT_EQ(c.scratch[4096], 0);
}

TEST(PlanValidation, O4EmptyWriteOffsetsRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_offsets = c.write_offsets.view({0});
  ExpectOffsetsRaises(c, args, "kv-canary: write_offsets_len must be positive, got 0");
}

// O5 (write_req_capacity < 0) cannot arise: the C++ API derives write_req_capacity from
// len(out_write_seed_slot_indices), which is never negative.

TEST(PlanValidation, O6NegativeVerifyCapacityRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.verify_capacity = -1;
  ExpectOffsetsRaises(c, args, "kv-canary: verify_capacity must be non-negative, got -1");
}

TEST(PlanValidation, O7ZeroReqToTokenStride0Raises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token_stride0 = 0;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token_stride0 must be positive, got 0");
}

TEST(PlanValidation, O7NegativeReqToTokenStride0Raises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token_stride0 = -8;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token_stride0 must be positive, got -8");
}

// Derived from the view, too: a one-row table expanded to row stride 0 is contiguous (torch's
// rule ignores size-1 dimensions) but has no positive pitch.
TEST(PlanValidation, O7ExpandedOneRowReqToTokenRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({1, 8}, {0, 1});
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token_stride0 must be positive, got 0");
}

TEST(PlanValidation, O8NegativeLutLenRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.lut_len = -1;
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be non-negative, got -1");
}

// O9 (has_swa_lut not a bool) cannot arise: the C++ API derives has_swa_lut from whether
// full_to_swa_index_mapping is given.

TEST(PlanValidation, O10ZeroLutLenWithLutRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.lut_len = 0;
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be positive when has_swa_lut is True");
}

TEST(PlanValidation, O10EmptyLutRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({0});
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be positive when has_swa_lut is True");
}

TEST(PlanValidation, O11LutLenWithoutLutRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = TensorView();
  args.lut_len = 4;
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be 0 when has_swa_lut is False");
}

// O12, O13: batch lengths, table rank.
TEST(PlanValidation, O12ReqPoolIndicesNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_pool_indices = c.req_pool_indices.view({2, 1});
  ExpectOffsetsRaises(c, args, "kv-canary: req_pool_indices must be 1-D, got shape (2, 1)");
}

TEST(PlanValidation, O12PrefixLensLengthRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> longer = HostTensor<int64_t>::Of({3, 2, 0});
  PlanOffsetsArgs args = c.Args();
  args.inputs.prefix_lens = longer.view();
  ExpectOffsetsRaises(c, args, "kv-canary: prefix_lens length must be 2, got 3");
}

TEST(PlanValidation, O12ExtendSeqLensLengthRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.extend_seq_lens = c.extend_seq_lens.view({1});
  ExpectOffsetsRaises(c, args, "kv-canary: extend_seq_lens length must be 2, got 1");
}

TEST(PlanValidation, O13ReqToTokenNot2DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token = c.req_to_token.view({32});
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token must be 2-D, got shape (32,)");
}

// O14: the LUT covers lut_len; the scratch holds SGLang's 4097-entry block.
TEST(PlanValidation, O14LutShorterThanLutLenRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.lut_len = kLutLen + 1;
  ExpectOffsetsRaises(c, args, "kv-canary: lut_tensor length must be >= 65, got 64");
}

TEST(PlanValidation, O14LutNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.full_to_swa_index_mapping = c.lut.view({8, 8});
  ExpectOffsetsRaises(c, args, "kv-canary: lut_tensor must be 1-D, got shape (8, 8)");
}

TEST(PlanValidation, O14ScratchNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = c.scratch.view({kScratchLen, 1});
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_verify_offsets_scratch must be 1-D, got shape (4097, 1)");
}

TEST(PlanValidation, O14ScratchTooShortRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = c.scratch.view({kScratchLen - 1});
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_verify_offsets_scratch length must be >= 4097, got 4096");
}

// O15: plan arrays (their lengths define write_offsets_len and write_req_capacity).
TEST(PlanValidation, O15WriteOffsetsNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_offsets = c.write_offsets.view({kWriteCapacity + 1, 1});
  ExpectOffsetsRaises(c, args, "kv-canary: out_write_offsets must be 1-D, got shape (5, 1)");
}

TEST(PlanValidation, O15SeedsNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_seed_slot_indices = c.seeds.view({kWriteCapacity, 1});
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_write_seed_slot_indices must be 1-D, got shape (4, 1)");
}

TEST(PlanValidation, O15VerifyNumValidLengthRaises) {
  OffsetsCase c;
  HostTensor<int32_t> two = Poisoned<int32_t>({2});
  PlanOffsetsArgs args = c.Args();
  args.out_verify_num_valid = two.view();
  ExpectOffsetsRaises(c, args, "kv-canary: out_verify_num_valid length must be 1, got 2", two);
}

TEST(PlanValidation, O15WriteNumValidReqsLengthRaises) {
  OffsetsCase c;
  HostTensor<int32_t> two = Poisoned<int32_t>({2});
  PlanOffsetsArgs args = c.Args();
  args.out_write_num_valid_reqs = two.view();
  ExpectOffsetsRaises(c, args, "kv-canary: out_write_num_valid_reqs length must be 1, got 2", two);
}

TEST(PlanValidation, O16WriteOffsetsLengthMismatchRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_offsets = c.write_offsets.view({kWriteCapacity});
  ExpectOffsetsRaises(
      c, args, "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4");
}

TEST(PlanValidation, O17BatchExceedsWriteCapacityRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_offsets = c.write_offsets.view({2});
  args.out_write_seed_slot_indices = c.seeds.view({1});
  ExpectOffsetsRaises(c, args, "kv-canary: bs=2 exceeds write_req_capacity=1");
}

TEST(PlanValidation, O18ReqToTokenStride0MismatchRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_to_token_stride0 = 16;
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8");
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

// O19: one device, the reference being out_verify_offsets_scratch.
TEST(PlanValidation, O19ReqPoolIndicesOnOtherDeviceRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.inputs.req_pool_indices = OnCuda(args.inputs.req_pool_indices);
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_pool_indices must be on out_verify_offsets_scratch's device "
                      "cpu, got cuda:0");
}

TEST(PlanValidation, O19WriteNumValidReqsOnOtherDeviceRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_num_valid_reqs = OnCuda(args.out_write_num_valid_reqs);
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_write_num_valid_reqs must be on out_verify_offsets_scratch's "
                      "device cpu, got cuda:0");
}

TEST(PlanValidation, G8OffsetsScratchReadOnlyRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_verify_offsets_scratch = c.scratch.read_only_view();
  ExpectOffsetsRaises(c, args, "kv-canary: out_verify_offsets_scratch must be writable");
}

TEST(PlanValidation, G8OffsetsWriteNumValidReqsReadOnlyRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.out_write_num_valid_reqs = c.write_num_valid_reqs.read_only_view();
  ExpectOffsetsRaises(c, args, "kv-canary: out_write_num_valid_reqs must be writable");
}

// G9: every tensor on one device that no backend of this build supports.
void AllOnDevice(Device device, PlanOffsetsArgs& args) {
  MoveToDevice(device, {&args.inputs.req_pool_indices, &args.inputs.prefix_lens, &args.inputs.extend_seq_lens,
                        &args.inputs.req_to_token, &args.inputs.full_to_swa_index_mapping,
                        &args.out_verify_offsets_scratch, &args.out_write_offsets,
                        &args.out_write_seed_slot_indices, &args.out_verify_num_valid,
                        &args.out_verify_enable, &args.out_write_num_valid_reqs});
}

TEST(PlanValidation, G9OffsetsAllOnUnsupportedDeviceRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  AllOnDevice(UnsupportedDevice(), args);
  ExpectOffsetsRaises(
      c, args, "kv-canary: out_verify_offsets_scratch is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST(PlanValidation, G9OffsetsAllOnCudaWithoutBackendRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectOffsetsRaises(c, args,
                      "kv-canary: out_verify_offsets_scratch is on unsupported device cuda:0");
}
#endif
}  // namespace
}  // namespace kvcanary::testing
