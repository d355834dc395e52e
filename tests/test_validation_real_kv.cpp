// Validation of RealKvSource construction (the bounds, then R1-R7) and of the host hash helpers
// RealKvHash and ComputeSlotHash. Each row starts from a valid call, breaks one thing, and asserts
// the exact message and that no output byte changed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kvcanary/context.h"
#include "kvcanary/hash.h"
#include "reject_rows.h"
#include "testutil.h"
#include "validation_table.h"
#include "validation_util.h"

namespace kvcanary::testing {
namespace {

constexpr int32_t kModeAll = static_cast<int32_t>(RealKvHashMode::kAll);

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
