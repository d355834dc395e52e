// Validation of the two plan stages and the SWA translation (spec/kernels.md §7.3, §7.4, §11):
// launch_plan_offsets_kernel (rows O1-O19), launch_plan_entries_kernel (E rows and the CPU
// offsets/entries contract check), launch_swa_translate_kernel.
//
// Each test starts from a valid call, breaks exactly one thing, and checks the exact message and
// that no output byte changed. Outputs start filled with 0x5A bytes, so "unchanged" is not the
// same as "still zero", and each valid baseline is shown to write.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {
namespace {

constexpr uint8_t kPoisonByte = 0x5A;
constexpr int64_t kPoison = 0x5A5A5A5A5A5A5A5A;
constexpr int64_t kVerifyCapacity = 16;
constexpr int64_t kWriteCapacity = 4;
constexpr int64_t kScratchLen = 4097;  // SGLang's fixed offsets block (O14)
constexpr int64_t kLutBase = 1000;
constexpr int64_t kLutLen = 64;

template <typename T>
void Poison(HostTensor<T>& t) {
  std::memset(t.data(), kPoisonByte, t.bytes());
}

template <typename T>
HostTensor<T> Poisoned(std::vector<int64_t> shape) {
  HostTensor<T> t(std::move(shape));
  Poison(t);
  return t;
}

// The same memory, claimed to live on `device`. The op must raise before it touches the memory,
// so no GPU is needed.
TensorView OnDevice(const TensorView& view, Device device) {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  for (int d = 0; d < view.ndim(); ++d) {
    shape.push_back(view.size(d));
    strides.push_back(view.stride(d));
  }
  return TensorView(view.data(), view.dtype(), device, shape, strides, view.writable());
}

TensorView OnCuda(const TensorView& view) { return OnDevice(view, Device::CUDA(0)); }

// A device no backend supports (DLPack's Metal), in every build.
Device UnsupportedDevice() { return Device{DeviceType::kOther, 0, 8}; }

// Moves every present view of `views` to `device`.
void AllOnDevice(Device device, std::initializer_list<TensorView*> views) {
  for (TensorView* t : views) {
    if (t->defined()) *t = OnDevice(*t, device);
  }
}

template <typename T>
int64_t NumElements(const HostTensor<T>& t) {
  return static_cast<int64_t>(t.bytes() / sizeof(T));
}

// The elements of `t`, for comparisons.
template <typename T>
std::vector<T> Values(const HostTensor<T>& t) {
  std::vector<T> out;
  for (int64_t i = 0; i < NumElements(t); ++i) out.push_back(t[i]);
  return out;
}

// A non-contiguous 1-D view: every other element of `backing`.
template <typename T>
TensorView EveryOther(const HostTensor<T>& backing) {
  return backing.view({NumElements(backing) / 2}, {2});
}

// req_to_token[row, col], distinct per cell and below kLutLen.
int64_t TableSlot(int64_t row, int64_t col) { return 10 * row + col + 1; }
// The SWA LUT maps slot s to kLutBase + s, so every emitted slot shows it was translated.
int64_t Translated(int64_t slot) { return slot < 0 ? slot : kLutBase + slot; }
// The expected-token pool's value at (row, position).
int32_t PoolToken(int64_t row, int64_t position) {
  return static_cast<int32_t>(500 + 10 * row + position);
}

HostTensor<int32_t> MakeTable() {
  HostTensor<int32_t> table({4, 8});
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 8; ++c) table.at(r, c) = static_cast<int32_t>(TableSlot(r, c));
  }
  return table;
}

// D10: a [4, 8] view with row stride 16 over a [4, 16] buffer (a slice of a wider table). Columns
// 8-15 hold a marker that a reader ignoring the row stride would pick up.
struct WideTable {
  WideTable() : buffer({4, 16}, -77) {
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t c = 0; c < 8; ++c) buffer.at(r, c) = static_cast<int32_t>(TableSlot(r, c));
    }
  }
  TensorView Sliced() const { return buffer.view({4, 8}, {16, 1}); }
  HostTensor<int32_t> buffer;
};

HostTensor<int64_t> MakeLut() {
  HostTensor<int64_t> lut({kLutLen});
  for (int64_t i = 0; i < kLutLen; ++i) lut[i] = kLutBase + i;
  return lut;
}

HostTensor<int32_t> MakePool() {
  HostTensor<int32_t> pool({4, 8});
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 8; ++c) pool.at(r, c) = PoolToken(r, c);
  }
  return pool;
}

// Runs `op`, which must throw exactly `message`, and checks that `before` still holds.
template <typename Op>
void ExpectRaisesUnchanged(Op op, const ByteSnapshot& before, const std::string& message) {
  EXPECT_KVC_ERROR(op(), message);
  EXPECT_TRUE(before.Unchanged()) << "a rejected call wrote an output";
}

// The D10 message for a req_to_token view with these strides over a [4, 8] shape.
std::string D10Message(const std::string& strides) {
  return "kv-canary: req_to_token must have stride 1 in its last dimension and a row stride >= "
         "its width, got shape (4, 8) strides " +
         strides;
}

// ---------------------------------------------------------------------------------------------
// launch_plan_offsets_kernel

// A valid call: bs=2 live rows on req_to_token rows 1 and 2 with prefixes 3 and 2 and extends 2
// and 1, a [4, 8] table, a 64-entry LUT, verify capacity 16, write capacity 4.
struct OffsetsCase {
  PlanOffsetsArgs Args() const {
    PlanOffsetsArgs args;
    args.req_pool_indices = req_pool_indices.view();
    args.prefix_lens = prefix_lens.view();
    args.extend_seq_lens = extend_seq_lens.view();
    args.req_to_token = req_to_token.view();
    args.full_to_swa_index_mapping = lut.view();
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
    args.req_pool_indices = zeros.view();
    args.prefix_lens = zeros.view();
    args.extend_seq_lens = zeros.view();
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
  args.req_pool_indices = EveryOther(wide);
  ExpectOffsetsRaises(c, args, "kv-canary: req_pool_indices must be contiguous");
}

TEST(PlanValidation, O1ReqToTokenTransposedRaisesD10) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
  ExpectOffsetsRaises(c, args, D10Message("(1, 4)"));
}

TEST(PlanValidation, O1ReqToTokenRequiredContiguousRaises) {
  OffsetsCase c;
  const WideTable table;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = table.Sliced();
  args.require_contiguous_req_to_token = true;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token must be contiguous");
}

TEST(PlanValidation, O1LutNotContiguousRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> wide({2 * kLutLen});
  PlanOffsetsArgs args = c.Args();
  args.full_to_swa_index_mapping = EveryOther(wide);
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
  args.req_pool_indices = narrow.view();
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, O2ReqToTokenWrongDtypeRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = wide.view();
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
  args.req_to_token_stride0 = 0;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token_stride0 must be positive, got 0");
}

TEST(PlanValidation, O7NegativeReqToTokenStride0Raises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token_stride0 = -8;
  ExpectOffsetsRaises(c, args, "kv-canary: req_to_token_stride0 must be positive, got -8");
}

// Derived from the view, too: a one-row table expanded to row stride 0 is contiguous (torch's
// rule ignores size-1 dimensions) but has no positive pitch.
TEST(PlanValidation, O7ExpandedOneRowReqToTokenRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({1, 8}, {0, 1});
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
  args.full_to_swa_index_mapping = c.lut.view({0});
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be positive when has_swa_lut is True");
}

TEST(PlanValidation, O11LutLenWithoutLutRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.full_to_swa_index_mapping = TensorView();
  args.lut_len = 4;
  ExpectOffsetsRaises(c, args, "kv-canary: lut_len must be 0 when has_swa_lut is False");
}

// O12, O13: batch lengths, table rank.
TEST(PlanValidation, O12ReqPoolIndicesNot1DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_pool_indices = c.req_pool_indices.view({2, 1});
  ExpectOffsetsRaises(c, args, "kv-canary: req_pool_indices must be 1-D, got shape (2, 1)");
}

TEST(PlanValidation, O12PrefixLensLengthRaises) {
  OffsetsCase c;
  const HostTensor<int64_t> longer = HostTensor<int64_t>::Of({3, 2, 0});
  PlanOffsetsArgs args = c.Args();
  args.prefix_lens = longer.view();
  ExpectOffsetsRaises(c, args, "kv-canary: prefix_lens length must be 2, got 3");
}

TEST(PlanValidation, O12ExtendSeqLensLengthRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.extend_seq_lens = c.extend_seq_lens.view({1});
  ExpectOffsetsRaises(c, args, "kv-canary: extend_seq_lens length must be 2, got 1");
}

TEST(PlanValidation, O13ReqToTokenNot2DRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({32});
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
  args.full_to_swa_index_mapping = c.lut.view({8, 8});
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
  args.req_to_token_stride0 = 16;
  ExpectOffsetsRaises(c, args,
                      "kv-canary: req_to_token_stride0=16 does not match req_to_token.stride(0)=8");
}

TEST(PlanValidation, D10OffsetsSlicedReqToTokenWithMatchingStride0Passes) {
  OffsetsCase c;
  const WideTable table;
  PlanOffsetsArgs args = c.Args();
  args.req_to_token = table.Sliced();
  args.req_to_token_stride0 = 16;
  PlanOffsets(args);
  ExpectBaselineOffsets(c);
}

// O19: one device, the reference being out_verify_offsets_scratch.
TEST(PlanValidation, O19ReqPoolIndicesOnOtherDeviceRaises) {
  OffsetsCase c;
  PlanOffsetsArgs args = c.Args();
  args.req_pool_indices = OnCuda(args.req_pool_indices);
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
  AllOnDevice(device, {&args.req_pool_indices, &args.prefix_lens, &args.extend_seq_lens,
                       &args.req_to_token, &args.full_to_swa_index_mapping,
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

// ---------------------------------------------------------------------------------------------
// launch_plan_entries_kernel

// A valid call matching OffsetsCase: scratch {0, 3, 5} (T = 5), enable 1, the token pool with
// valid lengths 8, four verify arrays of capacity 16.
struct EntriesCase {
  PlanEntriesArgs Args() const {
    PlanEntriesArgs args;
    args.req_pool_indices = req_pool_indices.view();
    args.prefix_lens = prefix_lens.view();
    args.req_to_token = req_to_token.view();
    args.full_to_swa_index_mapping = lut.view();
    args.verify_offsets_scratch = scratch.view();
    args.verify_enable = verify_enable.view();
    args.req_to_verify_expected_tokens = pool.view();
    args.req_to_verify_expected_tokens_valid_lens = valid_lens.view();
    args.out_verify_slot_indices = slots.view();
    args.out_verify_expected_tokens = tokens.view();
    args.out_verify_expected_positions = positions.view();
    args.out_verify_prev_slot_indices = prevs.view();
    return args;
  }

  ByteSnapshot Snapshot() { return ByteSnapshot(slots, tokens, positions, prevs); }

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

template <typename... Extra>
void ExpectEntriesRaises(EntriesCase& c, const PlanEntriesArgs& args, const std::string& message,
                         Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  ExpectRaisesUnchanged([&] { PlanEntries(args); }, before, message);
}

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
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_FALSE(before.Unchanged());
  ExpectBaselineEntries(c);
}

TEST(PlanValidation, EntriesPresenceVerifyEnableMissingRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_enable = TensorView();
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable is required, got None");
}

TEST(PlanValidation, E1PoolWithoutValidLensRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens_valid_lens = TensorView();
  ExpectEntriesRaises(c, args,
                      "kv-canary: launch_plan_entries_kernel requires "
                      "req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens "
                      "is set");
}

// The unnumbered E checks, in the spec's order.
TEST(PlanValidation, EReqPoolIndicesNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1, 0, 2, 0});
  PlanEntriesArgs args = c.Args();
  args.req_pool_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: req_pool_indices must be contiguous");
}

TEST(PlanValidation, EReqPoolIndicesWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({1, 2});
  PlanEntriesArgs args = c.Args();
  args.req_pool_indices = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_pool_indices must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, EReqPoolIndicesNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_pool_indices = c.req_pool_indices.view({1, 2});
  ExpectEntriesRaises(c, args, "kv-canary: req_pool_indices must be 1-D, got shape (1, 2)");
}

TEST(PlanValidation, EPrefixLensNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({3, 0, 2, 0});
  PlanEntriesArgs args = c.Args();
  args.prefix_lens = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: prefix_lens must be contiguous");
}

TEST(PlanValidation, EPrefixLensLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.prefix_lens = c.prefix_lens.view({1});
  ExpectEntriesRaises(c, args, "kv-canary: prefix_lens length must be 2, got 1");
}

TEST(PlanValidation, EScratchNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({0, 0, 3, 0, 5, 0});
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch must be contiguous");
}

TEST(PlanValidation, EScratchWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({0, 3, 5});
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: verify_offsets_scratch must have dtype torch.int64, got "
                      "torch.int32");
}

TEST(PlanValidation, EScratchNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({3, 1});
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch must be 1-D, got shape (3, 1)");
}

TEST(PlanValidation, E2ScratchTooShortRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.verify_offsets_scratch = c.scratch.view({2});
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch length must be >= bs_padded + 1");
}

// A one-element tensor is always contiguous (torch's rule), so the G1 case is a strided pair.
TEST(PlanValidation, EVerifyEnableNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int32_t> wide = HostTensor<int32_t>::Of({1, 0, 1, 0});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable must be contiguous");
}

TEST(PlanValidation, EVerifyEnableWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({1});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: verify_enable must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, EVerifyEnableLengthRaises) {
  EntriesCase c;
  const HostTensor<int32_t> two = HostTensor<int32_t>::Of({1, 1});
  PlanEntriesArgs args = c.Args();
  args.verify_enable = two.view();
  ExpectEntriesRaises(c, args, "kv-canary: verify_enable length must be 1, got 2");
}

TEST(PlanValidation, ESlotIndicesNotContiguousRaises) {
  EntriesCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_slot_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_slot_indices must be contiguous", wide);
}

TEST(PlanValidation, EExpectedTokensWrongDtypeRaises) {
  EntriesCase c;
  HostTensor<int32_t> narrow = Poisoned<int32_t>({kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_expected_tokens = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_expected_tokens must have dtype torch.int64, got "
                      "torch.int32",
                      narrow);
}

TEST(PlanValidation, EExpectedPositionsNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_expected_positions = c.positions.view({kVerifyCapacity, 1});
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_expected_positions must be 1-D, got shape (16, 1)");
}

TEST(PlanValidation, EPrevSlotIndicesNotContiguousRaises) {
  EntriesCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({2 * kVerifyCapacity});
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices must be contiguous", wide);
}

// The common length is len(out_verify_slot_indices).
TEST(PlanValidation, EPrevSlotIndicesLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = c.prevs.view({kVerifyCapacity - 1});
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices length must be 16, got 15");
}

TEST(PlanValidation, EReqToTokenTransposedRaisesD10) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({4, 8}, {1, 4});
  ExpectEntriesRaises(c, args, D10Message("(1, 4)"));
}

TEST(PlanValidation, EReqToTokenExpandedRaisesD10) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({4, 8}, {0, 1});
  ExpectEntriesRaises(c, args, D10Message("(0, 1)"));
}

TEST(PlanValidation, EReqToTokenRequiredContiguousRaises) {
  EntriesCase c;
  const WideTable table;
  PlanEntriesArgs args = c.Args();
  args.req_to_token = table.Sliced();
  args.require_contiguous_req_to_token = true;
  ExpectEntriesRaises(c, args, "kv-canary: req_to_token must be contiguous");
}

TEST(PlanValidation, EReqToTokenWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanEntriesArgs args = c.Args();
  args.req_to_token = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_token must have dtype torch.int32, got torch.int64");
}

TEST(PlanValidation, EReqToTokenNot2DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_token = c.req_to_token.view({32});
  ExpectEntriesRaises(c, args, "kv-canary: req_to_token must be 2-D, got shape (32,)");
}

TEST(PlanValidation, D10EntriesSlicedReqToTokenReadsTheRightRows) {
  EntriesCase c;
  const WideTable table;
  PlanEntriesArgs args = c.Args();
  args.req_to_token = table.Sliced();
  PlanEntries(args);
  ExpectBaselineEntries(c);
}

TEST(PlanValidation, ELutNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({2 * kLutLen});
  PlanEntriesArgs args = c.Args();
  args.full_to_swa_index_mapping = EveryOther(wide);
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor must be contiguous");
}

TEST(PlanValidation, ELutWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow({kLutLen});
  PlanEntriesArgs args = c.Args();
  args.full_to_swa_index_mapping = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: lut_tensor must have dtype torch.int64, got torch.int32");
}

TEST(PlanValidation, ELutNot1DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.full_to_swa_index_mapping = c.lut.view({8, 8});
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor must be 1-D, got shape (8, 8)");
}

TEST(PlanValidation, EEmptyLutRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.full_to_swa_index_mapping = c.lut.view({0});
  ExpectEntriesRaises(c, args, "kv-canary: lut_tensor length must be >= 1, got 0");
}

TEST(PlanValidation, EPoolNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int32_t> wide({4, 16});
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens = wide.view({4, 8}, {16, 1});
  ExpectEntriesRaises(c, args, "kv-canary: req_to_verify_expected_tokens must be contiguous");
}

TEST(PlanValidation, EPoolWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide({4, 8});
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens = wide.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens must have dtype torch.int32, got "
                      "torch.int64");
}

TEST(PlanValidation, EPoolNot2DRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens = c.pool.view({32});
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens must be 2-D, got shape (32,)");
}

TEST(PlanValidation, EValidLensNotContiguousRaises) {
  EntriesCase c;
  const HostTensor<int64_t> wide = HostTensor<int64_t>::Of({8, 0, 8, 0});
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens_valid_lens = EveryOther(wide);
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens_valid_lens must be contiguous");
}

TEST(PlanValidation, EValidLensWrongDtypeRaises) {
  EntriesCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({8, 8});
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens_valid_lens = narrow.view();
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_to_verify_expected_tokens_valid_lens must have dtype "
                      "torch.int64, got torch.int32");
}

TEST(PlanValidation, EValidLensLengthRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_to_verify_expected_tokens_valid_lens = c.valid_lens.view({1});
  ExpectEntriesRaises(
      c, args, "kv-canary: req_to_verify_expected_tokens_valid_lens length must be 2, got 1");
}

// One device, the reference being verify_offsets_scratch.
TEST(PlanValidation, EReqPoolIndicesOnOtherDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.req_pool_indices = OnCuda(args.req_pool_indices);
  ExpectEntriesRaises(c, args,
                      "kv-canary: req_pool_indices must be on verify_offsets_scratch's device cpu, "
                      "got cuda:0");
}

TEST(PlanValidation, EPrevSlotIndicesOnOtherDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = OnCuda(args.out_verify_prev_slot_indices);
  ExpectEntriesRaises(c, args,
                      "kv-canary: out_verify_prev_slot_indices must be on verify_offsets_scratch's "
                      "device cpu, got cuda:0");
}

TEST(PlanValidation, G8EntriesSlotIndicesReadOnlyRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_slot_indices = c.slots.read_only_view();
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_slot_indices must be writable");
}

TEST(PlanValidation, G8EntriesPrevSlotIndicesReadOnlyRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  args.out_verify_prev_slot_indices = c.prevs.read_only_view();
  ExpectEntriesRaises(c, args, "kv-canary: out_verify_prev_slot_indices must be writable");
}

void AllOnDevice(Device device, PlanEntriesArgs& args) {
  AllOnDevice(device,
              {&args.req_pool_indices, &args.prefix_lens, &args.req_to_token,
               &args.full_to_swa_index_mapping, &args.verify_offsets_scratch, &args.verify_enable,
               &args.req_to_verify_expected_tokens, &args.req_to_verify_expected_tokens_valid_lens,
               &args.out_verify_slot_indices, &args.out_verify_expected_tokens,
               &args.out_verify_expected_positions, &args.out_verify_prev_slot_indices});
}

TEST(PlanValidation, G9EntriesAllOnUnsupportedDeviceRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  AllOnDevice(UnsupportedDevice(), args);
  ExpectEntriesRaises(
      c, args, "kv-canary: verify_offsets_scratch is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST(PlanValidation, G9EntriesAllOnCudaWithoutBackendRaises) {
  EntriesCase c;
  PlanEntriesArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectEntriesRaises(c, args, "kv-canary: verify_offsets_scratch is on unsupported device cuda:0");
}
#endif

// The data-dependent contract check: the CPU backend raises before writing (CUDA traps).
TEST(PlanValidation, EContractTotalAboveCapacityRaises) {
  EntriesCase c;
  c.scratch[2] = kVerifyCapacity + 1;
  ExpectEntriesRaises(c, c.Args(),
                      "kv-canary: plan_entries: total_verify=17 exceeds verify_capacity=16 with "
                      "verify_enable=1 (offsets/entries contract broken)");
}

TEST(PlanValidation, EContractTotalAboveCapacityDisabledWritesNothing) {
  EntriesCase c;
  c.scratch[2] = kVerifyCapacity + 1;
  c.verify_enable[0] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}

TEST(PlanValidation, EDisabledWritesNothing) {
  EntriesCase c;
  c.verify_enable[0] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}

TEST(PlanValidation, EZeroTotalWritesNothing) {
  EntriesCase c;
  c.scratch[1] = 0;
  c.scratch[2] = 0;
  const ByteSnapshot before = c.Snapshot();
  PlanEntries(c.Args());
  EXPECT_TRUE(before.Unchanged());
}

// ---------------------------------------------------------------------------------------------
// launch_swa_translate_kernel: out[i] = tr(in[i]); int64 1-D contiguous, equal lengths, one device.

// A valid call: a chain head, slot 0, an in-range slot and one past the LUT (clamps, D3).
struct SwaCase {
  SwaTranslateArgs Args() const {
    return SwaTranslateArgs{slot_indices.view(), lut.view(), out.view()};
  }
  ByteSnapshot Snapshot() { return ByteSnapshot(out, slot_indices); }

  HostTensor<int64_t> slot_indices = HostTensor<int64_t>::Of({-1, 0, 3, 100});
  HostTensor<int64_t> lut = HostTensor<int64_t>::Of({10, 11, 12, 13, 14, 15, 16, 17});
  HostTensor<int64_t> out = Poisoned<int64_t>({4});
};

template <typename... Extra>
void ExpectSwaRaises(SwaCase& c, const SwaTranslateArgs& args, const std::string& message,
                     Extra&... extra) {
  ByteSnapshot before = c.Snapshot();
  (before.Add(extra.data(), extra.bytes()), ...);
  ExpectRaisesUnchanged([&] { SwaTranslate(args); }, before, message);
}

TEST(SwaTranslateValidation, ValidBaselineSucceedsAndWrites) {
  SwaCase c;
  const ByteSnapshot before = c.Snapshot();
  SwaTranslate(c.Args());
  EXPECT_FALSE(before.Unchanged());
  EXPECT_EQ(Values(c.out), (std::vector<int64_t>{-1, 10, 13, 17}));
}

TEST(SwaTranslateValidation, InPlaceSucceeds) {
  SwaCase c;
  SwaTranslate(SwaTranslateArgs{c.slot_indices.view(), c.lut.view(), c.slot_indices.view()});
  EXPECT_EQ(Values(c.slot_indices), (std::vector<int64_t>{-1, 10, 13, 17}));
}

TEST(SwaTranslateValidation, PresenceLutMissingRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = TensorView();
  ExpectSwaRaises(c, args, "kv-canary: full_to_swa_index_mapping is required, got None");
}

TEST(SwaTranslateValidation, G1SlotIndicesNotContiguousRaises) {
  SwaCase c;
  const HostTensor<int64_t> wide({8});
  SwaTranslateArgs args = c.Args();
  args.slot_indices = EveryOther(wide);
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must be contiguous");
}

TEST(SwaTranslateValidation, G1OutNotContiguousRaises) {
  SwaCase c;
  HostTensor<int64_t> wide = Poisoned<int64_t>({8});
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = EveryOther(wide);
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be contiguous", wide);
}

TEST(SwaTranslateValidation, G2SlotIndicesWrongDtypeRaises) {
  SwaCase c;
  const HostTensor<int32_t> narrow = HostTensor<int32_t>::Of({-1, 0, 3, 100});
  SwaTranslateArgs args = c.Args();
  args.slot_indices = narrow.view();
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must have dtype torch.int64, got torch.int32");
}

TEST(SwaTranslateValidation, G2LutWrongDtypeRaises) {
  SwaCase c;
  const HostTensor<int32_t> narrow({8});
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = narrow.view();
  ExpectSwaRaises(c, args,
                  "kv-canary: full_to_swa_index_mapping must have dtype torch.int64, got "
                  "torch.int32");
}

TEST(SwaTranslateValidation, G3SlotIndicesNot1DRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.slot_indices = c.slot_indices.view({2, 2});
  ExpectSwaRaises(c, args, "kv-canary: slot_indices must be 1-D, got shape (2, 2)");
}

TEST(SwaTranslateValidation, G3OutNot1DRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.view({4, 1});
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be 1-D, got shape (4, 1)");
}

TEST(SwaTranslateValidation, G5OutLengthRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.view({3});
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices length must be 4, got 3");
}

TEST(SwaTranslateValidation, G6EmptyLutRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = c.lut.view({0});
  ExpectSwaRaises(c, args, "kv-canary: full_to_swa_index_mapping length must be >= 1, got 0");
}

TEST(SwaTranslateValidation, G7SlotIndicesOnOtherDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.slot_indices = OnCuda(args.slot_indices);
  ExpectSwaRaises(c, args,
                  "kv-canary: slot_indices must be on out_slot_indices's device cpu, got cuda:0");
}

TEST(SwaTranslateValidation, G7LutOnOtherDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.full_to_swa_index_mapping = OnCuda(args.full_to_swa_index_mapping);
  ExpectSwaRaises(c, args,
                  "kv-canary: full_to_swa_index_mapping must be on out_slot_indices's device cpu, "
                  "got cuda:0");
}

TEST(SwaTranslateValidation, G8OutReadOnlyRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  args.out_slot_indices = c.out.read_only_view();
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices must be writable");
}

void AllOnDevice(Device device, SwaTranslateArgs& args) {
  AllOnDevice(device,
              {&args.slot_indices, &args.full_to_swa_index_mapping, &args.out_slot_indices});
}

TEST(SwaTranslateValidation, G9AllOnUnsupportedDeviceRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  AllOnDevice(UnsupportedDevice(), args);
  ExpectSwaRaises(c, args,
                  "kv-canary: out_slot_indices is on unsupported device dlpack_device_8:0");
}

#if !defined(KVC_HAVE_CUDA)
TEST(SwaTranslateValidation, G9AllOnCudaWithoutBackendRaises) {
  SwaCase c;
  SwaTranslateArgs args = c.Args();
  AllOnDevice(Device::CUDA(0), args);
  ExpectSwaRaises(c, args, "kv-canary: out_slot_indices is on unsupported device cuda:0");
}
#endif

}  // namespace
}  // namespace kvcanary::testing
