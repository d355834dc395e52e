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

#include "block_table_rows.h"
#include "kvcanary/kvcanary.h"
#include "reject_rows.h"
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
using Args = PlanArgs;

constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
const PlanInputRefs<Args> kIn;
const auto kScratch = KVC_ARG(verify_offsets_scratch, "Scratch");

// The plan views' arrays, as the messages name them.
ArgRef<Args> VerifyOut(TensorView VerifyPlanView::*member, const std::string& name,
                       const std::string& title) {
  return PartArg(&Args::verify_plan_out, member, "out_" + name, title);
}
ArgRef<Args> WriteOut(TensorView WritePlanView::*member, const std::string& name,
                      const std::string& title) {
  return PartArg(&Args::write_plan_out, member, "out_" + name, title);
}
const auto kSlots =
    VerifyOut(&VerifyPlanView::verify_slot_indices, "verify_slot_indices", "SlotIndices");
const auto kTokens =
    VerifyOut(&VerifyPlanView::verify_expected_tokens, "verify_expected_tokens", "ExpectedTokens");
const auto kPositions = VerifyOut(&VerifyPlanView::verify_expected_positions,
                                  "verify_expected_positions", "ExpectedPositions");
const auto kPrevs = VerifyOut(&VerifyPlanView::verify_prev_slot_indices, "verify_prev_slot_indices",
                              "PrevSlotIndices");
const auto kNumValid =
    VerifyOut(&VerifyPlanView::verify_num_valid, "verify_num_valid", "VerifyNumValid");
const auto kWriteOffsets = WriteOut(&WritePlanView::write_offsets, "write_offsets", "WriteOffsets");
const auto kNumValidReqs =
    WriteOut(&WritePlanView::write_num_valid_reqs, "write_num_valid_reqs", "WriteNumValidReqs");

// Overlap, presence, P1-P4 (V12 also guards the plan op: verify_num_valid is int32; validation
// reads no element, so the view may claim more elements than its memory holds).
std::vector<Row> CallRows() {
  return {
      {"OverlapTwoOutputsShareMemory",
       [](PlanCase& c, Args& a) {
         a.write_plan_out.write_seed_slot_indices = c.plan.offsets.view({4});
       },
       "kv-canary: out_write_offsets overlaps out_write_seed_slot_indices in memory; an output "
       "needs memory of its own"},
      MissingRow<PlanCase>("PresenceVerifySlotIndicesMissing", kSlots),
      {"P1SwaWindowWithoutLut",
       [](PlanCase&, Args& a) {
         a.inputs.swa_window_size = 2;
         a.inputs.full_to_swa_index_mapping = TensorView();
       },
       "kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
       "swa_window_size > 0"},
      SetRow<PlanCase>("P3VerifyCapacityMismatch", &Args::verify_capacity, 15,
                       "kv-canary: launch_canary_plan_kernels verify_capacity=15 does not match "
                       "verify_plan_out.verify_slot_indices.shape[0]=16"),
      {"V12PlanVerifyCapacityAboveInt32",
       [](PlanCase& c, Args& a) {
         a.verify_plan_out.verify_slot_indices = c.plan.slots.view({kMaxCount + 1});
         a.verify_capacity = kMaxCount + 1;
       },
       "kv-canary: VerifyPlan verify_capacity must be <= 2147483647, got 2147483648"},
      PoolWithoutValidLensRow<PlanCase>("P4PoolWithoutValidLens"),
  };
}

// P5 = O1 (contiguity: first, middle and last of the list), O2 (dtypes), O12, O13 (batch lengths,
// the table's rank), O15 (plan arrays, the LUT's rank), O16-O18; P6 the empty LUT.
std::vector<Row> OffsetsStageRows() {
  return {
      NotContiguousRow<PlanCase>("P5O1", kIn.req_pool_indices),
      NotContiguousRow<PlanCase>("P5O1", kIn.lut),
      NotContiguousRow<PlanCase>("P5O1", kNumValidReqs),
      WrongDtypeRow<PlanCase>("P5O2", kIn.req_pool_indices, i64, i32),
      WrongDtypeRow<PlanCase>("P5O2", kIn.req_to_token, i32, i64),
      WrongDtypeRow<PlanCase>("P5O2", kIn.lut, i64, i32),
      WrongDtypeRow<PlanCase>("P5O2", kNumValidReqs, i32, i64),
      RankRow<PlanCase>("P5O12", kIn.req_pool_indices, 1, {2, 1}),
      LengthRow<PlanCase>("P5O12", kIn.prefix_lens, 2, 3),
      LengthRow<PlanCase>("P5O12", kIn.extend_seq_lens, 2, 1),
      RankRow<PlanCase>("P5O13", kIn.req_to_token, 2, {32}),
      RankRow<PlanCase>("P5O15", kWriteOffsets, 1, {kWriteCapacity + 1, 1}),
      LengthRow<PlanCase>("P5O15", kNumValid, 1, 2),
      LengthRow<PlanCase>("P5O15", kNumValidReqs, 1, 2),
      RankRow<PlanCase>("P5O15", kIn.lut, 1, {8, 8}),
      ReplaceRow<PlanCase>(
          "P5O16WriteOffsetsLengthMismatch", kWriteOffsets, Resized<PlanCase>(kWriteCapacity),
          "kv-canary: write_offsets_len must equal write_req_capacity + 1, got 4 and 4"),
      {"P5O17BatchExceedsWriteCapacity",
       [](PlanCase& c, Args& a) {
         // A write plan of capacity 1.
         a.write_plan_out = WritePlanView{c.KeepOutput(Poisoned<int64_t>({2})).view(),
                                          c.KeepOutput(Poisoned<int64_t>({1})).view(),
                                          c.KeepOutput(Poisoned<int32_t>({1})).view()};
       },
       "kv-canary: bs=2 exceeds write_req_capacity=1"},
      SetInputRow<PlanCase>(
          "P5O18ReqToTokenStride0Mismatch", &PlanInputs::req_to_token_stride0, 16,
          "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8"),
      ReplaceRow<PlanCase>("P6EmptyLut", kIn.lut, Resized<PlanCase>(0),
                           "kv-canary: lut_tensor length must be >= 1, got 0"),
  };
}

// P7: the four verify arrays, checked one after the other; P9: the optional workspace. (P8, the
// expected-token pool and its valid lengths: PoolRows.)
std::vector<Row> EntriesStageRows() {
  return {
      NotContiguousRow<PlanCase>("P7", kSlots),
      WrongDtypeRow<PlanCase>("P7", kSlots, i64, i32),
      RankRow<PlanCase>("P7", kPositions, 1, {kVerifyCapacity, 1}),
      NotContiguousRow<PlanCase>("P7", kPrevs),
      LengthRow<PlanCase>("P7", kPrevs, kVerifyCapacity, kVerifyCapacity - 1),
      NotContiguousRow<PlanCase>("P9", kScratch),
      WrongDtypeRow<PlanCase>("P9", kScratch, i64, i32),
      RankRow<PlanCase>("P9", kScratch, 1, {3, 1}),
      ReplaceRow<PlanCase>("P9ScratchTooShort", kScratch, Resized<PlanCase>(2),
                           "kv-canary: verify_offsets_scratch length must be >= 3, got 2"),
  };
}

// P10: one device, the reference being verify_plan_out.verify_slot_indices; G8: outputs must be
// writable. (G9: the UnsupportedDeviceRows.)
std::vector<Row> PlacementRows() {
  const std::string reference = "out_verify_slot_indices";
  return {
      OtherDeviceRow<PlanCase>("P10", kTokens, reference),
      OtherDeviceRow<PlanCase>("P10", kIn.req_to_token, reference),
      OtherDeviceRow<PlanCase>("P10", kScratch, reference),
      ReplaceRow<PlanCase>(
          "P10ReferenceOnOtherDevice", kSlots,
          [](PlanCase&, const TensorView& good) { return OnCuda(good); },
          "kv-canary: out_verify_expected_tokens must be on out_verify_slot_indices's device "
          "cuda:0, got cpu"),
      ReadOnlyRow<PlanCase>("G8", kSlots),
      ReadOnlyRow<PlanCase>("G8", kNumValidReqs),
      ReadOnlyRow<PlanCase>("G8", kScratch),
  };
}

// D10: req_to_token is read through its row stride, which must be sane.
std::vector<Row> TableStrideRows() {
  return {
      {"D10SlicedReqToTokenWithStaleStride0",
       [](PlanCase& c, Args& a) {
         a.inputs.req_to_token = c.wide_table.Sliced();
         a.inputs.req_to_token_stride0 = 8;
       },
       "kv-canary: req_to_token_stride0=8 does not match req_to_token.stride(0)=16"},
      RequiredContiguousTableRow<PlanCase>("D10SlicedReqToTokenRequiredContiguous"),
      ReplaceRow<PlanCase>("D10TransposedReqToToken", kIn.req_to_token,
                           Restrided<PlanCase>({4, 8}, {1, 4}), D10Message("(1, 4)")),
      ReplaceRow<PlanCase>("D10ExpandedReqToToken", kIn.req_to_token,
                           Restrided<PlanCase>({4, 8}, {0, 1}), D10Message("(0, 1)")),
  };
}

const std::vector<Row> kRows = Concat(
    CallRows(), OffsetsStageRows(), EntriesStageRows(), PoolRows<PlanCase>("P8", 3),
    PlacementRows(), UnsupportedDeviceRows<PlanCase>("", "out_verify_slot_indices", AllOnDevice),
    TableStrideRows(), BlockTableRows<PlanCase>("P"));

KVC_REJECTION_TABLE(PlanRejects, PlanCase, kRows);

TEST(PlanValidation, ValidBaselineSucceedsAndWrites) {
  PlanCase c;
  EXPECT_TRUE(AcceptedCallWrites(c));
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

// A plan allocation's capacity: zero and `negative` (rows `range_tag`), above the int32 device
// counts (row `bound_tag`). `what` is how the messages name the capacity.
std::vector<AllocationRow> CapacityRows(const std::string& range_tag, const std::string& bound_tag,
                                        const std::string& title, int64_t (*bytes)(int64_t),
                                        const std::string& what, int64_t negative) {
  const std::string prefix = "kv-canary: " + what + " must be ";
  return {{range_tag + title + "CapacityZero", bytes, 0, prefix + "positive, got 0"},
          {range_tag + title + "CapacityNegative", bytes, negative,
           prefix + "positive, got " + std::to_string(negative)},
          {bound_tag + title + "CapacityAboveInt32", bytes, kMaxCount + 1,
           prefix + "<= 2147483647, got 2147483648"}};
}

const std::vector<AllocationRow> kAllocationRows =
    Concat(CapacityRows("V11", "V12", "Verify", VerifyPlanAllocationBytes,
                        "VerifyPlan verify_capacity", -3),
           CapacityRows("W13", "W14", "Write", WritePlanAllocationBytes,
                        "WritePlan write_req_capacity", -1));

class PlanAllocationRejects : public ::testing::TestWithParam<AllocationRow> {};

TEST_P(PlanAllocationRejects, Raises) {
  EXPECT_KVC_ERROR(GetParam().bytes(GetParam().capacity), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(Rows, PlanAllocationRejects, ::testing::ValuesIn(kAllocationRows),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvcanary::testing
