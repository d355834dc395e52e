// Validation of Write (rows W1-W12 with G7-G9). Each row starts from a valid call, breaks one
// thing, and asserts the exact message and that no output byte changed.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/write.h"
#include "reject_rows.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

// A valid call: two write rows of 2 and 1 tokens (three tokens in all) over an 8-slot canary
// buffer with one real-KV source, the input assert off. The outputs hold non-zero bytes, so that
// "unchanged" means something; `paired` is there for the rows that pass a paired context.
struct WriteCase : KeptTensors {
  using OpArgs = WriteArgs;
  WriteCase() {
    state.canary.values().assign(state.canary.values().size(), 0xA5);
    state.ring.values().assign(state.ring.values().size(), -6);
    state.write_index[0] = 3;
    state.slot_run_counter[0] = 100;
    state.kernel_run_counter[0] = 7;
    plan.offsets.values() = {0, 2, 3};
    plan.seeds.values() = {-1, 1};
    plan.num_valid_reqs[0] = 2;
  }
  OpArgs Args() const {
    WriteArgs args;
    args.context = state.Context();
    args.context.real_kv_sources[0] = MakeRealKvSource(kv.view(), 1, 64, 32);
    args.context.num_real_kv_sources = 1;
    args.context.real_kv_hash_mode = static_cast<int32_t>(RealKvHashMode::kAll);
    args.plan = plan.write();
    args.input_ids = input_ids.view();
    args.positions = positions.view();
    args.out_cache_loc = out_cache_loc.view();
    return args;
  }
  ByteSnapshot Snapshot() {
    return ByteSnapshot(state.canary, state.ring, state.write_index, state.slot_run_counter,
                        state.kernel_run_counter, paired.canary, paired.ring, paired.write_index,
                        paired.slot_run_counter, paired.kernel_run_counter);
  }
  static void Run(const WriteArgs& args) { Write(args); }

  // Turns the input assert on with both expected tensors given.
  void EnableInputAssert(WriteArgs& args) const {
    args.enable_write_input_assert = true;
    args.expected_input_tokens = expected_tokens.view();
    args.expected_input_positions = expected_positions.view();
  }

  CanaryState state{8};
  CanaryState paired{8};
  PlanBuffers plan{1, 2};
  HostTensor<uint8_t> kv{{8, 64}};
  HostTensor<int64_t> input_ids = HostTensor<int64_t>::Of({11, 12, 13});
  HostTensor<int64_t> positions = HostTensor<int64_t>::Of({0, 1, 2});
  HostTensor<int64_t> out_cache_loc = HostTensor<int64_t>::Of({2, 3, 4});
  HostTensor<int64_t> expected_tokens = input_ids;
  HostTensor<int64_t> expected_positions = positions;
};

using Row = RejectRow<WriteCase>;
constexpr const char* kAssertOnMessage =
    "kv-canary: expected input tensors are required when enable_write_input_assert=True";
constexpr const char* kAssertOffMessage =
    "kv-canary: expected input tensors must be None when enable_write_input_assert=False";

constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
const auto kSeeds = PartArg(&WriteArgs::plan, &WritePlanView::write_seed_slot_indices,
                            "plan.write_seed_slot_indices", "Seeds");
const auto kOffsets =
    PartArg(&WriteArgs::plan, &WritePlanView::write_offsets, "plan.write_offsets", "Offsets");
const auto kNumValidReqs = PartArg(&WriteArgs::plan, &WritePlanView::write_num_valid_reqs,
                                   "plan.write_num_valid_reqs", "NumValidReqs");
const ContextRefs<WriteArgs> kCtx;
const auto kInputIds = OwnArg(&WriteArgs::input_ids, "input_ids", "InputIds");
const auto kPositions = OwnArg(&WriteArgs::positions, "positions", "Positions");
const auto kOutCacheLoc = OwnArg(&WriteArgs::out_cache_loc, "out_cache_loc", "OutCacheLoc");

const Row kListedRows[] = {
    {"AbsentInputIds", [](auto&, auto& a) { a.input_ids = TensorView(); },
     "kv-canary: input_ids is required, got None"},
    // W1-W6: source count, contiguity, expected tensors, source layouts.
    {"W1MoreThanFourSources", [](auto&, auto& a) { a.context.num_real_kv_sources = 5; },
     "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5"},
    {"W2CanaryBufNotContiguous",
     [](auto& c, auto& a) {
       a.context.canary_buf = c.state.canary.view({4, 32}, {64, 1});
     },
     "kv-canary: canary_buf must be contiguous"},
    {"W2PositionsNotContiguous", [](auto& c, auto& a) { a.positions = Gapped(c.positions); },
     "kv-canary: positions must be contiguous"},
    {"W2OutCacheLocNotContiguous",
     [](auto& c, auto& a) { a.out_cache_loc = Gapped(c.out_cache_loc); },
     "kv-canary: out_cache_loc must be contiguous"},
    {"W2ReportsTheFirstNonContiguousTensorInOrder",
     [](auto& c, auto& a) {
       a.input_ids = Gapped(c.input_ids);
       a.plan.write_offsets = Gapped(c.plan.offsets);
     },
     "kv-canary: plan.write_offsets must be contiguous"},
    {"W3AssertOnWithoutExpectedTokens",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_tokens = TensorView();
     },
     kAssertOnMessage},
    {"W3AssertOnWithoutExpectedPositions",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_positions = TensorView();
     },
     kAssertOnMessage},
    {"W4ExpectedTokensNotContiguous",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_tokens = Gapped(c.expected_tokens);
     },
     "kv-canary: expected_input_tokens must be contiguous"},
    {"W4ExpectedPositionsNotContiguous",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_positions = Gapped(c.expected_positions);
     },
     "kv-canary: expected_input_positions must be contiguous"},
    {"W5AssertOffWithExpectedTokens",
     [](auto& c, auto& a) { a.expected_input_tokens = c.expected_tokens.view(); },
     kAssertOffMessage},
    {"W5AssertOffWithExpectedPositions",
     [](auto& c, auto& a) { a.expected_input_positions = c.expected_positions.view(); },
     kAssertOffMessage},
    {"W6RingNotContiguous",
     [](auto& c, auto& a) {
       a.context.violation_ring = c.state.ring.view({8, 8}, {16, 1});
     },
     "kv-canary: violation_ring must be contiguous"},
    {"W6ChainAssertFlagNotContiguous",
     [](auto& c, auto& a) {
       a.context.enable_chain_position_assert = Gapped(c.Keep(HostTensor<int32_t>({4})));
     },
     "kv-canary: enable_chain_position_assert must be contiguous"},
    {"W6SourceNotContiguous",
     [](auto& c, auto& a) {
       a.context.real_kv_sources[0].tensor = c.kv.view({4, 64}, {128, 1});
     },
     "kv-canary: real_kv_sources[0].tensor must be contiguous"},
    {"W6ThreeDimensionalSource",
     [](auto& c, auto& a) {
       a.context.real_kv_sources[0].tensor = c.kv.view({8, 4, 16});
     },
     "kv-canary: real_kv_sources[0].tensor (viewed as uint8) must be 2-D, got 3-D"},
    {"W6HandBuiltSourceIsCheckedLikeAMadeOne",
     [](auto&, auto& a) { a.context.real_kv_sources[0].page_size = 2; },
     "kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is 64 bytes but "
     "page_size=2 x num_bytes_per_token=64 needs 128"},
    // W7: the canary buffer.
    {"W7CanaryBufWrongDType",
     [](auto& c, auto& a) { a.context.canary_buf = Recast(c.state.canary, DType::kBool); },
     "kv-canary: canary_buf must have dtype torch.uint8, got torch.bool"},
    {"W7CanaryBufNot2D",
     [](auto& c, auto& a) {
       a.context.canary_buf = c.state.canary.view({8, 4, 8});
     },
     "kv-canary: canary_buf must be 2-D, got shape (8, 4, 8)"},
    {"W7SlotStrideBelow32",
     [](auto& c, auto& a) {
       a.context.canary_buf = c.state.canary.view({32, 8});
     },
     "kv-canary: canary_write: slot_stride_bytes must hold at least 32 bytes per slot, got 8"},
    // W8: the plan.
    Named("W8SeedsWrongDType", WrongDtypeRow<WriteCase>("", kSeeds, i64, i32)),
    RankRow<WriteCase>("W8", kSeeds, 1, {1, 2}),
    Named("W8OffsetsWrongDType", WrongDtypeRow<WriteCase>("", kOffsets, i64, DType::kUInt64)),
    RankRow<WriteCase>("W8", kOffsets, 1, {3, 1}),
    ReplaceRow<WriteCase>("W8OffsetsNotCapacityPlusOne", kOffsets, Resized<WriteCase>(2),
                          "kv-canary: canary_write: write_offsets.size(0) must equal "
                          "write_req_capacity + 1 (3), got 2"),
    Named("W8NumValidReqsWrongDType", WrongDtypeRow<WriteCase>("", kNumValidReqs, i32, i64)),
    Named("W8NumValidReqsWrongLength", LengthRow<WriteCase>("", kNumValidReqs, 1, 2)),
    // W9: the token tensors.
    Named("W9InputIdsWrongDType", WrongDtypeRow<WriteCase>("", kInputIds, i64, i32)),
    RankRow<WriteCase>("W9", kInputIds, 1, {1, 3}),
    Named("W9PositionsShorterThanInputIds", LengthRow<WriteCase>("", kPositions, 3, 2)),
    Named("W9OutCacheLocWrongDType", WrongDtypeRow<WriteCase>("", kOutCacheLoc, i64, i32)),
    {"W9ExpectedTokensWrongLength",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_tokens = c.expected_tokens.view({2});
     },
     "kv-canary: expected_input_tokens length must be 3, got 2"},
    {"W9ExpectedPositionsWrongDType",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_positions = Recast(c.expected_positions, DType::kFloat64);
     },
     "kv-canary: expected_input_positions must have dtype torch.int64, got torch.float64"},
    // W10: ring, counters, chain-assert flag.
    Named("W10WriteIndexWrongLength", LengthRow<WriteCase>("", kCtx.write_index, 1, 4)),
    Named("W10RingWithoutEightColumns",
          ReplaceRow<WriteCase>("", kCtx.ring, Restrided<WriteCase>({8, 16}, {}),
                                "kv-canary: violation_ring must have 8 columns, got shape (8, 16)")),
    Named("W10SlotRunCounterWrongDType",
          WrongDtypeRow<WriteCase>("", kCtx.slot_run_counter, i64, i32)),
    Named("W10ChainAssertFlagWrongDType", WrongDtypeRow<WriteCase>("", kCtx.chain_assert, i32, i64)),
    Named("W10ChainAssertFlagWrongLength", LengthRow<WriteCase>("", kCtx.chain_assert, 1, 0)),
    // W12, G8 (W11, W12's hash mode: ContextScalarRows; G9: CudaWithoutBackendRows).
    Named("W12RingOnAnotherDevice", OtherDeviceRow<WriteCase>("", kCtx.ring, "canary_buf")),
    {"W12SourceOnAnotherDevice",
     [](auto& c, auto& a) { a.context.real_kv_sources[0].tensor = OnCuda(c.kv); },
     "kv-canary: real_kv_sources[0].tensor must be on canary_buf's device cpu, got cuda:0"},
    Named("W12ChainAssertFlagOnAnotherDevice",
          OtherDeviceRow<WriteCase>("", kCtx.chain_assert, "canary_buf")),
    Named("W12InputIdsOnAnotherDevice", OtherDeviceRow<WriteCase>("", kInputIds, "canary_buf")),
    {"W12ExpectedPositionsOnAnotherDevice",
     [](auto& c, auto& a) {
       c.EnableInputAssert(a);
       a.expected_input_positions = OnCuda(c.expected_positions);
     },
     "kv-canary: expected_input_positions must be on canary_buf's device cpu, got cuda:0"},
    Named("G8ReadOnlyCanaryBuf", ReadOnlyRow<WriteCase>("", kCtx.canary_buf)),
    Named("G8ReadOnlyWriteIndex", ReadOnlyRow<WriteCase>("", kCtx.write_index)),
};

// G9: every tensor of the call on `device`.
void AllOnDevice(Device device, WriteArgs& a) {
  LaunchContext& c = a.context;
  WritePlanView& p = a.plan;
  MoveToDevice(device, {&c.canary_buf, &c.violation_ring, &c.violation_write_index,
                        &c.slot_run_counter, &c.kernel_run_counter, &c.enable_chain_position_assert,
                        &c.real_kv_sources[0].tensor, &p.write_offsets, &p.write_seed_slot_indices,
                        &p.write_num_valid_reqs, &a.input_ids, &a.positions, &a.out_cache_loc});
}

const std::vector<Row> kRows = KernelTable(kListedRows, "W11NegativeSourceCount",
                                           "W12UnknownHashMode", "canary_write", AllOnDevice);

KVC_REJECTION_TABLE(WriteRejects, WriteCase, kRows);

TEST(WriteValidation, ValidBaselineWritesRecordsAndCounts) {
  WriteCase c;
  EXPECT_TRUE(AcceptedCallWrites(c));
  EXPECT_EQ(c.state.kernel_run_counter[0], 8);
  EXPECT_EQ(c.state.slot_run_counter[0], 103);
  EXPECT_EQ(c.state.record(4).token, 13);
}

TEST(WriteValidation, InputAssertWithBothExpectedTensorsIsAccepted) {
  WriteCase c;
  WriteArgs args = c.Args();
  c.EnableInputAssert(args);
  Write(args);
  EXPECT_EQ(c.state.kernel_run_counter[0], 8);
  EXPECT_EQ(c.state.write_index[0], 3);  // inputs equal their expectations: no row
}

}  // namespace
}  // namespace kvcanary::testing
