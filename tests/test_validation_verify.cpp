// Validation of Verify (rows V1-V10 with G7-G9); RealKvSource construction and the host hash
// helpers are in test_validation_real_kv.cpp. Each row starts from a valid call, breaks one
// thing, and asserts the exact message and that no output byte changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/hash.h"
#include "kvcanary/verify.h"
#include "reject_rows.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int32_t kModeAll = static_cast<int32_t>(RealKvHashMode::kAll);

// --- Verify ---

// A valid call: four entries over an 8-slot canary buffer with one real-KV source. The outputs
// hold non-zero bytes, so that "unchanged" means something; `paired` is there for the rows that
// pass a paired context.
struct VerifyCase : KeptTensors {
  using OpArgs = VerifyArgs;
  VerifyCase() {
    std::fill(state.canary.values().begin(), state.canary.values().end(), 0xA5);
    std::fill(state.ring.values().begin(), state.ring.values().end(), 0x5A5A5A5A5A5A5A5A);
    state.write_index[0] = 3;
    state.slot_run_counter[0] = 100;
    state.kernel_run_counter[0] = 7;
    plan.slots.values() = {1, 2, 3, 4};
    plan.positions.values() = {0, 1, 2, 3};
    plan.prevs.values() = {-1, 1, 2, 3};
    plan.num_valid[0] = 4;
  }
  OpArgs Args() const {
    VerifyArgs args;
    args.context = state.Context();
    args.context.real_kv_sources[0] = MakeRealKvSource(kv.view(), 1, 64, 32);
    args.context.num_real_kv_sources = 1;
    args.context.real_kv_hash_mode = kModeAll;
    args.plan = plan.verify();
    return args;
  }
  ByteSnapshot Snapshot() {
    return ByteSnapshot(state.canary, state.ring, state.write_index, state.slot_run_counter,
                        state.kernel_run_counter, paired.canary, paired.ring, paired.write_index,
                        paired.slot_run_counter, paired.kernel_run_counter);
  }
  static void Run(const VerifyArgs& args) { Verify(args); }

  CanaryState state{8};
  CanaryState paired{8};
  PlanBuffers plan{4, 1};
  HostTensor<uint8_t> kv{{8, 64}};
};

// A hand-built (unchecked) source over `tensor`, as index `i`.
void SetSource(VerifyArgs& a, int i, const TensorView& tensor, int64_t read_bytes = 32) {
  a.context.real_kv_sources[i] = RealKvSource{tensor, 1, 64, read_bytes};
  a.context.num_real_kv_sources = std::max(a.context.num_real_kv_sources, i + 1);
}

using VerifyRow = RejectRow<VerifyCase>;

constexpr DType i32 = DType::kInt32, i64 = DType::kInt64;
ArgRef<VerifyArgs> PlanArg(TensorView VerifyPlanView::*member, const std::string& name) {
  return PartArg(&VerifyArgs::plan, member, "plan." + name, "");
}
const ContextRefs<VerifyArgs> kCtx;
const auto kSlots = PlanArg(&VerifyPlanView::verify_slot_indices, "verify_slot_indices");
const auto kTokens = PlanArg(&VerifyPlanView::verify_expected_tokens, "verify_expected_tokens");
const auto kPositions =
    PlanArg(&VerifyPlanView::verify_expected_positions, "verify_expected_positions");
const auto kNumValid = PlanArg(&VerifyPlanView::verify_num_valid, "verify_num_valid");
const auto kEnable = PlanArg(&VerifyPlanView::enable, "enable");

const VerifyRow kListedRows[] = {
    {"AbsentPlanArray", [](auto&, auto& a) { a.plan.verify_expected_tokens = TensorView(); },
     "kv-canary: plan.verify_expected_tokens is required, got None"},
    // V1-V4: source count, contiguity, source layouts.
    {"V1MoreThanFourSources", [](auto&, auto& a) { a.context.num_real_kv_sources = 5; },
     "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5"},
    {"V2CanaryBufNotContiguous",
     [](auto& c, auto& a) {
       a.context.canary_buf = c.state.canary.view({4, 32}, {64, 1});
     },
     "kv-canary: canary_buf must be contiguous"},
    {"V2PrevSlotIndicesNotContiguous",
     [](auto& c, auto& a) { a.plan.verify_prev_slot_indices = Gapped(c.plan.prevs); },
     "kv-canary: plan.verify_prev_slot_indices must be contiguous"},
    {"V2KernelRunCounterNotContiguous",
     [](auto& c, auto& a) {
       a.context.kernel_run_counter = Gapped(c.KeepOutput(Poisoned<int64_t>({4})));
     },
     "kv-canary: kernel_run_counter must be contiguous"},
    {"V2ReportsTheFirstNonContiguousTensorInOrder",
     [](auto& c, auto& a) {
       a.context.violation_ring = c.state.ring.view({8, 8}, {16, 1});
       a.plan.verify_num_valid = Gapped(c.Keep(HostTensor<int32_t>({4})));
     },
     "kv-canary: plan.verify_num_valid must be contiguous"},
    {"V3SourceNotContiguous",
     [](auto& c, auto& a) {
       SetSource(a, 0, c.kv.view({4, 64}, {128, 1}));
     },
     "kv-canary: real_kv_sources[0].tensor must be contiguous"},
    {"V3AbsentSourceTensor", [](auto&, auto& a) { SetSource(a, 0, TensorView()); },
     "kv-canary: real_kv_sources[0].tensor is required, got None"},
    {"V3NamesTheSourceByIndex",
     [](auto& c, auto& a) {
       SetSource(a, 1, c.kv.view({4, 64}, {128, 1}));
     },
     "kv-canary: real_kv_sources[1].tensor must be contiguous"},
    {"V4ThreeDimensionalSource",
     [](auto& c, auto& a) {
       SetSource(a, 0, c.kv.view({8, 4, 16}));
     },
     "kv-canary: real_kv_sources[0].tensor (viewed as uint8) must be 2-D, got 3-D"},
    {"V4LayerTableOfAnotherDType",
     [](auto& c, auto& a) {
       a.context.real_kv_sources[0].layer_addresses =
           Recast(c.Keep(HostTensor<int64_t>({2})), DType::kInt32);
     },
     "kv-canary: RealKvSource.layer_addresses must have dtype torch.int64, got torch.int32"},
    {"V4LayerTableOnAnotherDevice",
     [](auto& c, auto& a) {
       a.context.real_kv_sources[0].layer_addresses = OnCuda(c.Keep(HostTensor<int64_t>({2})));
     },
     "kv-canary: RealKvSource.layer_addresses must be on RealKvSource.tensor's device cpu, got "
     "cuda:0"},
    {"V4HandBuiltSourceIsCheckedLikeAMadeOne",
     [](auto& c, auto& a) { SetSource(a, 0, c.kv.view(), /*read_bytes=*/8); },
     ReadBytesMessage(64, 8)},
    // V5, V6: the canary buffer.
    {"V5CanaryBufWrongDType",
     [](auto& c, auto& a) { a.context.canary_buf = Recast(c.state.canary, DType::kInt8); },
     "kv-canary: canary_buf must have dtype torch.uint8, got torch.int8"},
    {"V5CanaryBufNot2D",
     [](auto& c, auto& a) { a.context.canary_buf = c.state.canary.view({256}); },
     "kv-canary: canary_buf must be 2-D, got shape (256,)"},
    {"V6SlotStrideBelow32",
     [](auto& c, auto& a) {
       a.context.canary_buf = c.state.canary.view({16, 16});
     },
     "kv-canary: canary_verify: slot_stride_bytes must hold at least 32 bytes per slot, got 16"},
    // V7: plan, ring and counter dtypes and shapes.
    Named("V7SlotIndicesWrongDType", WrongDtypeRow<VerifyCase>("", kSlots, i64, i32)),
    Named("V7SlotIndicesNot1D", RankRow<VerifyCase>("", kSlots, 1, {2, 2})),
    Named("V7ExpectedTokensWrongDType",
          WrongDtypeRow<VerifyCase>("", kTokens, i64, DType::kFloat64)),
    Named("V7PlanArraysOfDifferentLengths", LengthRow<VerifyCase>("", kPositions, 4, 3)),
    Named("V7NumValidWrongDType", WrongDtypeRow<VerifyCase>("", kNumValid, i32, i64)),
    Named("V7EnableWrongLength", LengthRow<VerifyCase>("", kEnable, 1, 0)),
    Named("V7WriteIndexWrongDType", WrongDtypeRow<VerifyCase>("", kCtx.write_index, i32, i64)),
    Named("V7RingWrongDType", WrongDtypeRow<VerifyCase>("", kCtx.ring, i64, DType::kUInt64)),
    Named("V7RingNot2D", RankRow<VerifyCase>("", kCtx.ring, 2, {128})),
    Named(
        "V7RingWithoutEightColumns",
        ReplaceRow<VerifyCase>("", kCtx.ring, Restrided<VerifyCase>({32, 4}, {}),
                               "kv-canary: violation_ring must have 8 columns, got shape (32, 4)")),
    Named("V7SlotRunCounterWrongLength", LengthRow<VerifyCase>("", kCtx.slot_run_counter, 1, 2)),
    Named("V7KernelRunCounterWrongDType",
          WrongDtypeRow<VerifyCase>("", kCtx.kernel_run_counter, i64, i32)),
    // V10, G8 (V8, V9: ContextScalarRows; G9: CudaWithoutBackendRows).
    Named("V10RingOnAnotherDevice", OtherDeviceRow<VerifyCase>("", kCtx.ring, "canary_buf")),
    {"V10SourceOnAnotherDevice", [](auto& c, auto& a) { SetSource(a, 0, OnCuda(c.kv.view())); },
     "kv-canary: real_kv_sources[0].tensor must be on canary_buf's device cpu, got cuda:0"},
    Named("V10PlanArrayOnAnotherDevice", OtherDeviceRow<VerifyCase>("", kEnable, "canary_buf")),
    Named("G8ReadOnlyRing", ReadOnlyRow<VerifyCase>("", kCtx.ring)),
    Named("G8ReadOnlyKernelRunCounter", ReadOnlyRow<VerifyCase>("", kCtx.kernel_run_counter)),
};

// G9: every tensor of the call on `device`.
void AllOnDevice(Device device, VerifyArgs& a) {
  LaunchContext& c = a.context;
  VerifyPlanView& p = a.plan;
  MoveToDevice(
      device, {&c.canary_buf, &c.violation_ring, &c.violation_write_index, &c.slot_run_counter,
               &c.kernel_run_counter, &c.real_kv_sources[0].tensor, &p.verify_slot_indices,
               &p.verify_expected_tokens, &p.verify_expected_positions, &p.verify_prev_slot_indices,
               &p.verify_num_valid, &p.enable});
}

const std::vector<VerifyRow> kVerifyRows = KernelTable(
    kListedRows, "V8NegativeSourceCount", "V9UnknownHashMode", "canary_verify", AllOnDevice);

KVC_REJECTION_TABLE(VerifyRejects, VerifyCase, kVerifyRows);

TEST(VerifyValidation, ValidBaselineRunsAndCountsEntries) {
  VerifyCase c;
  Verify(c.Args());
  EXPECT_EQ(c.state.kernel_run_counter[0], 8);
  EXPECT_EQ(c.state.slot_run_counter[0], 104);
}

TEST(VerifyValidation, G8ReadOnlyCanaryBufIsAccepted) {
  VerifyCase c;
  VerifyArgs args = c.Args();
  args.context.canary_buf = c.state.canary.read_only_view();
  Verify(args);
  EXPECT_EQ(c.state.kernel_run_counter[0], 8);
}

TEST(VerifyValidation, ChainAssertFlagIsNotRequired) {
  VerifyCase c;
  VerifyArgs args = c.Args();
  args.context.enable_chain_position_assert = TensorView();  // a write-only input
  Verify(args);
  EXPECT_EQ(c.state.kernel_run_counter[0], 8);
}

}  // namespace
}  // namespace kvcanary::testing
