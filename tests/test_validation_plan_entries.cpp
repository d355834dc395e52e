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

#include "block_table_rows.h"
#include "kvcanary/kvcanary.h"
#include "reject_rows.h"
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
using Args = PlanEntriesArgs;

const auto kScratch = KVC_ARG(verify_offsets_scratch, "Scratch");
const auto kEnable = KVC_ARG(verify_enable, "VerifyEnable");
const PlanInputRefs<Args> kIn;
const auto kSlots = KVC_ARG(out_verify_slot_indices, "SlotIndices");
const auto kTokens = KVC_ARG(out_verify_expected_tokens, "ExpectedTokens");
const auto kPositions = KVC_ARG(out_verify_expected_positions, "ExpectedPositions");
const auto kPrevs = KVC_ARG(out_verify_prev_slot_indices, "PrevSlotIndices");

// Presence, then each tensor's contiguity, dtype, rank and length (the common length is
// len(out_verify_slot_indices)).
std::vector<Row> LayoutRows() {
  constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
  return {
      MissingRow<EntriesCase>("EntriesPresenceVerifyEnableMissing", kEnable),
      PoolWithoutValidLensRow<EntriesCase>("E1PoolWithoutValidLens"),
      NotContiguousRow<EntriesCase>("E", kIn.req_pool_indices),
      WrongDtypeRow<EntriesCase>("E", kIn.req_pool_indices, i64, i32),
      RankRow<EntriesCase>("E", kIn.req_pool_indices, 1, {1, 2}),
      NotContiguousRow<EntriesCase>("E", kIn.prefix_lens),
      LengthRow<EntriesCase>("E", kIn.prefix_lens, 2, 1),
      NotContiguousRow<EntriesCase>("E", kScratch),
      WrongDtypeRow<EntriesCase>("E", kScratch, i64, i32),
      RankRow<EntriesCase>("E", kScratch, 1, {3, 1}),
      ReplaceRow<EntriesCase>("E2ScratchTooShort", kScratch, Resized<EntriesCase>(2),
                              "kv-canary: verify_offsets_scratch length must be >= bs_padded + 1"),
      NotContiguousRow<EntriesCase>("E", kEnable),
      WrongDtypeRow<EntriesCase>("E", kEnable, i32, i64),
      LengthRow<EntriesCase>("E", kEnable, 1, 2),
      NotContiguousRow<EntriesCase>("E", kSlots),
      WrongDtypeRow<EntriesCase>("E", kTokens, i64, i32),
      RankRow<EntriesCase>("E", kPositions, 1, {kVerifyCapacity, 1}),
      NotContiguousRow<EntriesCase>("E", kPrevs),
      LengthRow<EntriesCase>("E", kPrevs, kVerifyCapacity, kVerifyCapacity - 1),
  };
}

// The tables: req_to_token's row stride (D10) and the LUT (the token pool: PoolRows).
std::vector<Row> TableRows() {
  constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
  return {
      ReplaceRow<EntriesCase>("EReqToTokenTransposedD10", kIn.req_to_token,
                              Restrided<EntriesCase>({4, 8}, {1, 4}), D10Message("(1, 4)")),
      ReplaceRow<EntriesCase>("EReqToTokenExpandedD10", kIn.req_to_token,
                              Restrided<EntriesCase>({4, 8}, {0, 1}), D10Message("(0, 1)")),
      RequiredContiguousTableRow<EntriesCase>("EReqToTokenRequiredContiguous"),
      WrongDtypeRow<EntriesCase>("E", kIn.req_to_token, i32, i64),
      RankRow<EntriesCase>("E", kIn.req_to_token, 2, {32}),
      NotContiguousRow<EntriesCase>("E", kIn.lut),
      WrongDtypeRow<EntriesCase>("E", kIn.lut, i64, i32),
      RankRow<EntriesCase>("E", kIn.lut, 1, {8, 8}),
      ReplaceRow<EntriesCase>("EEmptyLut", kIn.lut, Resized<EntriesCase>(0),
                              "kv-canary: lut_tensor length must be >= 1, got 0"),
  };
}

// One device (the reference being verify_offsets_scratch), writability, and the data-dependent
// contract check: the CPU backend raises before writing (CUDA prints it and writes nothing).
// (Backend support: the UnsupportedDeviceRows.)
std::vector<Row> PlacementRows() {
  return {
      {"EContractTotalAboveCapacity",
       [](EntriesCase& c, Args&) { c.scratch[2] = kVerifyCapacity + 1; },
       "kv-canary: plan_entries: total_verify=17 exceeds verify_capacity=16 with verify_enable=1 "
       "(offsets/entries contract broken)"},
      OtherDeviceRow<EntriesCase>("E", kIn.req_pool_indices, "verify_offsets_scratch"),
      OtherDeviceRow<EntriesCase>("E", kPrevs, "verify_offsets_scratch"),
      ReadOnlyRow<EntriesCase>("G8Entries", kSlots),
      ReadOnlyRow<EntriesCase>("G8Entries", kPrevs),
  };
}

const std::vector<Row> kRows =
    Concat(LayoutRows(), TableRows(), PoolRows<EntriesCase>("E", 1), PlacementRows(),
           BlockTableRows<EntriesCase>("E"),
           UnsupportedDeviceRows<EntriesCase>("Entries", "verify_offsets_scratch", AllOnDevice));

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
  EXPECT_TRUE(AcceptedCallWrites(c));
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
  EXPECT_FALSE(AcceptedCallWrites(c));
}

TEST(PlanValidation, EDisabledWritesNothing) {
  EntriesCase c;
  c.verify_enable[0] = 0;
  EXPECT_FALSE(AcceptedCallWrites(c));
}

TEST(PlanValidation, EZeroTotalWritesNothing) {
  EntriesCase c;
  c.scratch[1] = 0;
  c.scratch[2] = 0;
  EXPECT_FALSE(AcceptedCallWrites(c));
}

}  // namespace
}  // namespace kvcanary::testing
