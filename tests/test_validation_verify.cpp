// Validation of Verify (rows V1-V10 with G7-G9), of RealKvSource construction (R1-R7) and of the
// host hash helpers RealKvHash and ComputeSlotHash. Each row starts from a valid call, breaks one
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

// The R3 message (also what V4 reports for a hand-built source).
std::string ReadBytesMessage(int64_t bytes_per_token, int64_t got) {
  return "kv-canary: RealKvSource.read_bytes must be a positive multiple of 16 in "
         "(0, num_bytes_per_token=" +
         std::to_string(bytes_per_token) + "], got " + std::to_string(got);
}

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

// --- R1-R7: MakeRealKvSource ---

struct SourceFields {
  TensorView tensor;
  int64_t page_size;
  int64_t num_bytes_per_token;
  int64_t read_bytes;
};

// A valid source: an [8, 64] uint8 tensor, one 64-byte token a row, 32 bytes of each read.
struct RealKvSourceCase : KeptTensors {
  using OpArgs = SourceFields;
  OpArgs Args() const { return {kv.view(), 1, 64, 32}; }
  ByteSnapshot Snapshot() { return ByteSnapshot(kv); }
  static void Run(const SourceFields& f) {
    MakeRealKvSource(f.tensor, f.page_size, f.num_bytes_per_token, f.read_bytes);
  }

  HostTensor<uint8_t> kv{{8, 64}};
};

// A row that keeps the valid tensor and passes these numbers.
auto Fields(int64_t page_size, int64_t num_bytes_per_token, int64_t read_bytes) {
  return [=](RealKvSourceCase&, SourceFields& f) {
    f.page_size = page_size;
    f.num_bytes_per_token = num_bytes_per_token;
    f.read_bytes = read_bytes;
  };
}

// The R2 message.
std::string BytesPerTokenMessage(int64_t got) {
  return "kv-canary: RealKvSource.num_bytes_per_token must be a positive multiple of 16, got " +
         std::to_string(got);
}

// A [7, 64] uint8 tensor starting 8 bytes into a 64-byte aligned buffer. The buffer has a fixed
// address, so the R7 row's message can name the pointer.
alignas(64) uint8_t misaligned_backing[8 * 64];
TensorView MisalignedKv() {
  return TensorView(misaligned_backing + 8, DType::kUInt8, Device::CPU(), {7, 64});
}
std::string MisalignedMessage() {
  return "kv-canary: RealKvSource.tensor data pointer must be 16-byte aligned, got 0x" +
         AddressHex(MisalignedKv().data());
}

using SourceRow = RejectRow<RealKvSourceCase>;

const SourceRow kSourceRows[] = {
    // Bounds, before any other check of the tensor (no op's table holds a source).
    {"BoundsNegativeSize",
     [](auto& c, auto& f) {
       f.tensor = TensorView(c.kv.data(), DType::kUInt8, Device::CPU(), {-1, 64});
     },
     "kv-canary: RealKvSource.tensor must have non-negative sizes, got shape (-1, 64)"},
    {"BoundsSpanPastInt64",
     [](auto& c, auto& f) {
       f.tensor = TensorView(c.kv.data(), DType::kUInt8, Device::CPU(), {int64_t{1} << 62, 64});
     },
     "kv-canary: RealKvSource.tensor must span at most 2^63 - 1 bytes, got shape "
     "(4611686018427387904, 64) strides (64, 1)"},
    {"AbsentTensor", [](auto&, auto& f) { f.tensor = TensorView(); },
     "kv-canary: RealKvSource.tensor is required, got None"},
    {"R1PageSizeBelowOne", Fields(0, 64, 32),
     "kv-canary: RealKvSource.page_size must be >= 1, got 0"},
    {"R1IsCheckedBeforeR2", Fields(-3, 0, 32),
     "kv-canary: RealKvSource.page_size must be >= 1, got -3"},
    {"R2ZeroBytesPerToken", Fields(1, 0, 32), BytesPerTokenMessage(0)},
    {"R2BytesPerTokenNotMultipleOf16", Fields(1, 24, 16), BytesPerTokenMessage(24)},
    {"R3ZeroReadBytes", Fields(1, 64, 0), ReadBytesMessage(64, 0)},
    {"R3ReadBytesPastBytesPerToken", Fields(1, 32, 48), ReadBytesMessage(32, 48)},
    {"R3ReadBytesNotMultipleOf16", Fields(1, 64, 24), ReadBytesMessage(64, 24)},
    {"R4OneDimensionalTensor", [](auto& c, auto& f) { f.tensor = c.kv.view({512}); },
     "kv-canary: RealKvSource.tensor must be at least 2-D, got shape (512,)"},
    {"R5RowStrideNotMultipleOf16",
     [](auto& c, auto& f) {
       f = {c.kv.view({4, 24}, {24, 1}), 1, 16, 16};
     },
     "kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got 24 bytes "
     "(shape=(4, 24), strides=(24, 1), dtype=torch.uint8)"},
    {"R5CountsTheRowStrideInBytes",
     [](auto& c, auto& f) {
       f = {TensorView(c.kv.data(), DType::kBFloat16, Device::CPU(), {4, 12}, {12, 1}), 1, 16, 16};
     },
     "kv-canary: RealKvSource.tensor row stride must be a multiple of 16 bytes, got 24 bytes "
     "(shape=(4, 12), strides=(12, 1), dtype=torch.bfloat16)"},
    {"R6RowNarrowerThanPage", Fields(2, 64, 32),
     "kv-canary: RealKvSource row is too narrow for its slot layout: dim-1 is 64 bytes but "
     "page_size=2 x num_bytes_per_token=64 needs 128"},
    {"R7MisalignedDataPointer", [](auto&, auto& f) { f.tensor = MisalignedKv(); },
     MisalignedMessage()},
};

KVC_REJECTION_TABLE(RealKvSourceRejects, RealKvSourceCase, kSourceRows);

TEST(RealKvSourceValidation, ValidSourceKeepsItsFields) {
  HostTensor<uint8_t> kv({8, 64});
  const RealKvSource source = MakeRealKvSource(kv.view(), 2, 32, 16);
  EXPECT_EQ(source.tensor.data(), kv.data());
  EXPECT_EQ(source.page_size, 2);
  EXPECT_EQ(source.num_bytes_per_token, 32);
  EXPECT_EQ(source.read_bytes, 16);
}

// --- RealKvHash: validates its sources and mode like an op does ---

struct HashCall {
  RealKvSource source;
  int num_sources;
  int32_t mode;
  int64_t slot;
};

// A valid call: slot 0 of one source over an [8, 64] uint8 tensor, every byte read.
struct RealKvHashCase : KeptTensors {
  using OpArgs = HashCall;
  OpArgs Args() const { return {MakeRealKvSource(kv.view(), 1, 64, 32), 1, kModeAll, 0}; }
  ByteSnapshot Snapshot() { return ByteSnapshot(kv); }
  static void Run(const HashCall& h) { RealKvHash(&h.source, h.num_sources, h.mode, h.slot); }

  HostTensor<uint8_t> kv{{8, 64}};
};

using HashRow = RejectRow<RealKvHashCase>;

const HashRow kHashRows[] = {
    {"MoreThanFourSources", [](auto&, auto& h) { h.num_sources = 5; },
     "kv-canary: at most 4 RealKvSource entries supported by the CUDA ABI, got 5"},
    {"NegativeSourceCount", [](auto&, auto& h) { h.num_sources = -1; },
     "kv-canary: real_kv_hash: num_sources must be in [0, 4], got -1"},
    {"NonContiguousSource",
     [](auto& c, auto& h) {
       h.source.tensor = c.kv.view({4, 64}, {128, 1});
     },
     "kv-canary: real_kv_sources[0].tensor must be contiguous"},
    {"InvalidHandBuiltSource", [](auto&, auto& h) { h.source.page_size = 0; },
     "kv-canary: RealKvSource.page_size must be >= 1, got 0"},
    {"UnknownMode", [](auto&, auto& h) { h.mode = -1; },
     "kv-canary: real_kv_hash_mode must be one of 0/1/2, got -1"},
    {"SourceOffTheHost", [](auto& c, auto& h) { h.source.tensor = OnCuda(c.kv.view()); },
     "kv-canary: real_kv_hash reads CPU tensors only, got real_kv_sources[0].tensor on cuda:0"},
    {"NegativeSlot", [](auto&, auto& h) { h.slot = -1; },
     "kv-canary: real_kv_hash slot_idx must be >= 0, got -1"},
};

KVC_REJECTION_TABLE(RealKvHashRejects, RealKvHashCase, kHashRows);

TEST(RealKvHashValidation, ZeroBytesAndModeNoneHashToZero) {
  RealKvHashCase c;
  const HashCall h = c.Args();
  EXPECT_EQ(RealKvHash(&h.source, 1, kModeAll, 3), 0u);
  c.kv.at(3, 0) = 1;
  EXPECT_NE(RealKvHash(&h.source, 1, kModeAll, 3), 0u);
  EXPECT_EQ(RealKvHash(&h.source, 1, static_cast<int32_t>(RealKvHashMode::kNone), 3), 0u);
}

// --- ComputeSlotHash ---

struct SlotHashCall {
  TensorView canary_buf;
  int64_t slot;
};

// A valid call: slot 0 of an 8-slot canary buffer.
struct SlotHashCase : KeptTensors {
  using OpArgs = SlotHashCall;
  OpArgs Args() const { return {state.canary.view(), 0}; }
  ByteSnapshot Snapshot() { return ByteSnapshot(state.canary); }
  static void Run(const SlotHashCall& s) { ComputeSlotHash(s.canary_buf, s.slot); }

  CanaryState state{8};
};

using SlotHashRow = RejectRow<SlotHashCase>;

const SlotHashRow kSlotHashRows[] = {
    {"AbsentCanaryBuf", [](auto&, auto& s) { s.canary_buf = TensorView(); },
     "kv-canary: canary_buf is required, got None"},
    {"SpanPastInt64",
     [](auto& c, auto& s) {
       // Contiguous, 2-D and 32 wide: only the bounds keep slot * 32 from passing int64.
       s.canary_buf =
           TensorView(c.state.canary.data(), DType::kUInt8, Device::CPU(), {int64_t{1} << 62, 32});
       s.slot = int64_t{1} << 61;
     },
     "kv-canary: canary_buf must span at most 2^63 - 1 bytes, got shape (4611686018427387904, 32) "
     "strides (32, 1)"},
    {"NonContiguousCanaryBuf",
     [](auto& c, auto& s) {
       s.canary_buf = c.state.canary.view({4, 32}, {64, 1});
     },
     "kv-canary: canary_buf must be contiguous"},
    {"WrongDType", [](auto& c, auto& s) { s.canary_buf = Recast(c.state.canary, DType::kInt64); },
     "kv-canary: canary_buf must have dtype torch.uint8, got torch.int64"},
    {"Not2D", [](auto& c, auto& s) { s.canary_buf = c.state.canary.view({256}); },
     "kv-canary: canary_buf must be 2-D, got shape (256,)"},
    {"SlotStrideBelow32",
     [](auto& c, auto& s) {
       s.canary_buf = c.state.canary.view({16, 16});
     },
     "kv-canary: compute_slot_hash: slot_stride_bytes must hold at least 32 bytes per "
     "slot, got 16"},
    {"CanaryBufOffTheHost", [](auto& c, auto& s) { s.canary_buf = OnCuda(c.state.canary.view()); },
     "kv-canary: compute_slot_hash reads CPU tensors only, got canary_buf on cuda:0"},
    {"SlotPastTheEnd", [](auto&, auto& s) { s.slot = 8; },
     "kv-canary: compute_slot_hash slot_idx must be < 8, got 8"},
};

KVC_REJECTION_TABLE(SlotHashRejects, SlotHashCase, kSlotHashRows);

TEST(VerifySlotHashHelper, NegativeSlotIsTheHeadHash) {
  CanaryState state(8);
  EXPECT_EQ(ComputeSlotHash(state.canary.view(), -1), ChainHeadHash());
}

TEST(VerifySlotHashHelper, HashesTokenPositionAndPrevHash) {
  CanaryState state(8);
  state.set_record(5, Record{11, 3, -42, 99});
  EXPECT_EQ(ComputeSlotHash(state.canary.read_only_view(), 5),
            Splitmix64Mix3(ToUnsigned(-42), 11, 3));
}

}  // namespace
}  // namespace kvcanary::testing
