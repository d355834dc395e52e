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

#include "block_table_rows.h"
#include "kvcanary/kvcanary.h"
#include "reject_rows.h"
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
    PlanInputs inputs = BatchInputs(req_pool_indices.view(), prefix_lens.view(),
                                    extend_seq_lens.view(), req_to_token.view());
    inputs.full_to_swa_index_mapping = lut.view();
    return OffsetsCallOver(*this, scratch.view(), inputs, kVerifyCapacity);
  }
  ByteSnapshot Snapshot() {
    return ByteSnapshot(scratch, offsets, seeds, num_valid, enable, num_valid_reqs);
  }
  static void Run(const PlanOffsetsArgs& args) { PlanOffsets(args); }

  HostTensor<int64_t> req_pool_indices = HostTensor<int64_t>::Of({1, 2});
  HostTensor<int64_t> prefix_lens = HostTensor<int64_t>::Of({3, 2});
  HostTensor<int64_t> extend_seq_lens = HostTensor<int64_t>::Of({2, 1});
  HostTensor<int32_t> req_to_token = MakeTable();
  HostTensor<int64_t> lut = MakeLut();
  HostTensor<int64_t> scratch = Poisoned<int64_t>({kScratchLen});
  HostTensor<int64_t> offsets = Poisoned<int64_t>({kWriteCapacity + 1});
  HostTensor<int64_t> seeds = Poisoned<int64_t>({kWriteCapacity});
  HostTensor<int32_t> num_valid = Poisoned<int32_t>({1});
  HostTensor<int32_t> enable = Poisoned<int32_t>({1});
  HostTensor<int32_t> num_valid_reqs = Poisoned<int32_t>({1});
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
using Args = PlanOffsetsArgs;

constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
const PlanInputRefs<Args> kIn;
const auto kScratch = KVC_ARG(out_verify_offsets_scratch, "Scratch");
const auto kWriteOffsets = KVC_ARG(out_write_offsets, "WriteOffsets");
const auto kSeeds = KVC_ARG(out_write_seed_slot_indices, "Seeds");
const auto kVerifyNumValid = KVC_ARG(out_verify_num_valid, "VerifyNumValid");
const auto kNumValidReqs = KVC_ARG(out_write_num_valid_reqs, "WriteNumValidReqs");

// Presence; O1 contiguity, in SGLang's order; O2 dtypes.
std::vector<Row> LayoutRows() {
  return {
      MissingRow<OffsetsCase>("OffsetsPresenceScratchMissing", kScratch),
      NotContiguousRow<OffsetsCase>("O1", kIn.req_pool_indices),
      ReplaceRow<OffsetsCase>("O1ReqToTokenTransposedD10", kIn.req_to_token,
                              Restrided<OffsetsCase>({4, 8}, {1, 4}), D10Message("(1, 4)")),
      RequiredContiguousTableRow<OffsetsCase>("O1ReqToTokenRequiredContiguous"),
      NotContiguousRow<OffsetsCase>("O1", kIn.lut),
      NotContiguousRow<OffsetsCase>("O1", kScratch),
      NotContiguousRow<OffsetsCase>("O1", kNumValidReqs),
      WrongDtypeRow<OffsetsCase>("O2", kIn.req_pool_indices, i64, i32),
      WrongDtypeRow<OffsetsCase>("O2", kIn.req_to_token, i32, i64),
      WrongDtypeRow<OffsetsCase>("O2", kScratch, i64, i32),
      WrongDtypeRow<OffsetsCase>("O2", kNumValidReqs, i32, i64),
  };
}

// O3-O11: the batch bound and the scalar arguments. O3: bs is len(req_pool_indices), so "bs < 0"
// cannot arise; 4097 is the smallest bad batch. O5 (write_req_capacity < 0) cannot arise: the
// C++ API derives it from len(out_write_seed_slot_indices). O7 is derived from the view too: a
// one-row table expanded to row stride 0 is contiguous (torch's rule ignores size-1 dimensions)
// but has no positive pitch. O9 (has_swa_lut not a bool) cannot arise: the C++ API derives
// has_swa_lut from whether full_to_swa_index_mapping is given.
std::vector<Row> ScalarRows() {
  return {
      {"O3BatchAbove4096", [](OffsetsCase& c, Args& a) { UsePaddingBatch(4097, c, a); },
       "kv-canary: offsets kernel bs must be in [0, 4096], got 4097"},
      ReplaceRow<OffsetsCase>("O4EmptyWriteOffsets", kWriteOffsets, Resized<OffsetsCase>(0),
                              "kv-canary: write_offsets_len must be positive, got 0"),
      SetRow<OffsetsCase>("O6VerifyCapacityAboveTheInt32Counts", &Args::verify_capacity,
                          int64_t{1} << 31,
                          "kv-canary: verify_capacity must be <= 2147483647, got 2147483648"),
      SetRow<OffsetsCase>("O6NegativeVerifyCapacity", &Args::verify_capacity, -1,
                          "kv-canary: verify_capacity must be non-negative, got -1"),
      SetInputRow<OffsetsCase>("O7ZeroReqToTokenStride0", &PlanInputs::req_to_token_stride0, 0,
                               "kv-canary: req_to_token_stride0 must be positive, got 0"),
      SetInputRow<OffsetsCase>("O7NegativeReqToTokenStride0", &PlanInputs::req_to_token_stride0, -8,
                               "kv-canary: req_to_token_stride0 must be positive, got -8"),
      ReplaceRow<OffsetsCase>("O7ExpandedOneRowReqToToken", kIn.req_to_token,
                              Restrided<OffsetsCase>({1, 8}, {0, 1}),
                              "kv-canary: req_to_token_stride0 must be positive, got 0"),
      SetRow<OffsetsCase>("O8NegativeLutLen", &Args::lut_len, -1,
                          "kv-canary: lut_len must be non-negative, got -1"),
      SetRow<OffsetsCase>("O10ZeroLutLenWithLut", &Args::lut_len, 0,
                          "kv-canary: lut_len must be positive when has_swa_lut is True"),
      ReplaceRow<OffsetsCase>("O10EmptyLut", kIn.lut, Resized<OffsetsCase>(0),
                              "kv-canary: lut_len must be positive when has_swa_lut is True"),
      {"O11LutLenWithoutLut",
       [](OffsetsCase&, Args& a) {
         a.inputs.full_to_swa_index_mapping = TensorView();
         a.lut_len = 4;
       },
       "kv-canary: lut_len must be 0 when has_swa_lut is False"},
  };
}

// O12-O18: lengths and ranks; the LUT covers lut_len; the scratch holds SGLang's 4097-entry block;
// the plan arrays' lengths define write_offsets_len and write_req_capacity.
std::vector<Row> LengthRows() {
  return {
      RankRow<OffsetsCase>("O12", kIn.req_pool_indices, 1, {2, 1}),
      LengthRow<OffsetsCase>("O12", kIn.prefix_lens, 2, 3),
      LengthRow<OffsetsCase>("O12", kIn.extend_seq_lens, 2, 1),
      RankRow<OffsetsCase>("O13", kIn.req_to_token, 2, {32}),
      SetRow<OffsetsCase>("O14LutShorterThanLutLen", &Args::lut_len, kLutLen + 1,
                          "kv-canary: lut_tensor length must be >= 65, got 64"),
      RankRow<OffsetsCase>("O14", kIn.lut, 1, {8, 8}),
      RankRow<OffsetsCase>("O14", kScratch, 1, {kScratchLen, 1}),
      ReplaceRow<OffsetsCase>("O14ScratchTooShort", kScratch, Resized<OffsetsCase>(kScratchLen - 1),
                              "kv-canary: out_verify_offsets_scratch length must be >= 4097, got "
                              "4096"),
      RankRow<OffsetsCase>("O15", kWriteOffsets, 1, {kWriteCapacity + 1, 1}),
      RankRow<OffsetsCase>("O15", kSeeds, 1, {kWriteCapacity, 1}),
      LengthRow<OffsetsCase>("O15", kVerifyNumValid, 1, 2),
      LengthRow<OffsetsCase>("O15", kNumValidReqs, 1, 2),
      ReplaceRow<OffsetsCase>(
          "O16WriteOffsetsLengthMismatch", kWriteOffsets, Resized<OffsetsCase>(kWriteCapacity),
          "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4"),
      {"O17BatchExceedsWriteCapacity",
       [](OffsetsCase& c, Args& a) {
         a.out_write_offsets = c.offsets.view({2});
         a.out_write_seed_slot_indices = c.seeds.view({1});
       },
       "kv-canary: bs=2 exceeds write_req_capacity=1"},
      SetInputRow<OffsetsCase>(
          "O18ReqToTokenStride0Mismatch", &PlanInputs::req_to_token_stride0, 16,
          "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8"),
  };
}

// O19: one device, the reference being out_verify_offsets_scratch; G8 writability. (G9: the
// UnsupportedDeviceRows.)
std::vector<Row> PlacementRows() {
  return {
      OtherDeviceRow<OffsetsCase>("O19", kIn.req_pool_indices, "out_verify_offsets_scratch"),
      OtherDeviceRow<OffsetsCase>("O19", kNumValidReqs, "out_verify_offsets_scratch"),
      ReadOnlyRow<OffsetsCase>("G8Offsets", kScratch),
      ReadOnlyRow<OffsetsCase>("G8Offsets", kNumValidReqs),
  };
}

const std::vector<Row> kRows = Concat(
    LayoutRows(), ScalarRows(), LengthRows(), PlacementRows(), BlockTableRows<OffsetsCase>("O"),
    UnsupportedDeviceRows<OffsetsCase>("Offsets", "out_verify_offsets_scratch", AllOnDevice));

KVC_REJECTION_TABLE(PlanOffsetsRejects, OffsetsCase, kRows);

// The baseline's outputs: scratch [0, bs], the counts, write_offsets[0..bs] and seeds [0, bs);
// write_offsets[bs+1..] and the other seeds are left as they were.
void ExpectBaselineOffsets(const OffsetsCase& c) {
  EXPECT_EQ(c.scratch[0], 0);
  EXPECT_EQ(c.scratch[1], 3);
  EXPECT_EQ(c.scratch[2], 5);
  EXPECT_EQ(c.scratch[3], kPoison);
  EXPECT_EQ(c.num_valid[0], 5);
  EXPECT_EQ(c.enable[0], 1);
  EXPECT_EQ(Values(c.offsets), (std::vector<int64_t>{0, 2, 3, kPoison, kPoison}));
  EXPECT_EQ(Values(c.seeds), (std::vector<int64_t>{Translated(TableSlot(1, 2)),
                                                   Translated(TableSlot(2, 1)), kPoison, kPoison}));
  EXPECT_EQ(c.num_valid_reqs[0], 2);
}

TEST(PlanValidation, OffsetsValidBaselineSucceedsAndWrites) {
  OffsetsCase c;
  EXPECT_TRUE(AcceptedCallWrites(c));
  ExpectBaselineOffsets(c);
}

TEST(PlanValidation, O3BatchOf4096IsAccepted) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  UsePaddingBatch(4096, c, args);
  PlanOffsets(args);
  EXPECT_EQ(c.num_valid_reqs[0], 4096);
  EXPECT_EQ(c.num_valid[0], 0);
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
