// Property tests (spec/kernels.md §4-§10): seeded random valid inputs checked against small
// oracles written from the spec's pseudo-code, never by calling library internals. Every case
// traces its seed, so a failure names the std::mt19937_64 seed that replays it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::ByteSnapshot;
using testing::CanaryState;
using testing::HostTensor;
using testing::PlanBuffers;

// What plan outputs hold before a call, so "left untouched" is observable.
constexpr int64_t kSentinel = 0x5A5A5A5A5A5A5A5ALL;
constexpr int32_t kSentinel32 = -7;

std::string SeedTrace(uint64_t seed) { return "seed=" + std::to_string(seed); }

int64_t Size(const auto& container) { return static_cast<int64_t>(container.size()); }

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  uint64_t Bits() { return engine_(); }
  template <typename T>
  void Shuffle(std::vector<T>& values) {
    std::shuffle(values.begin(), values.end(), engine_);
  }
  template <typename T>
  void FillBytes(HostTensor<T>& tensor) {
    auto* bytes = reinterpret_cast<uint8_t*>(tensor.data());
    for (size_t i = 0; i < tensor.bytes(); ++i) bytes[i] = static_cast<uint8_t>(engine_());
  }

 private:
  std::mt19937_64 engine_;
};

// ---------------------------------------------------------------------------------------------
// Plan oracle (spec §7.2, §7.3).

struct Entry {
  int64_t slot = 0;
  int64_t prev = 0;
  int64_t position = 0;
  int64_t token = 0;
  bool operator==(const Entry&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Entry& e) {
  return out << "{slot " << e.slot << ", prev " << e.prev << ", pos " << e.position << ", tok "
             << e.token << "}";
}

struct PlanInputs {
  std::vector<int64_t> rp, prefix, extend;
  HostTensor<int32_t> req_to_token;  // [rows, width]
  int64_t req_to_token_pad = 0;      // > 0: passed as a slice of a table this much wider (D10)
  int64_t window = 0;
  std::vector<int64_t> lut;  // empty: no LUT
  bool has_pool = false;
  HostTensor<int32_t> pool;  // [pool_rows, pool_width]
  std::vector<int64_t> valid_lens;
  int64_t token_offset = 0;
  int64_t bs() const { return Size(rp); }
};

struct ExpectedPlan {
  std::vector<Entry> entries;
  std::vector<int64_t> write_offsets;  // [bs + 1]
  std::vector<int64_t> seeds;          // [bs]
};

// rt(row, col): row and column clamped (D4, D7).
int64_t Rt(const HostTensor<int32_t>& table, int64_t row, int64_t col) {
  const int64_t rows = table.shape()[0];
  const int64_t width = table.shape()[1];
  row = std::clamp<int64_t>(row, 0, rows - 1);
  col = std::clamp<int64_t>(col, 0, width - 1);
  return table.values()[row * width + col];
}

// tr(x): negatives pass through, indices past the table clamp (D3).
int64_t Tr(const std::vector<int64_t>& lut, int64_t x) {
  if (lut.empty() || x < 0) return x;
  return lut[std::min(x, Size(lut) - 1)];
}

int64_t OracleExpectedToken(const PlanInputs& in, int64_t r, int64_t position) {
  if (!in.has_pool) return -1;
  const int64_t rp = in.rp[r];
  const int64_t q = position + in.token_offset;
  const int64_t rows = in.pool.shape()[0];
  const int64_t width = in.pool.shape()[1];
  if (q < 0 || q >= in.valid_lens[r] || q >= width || rp < 0 || rp >= rows) return -1;
  return in.pool.values()[rp * width + q];
}

ExpectedPlan OraclePlan(const PlanInputs& in) {
  ExpectedPlan plan;
  int64_t write_total = 0;
  for (int64_t r = 0; r < in.bs(); ++r) {
    const int64_t rp = in.rp[r];
    const int64_t p = in.prefix[r];
    const bool active = rp != 0;
    const int64_t ws = in.window > 0 ? std::max<int64_t>(p - in.window, 0) : 0;
    const int64_t vlen = active ? std::max<int64_t>(p - ws, 0) : 0;
    const int64_t wlen = active ? std::max<int64_t>(in.extend[r], 0) : 0;
    for (int64_t pos = ws; pos < ws + vlen; ++pos) {
      const int64_t prev = pos > 0 ? Tr(in.lut, Rt(in.req_to_token, rp, pos - 1)) : -1;
      plan.entries.push_back(Entry{Tr(in.lut, Rt(in.req_to_token, rp, pos)), prev, pos,
                                   OracleExpectedToken(in, r, pos)});
    }
    plan.write_offsets.push_back(write_total);
    write_total += wlen;
    const bool seeded = active && p > 0 && wlen > 0;
    plan.seeds.push_back(seeded ? Tr(in.lut, Rt(in.req_to_token, rp, p - 1)) : -1);
  }
  plan.write_offsets.push_back(write_total);
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Running the plan ops.

// Owns the batch tensors of one plan call over `in` (which must outlive it).
class PlanCall {
 public:
  explicit PlanCall(const PlanInputs& in)
      : in_(in),
        rp_(HostTensor<int64_t>::Of(in.rp)),
        prefix_(HostTensor<int64_t>::Of(in.prefix)),
        extend_(HostTensor<int64_t>::Of(in.extend)),
        lut_(HostTensor<int64_t>::Of(in.lut)),
        valid_lens_(HostTensor<int64_t>::Of(in.valid_lens)),
        wide_table_({in.req_to_token.shape()[0], Width() + in.req_to_token_pad}) {
    for (int64_t r = 0; r < in.req_to_token.shape()[0]; ++r) {
      for (int64_t c = 0; c < Width(); ++c) {
        wide_table_.at(r, c) = in.req_to_token.values()[r * Width() + c];
      }
    }
  }

  // launch_canary_plan_kernels (spec §7.2).
  void Fused(const PlanBuffers& out, bool with_scratch) const {
    HostTensor<int64_t> scratch({in_.bs() + 1}, kSentinel);
    PlanArgs args;
    args.verify_plan_out = out.verify();
    args.write_plan_out = out.write();
    args.req_pool_indices = rp_.view();
    args.prefix_lens = prefix_.view();
    args.extend_seq_lens = extend_.view();
    args.req_to_token = Table();
    args.swa_window_size = in_.window;
    args.full_to_swa_index_mapping = Lut();
    args.verify_capacity = out.slots.shape()[0];
    args.req_to_verify_expected_tokens = Pool();
    args.req_to_verify_expected_tokens_valid_lens = ValidLens();
    args.kv_token_id_vs_position_offset = in_.token_offset;
    if (with_scratch) args.verify_offsets_scratch = scratch.view();
    Plan(args);
  }

  // launch_plan_offsets_kernel then launch_plan_entries_kernel, after zeroing write_offsets
  // (spec §7.4).
  void Staged(PlanBuffers& out) const {
    std::fill(out.offsets.values().begin(), out.offsets.values().end(), 0);
    HostTensor<int64_t> scratch({std::max(kPlanOffsetsScratchMinLength, in_.bs() + 1)}, kSentinel);
    PlanOffsetsArgs offsets;
    offsets.req_pool_indices = rp_.view();
    offsets.prefix_lens = prefix_.view();
    offsets.extend_seq_lens = extend_.view();
    offsets.req_to_token = Table();
    offsets.full_to_swa_index_mapping = Lut();
    offsets.out_verify_offsets_scratch = scratch.view();
    offsets.out_write_offsets = out.offsets.view();
    offsets.out_write_seed_slot_indices = out.seeds.view();
    offsets.out_verify_num_valid = out.num_valid.view();
    offsets.out_verify_enable = out.enable.view();
    offsets.out_write_num_valid_reqs = out.num_valid_reqs.view();
    offsets.swa_window_size = in_.window;
    offsets.verify_capacity = out.slots.shape()[0];
    PlanOffsets(offsets);

    PlanEntriesArgs entries;
    entries.req_pool_indices = rp_.view();
    entries.prefix_lens = prefix_.view();
    entries.req_to_token = Table();
    entries.full_to_swa_index_mapping = Lut();
    entries.verify_offsets_scratch = scratch.view();
    entries.verify_enable = out.enable.view();
    entries.req_to_verify_expected_tokens = Pool();
    entries.req_to_verify_expected_tokens_valid_lens = ValidLens();
    entries.out_verify_slot_indices = out.slots.view();
    entries.out_verify_expected_tokens = out.tokens.view();
    entries.out_verify_expected_positions = out.positions.view();
    entries.out_verify_prev_slot_indices = out.prevs.view();
    entries.kv_token_id_vs_position_offset = in_.token_offset;
    entries.swa_window_size = in_.window;
    PlanEntries(entries);
  }

 private:
  int64_t Width() const { return in_.req_to_token.shape()[1]; }
  TensorView Table() const {
    return wide_table_.view({in_.req_to_token.shape()[0], Width()},
                            {Width() + in_.req_to_token_pad, 1});
  }
  TensorView Lut() const { return in_.lut.empty() ? TensorView() : lut_.view(); }
  TensorView Pool() const { return in_.has_pool ? in_.pool.view() : TensorView(); }
  TensorView ValidLens() const { return in_.has_pool ? valid_lens_.view() : TensorView(); }

  const PlanInputs& in_;
  HostTensor<int64_t> rp_, prefix_, extend_, lut_, valid_lens_;
  HostTensor<int32_t> wide_table_;  // req_to_token in the first Width() columns
};

// Plan buffers of the given capacities with every array at its sentinel.
PlanBuffers SentinelBuffers(int64_t verify_capacity, int64_t write_capacity) {
  PlanBuffers out(verify_capacity, write_capacity);
  for (HostTensor<int64_t>* t :
       {&out.slots, &out.tokens, &out.positions, &out.prevs, &out.offsets, &out.seeds}) {
    std::fill(t->values().begin(), t->values().end(), kSentinel);
  }
  out.num_valid[0] = out.enable[0] = out.num_valid_reqs[0] = kSentinel32;
  return out;
}

// Loose, tight or one-short verify capacity (the last only when the plan has >= 2 entries).
PlanBuffers RandomCapacityBuffers(Rng& rng, const PlanInputs& in) {
  const int64_t total = Size(OraclePlan(in).entries);
  int64_t capacity = total + rng.Uniform(1, 8);
  const int64_t kind = rng.Uniform(0, 2);
  if (kind == 1 && total >= 1) capacity = total;
  if (kind == 2 && total >= 2) capacity = total - 1;
  return SentinelBuffers(capacity, std::max<int64_t>(in.bs() + rng.Uniform(0, 3), 1));
}

std::vector<Entry> EntriesOf(const PlanBuffers& out, int64_t n) {
  std::vector<Entry> entries;
  for (int64_t e = 0; e < n; ++e) {
    entries.push_back(Entry{out.slots[e], out.prevs[e], out.positions[e], out.tokens[e]});
  }
  return entries;
}

std::vector<int64_t> Range(const HostTensor<int64_t>& t, int64_t begin, int64_t end) {
  return std::vector<int64_t>(t.values().begin() + begin, t.values().begin() + end);
}

// Asserts every output of spec §7.2 for `in` in buffers that held the sentinel before the call.
void ExpectPlanMatchesOracle(const PlanInputs& in, const PlanBuffers& out) {
  const ExpectedPlan want = OraclePlan(in);
  const int64_t bs = in.bs();
  const int64_t capacity = out.slots.shape()[0];
  const int64_t write_capacity = out.seeds.shape()[0];
  const int64_t total = Size(want.entries);
  const bool overflow = total > capacity;
  EXPECT_EQ(out.enable[0], overflow ? 0 : 1);
  EXPECT_EQ(out.num_valid[0], overflow ? capacity : total);
  const int64_t written = overflow ? 0 : total;
  EXPECT_EQ(EntriesOf(out, written), overflow ? std::vector<Entry>{} : want.entries);
  for (const HostTensor<int64_t>* t : {&out.slots, &out.tokens, &out.positions, &out.prevs}) {
    EXPECT_EQ(Range(*t, written, capacity), std::vector<int64_t>(capacity - written, kSentinel))
        << "entries past the plan must stay untouched";
  }
  EXPECT_EQ(Range(out.offsets, 0, bs + 1), want.write_offsets);
  EXPECT_EQ(Range(out.offsets, bs + 1, write_capacity + 1),
            std::vector<int64_t>(write_capacity - bs, 0));
  EXPECT_EQ(Range(out.seeds, 0, bs), want.seeds);
  EXPECT_EQ(Range(out.seeds, bs, write_capacity),
            std::vector<int64_t>(write_capacity - bs, kSentinel));
  EXPECT_EQ(out.num_valid_reqs[0], bs);

  // Structure that holds whatever the oracle says.
  for (int64_t r = 0; r < bs; ++r) {
    EXPECT_LE(out.offsets[r], out.offsets[r + 1]) << "write_offsets not monotone at " << r;
  }
  for (int64_t e = 0; e < written; ++e) {
    EXPECT_EQ(out.prevs[e] == -1, out.positions[e] == 0) << "entry " << e;
  }
}

// ---------------------------------------------------------------------------------------------
// Random plan inputs.

constexpr int64_t kMaxFullSlot = 1000;
constexpr int64_t kMaxGroupSlot = 600;

struct PlanVariant {
  bool swa = false;
  bool lut = false;
  bool pool = false;
  int64_t token_offset = 0;
};
constexpr PlanVariant kPlanVariants[] = {
    {false, false, false, 0}, {false, true, false, 0}, {true, true, false, 0},
    {false, false, true, 0},  {false, false, true, 1}, {true, true, true, 1},
};

PlanInputs RandomPlanInputs(Rng& rng, int64_t bs, const PlanVariant& variant) {
  PlanInputs in;
  const int64_t rows = rng.Uniform(2, 12);
  const int64_t width = rng.Uniform(1, 40);
  in.req_to_token = HostTensor<int32_t>({rows, width});
  for (int32_t& slot : in.req_to_token.values()) slot = rng.Uniform(0, kMaxFullSlot - 1);
  if (rng.Chance(0.3)) in.req_to_token_pad = rng.Uniform(1, 5);
  for (int64_t r = 0; r < bs; ++r) {
    const int64_t prefix = rng.Chance(0.15) ? 0 : rng.Uniform(0, width);
    in.rp.push_back(rng.Chance(0.25) ? 0 : rng.Uniform(1, rows - 1));
    in.prefix.push_back(prefix);
    in.extend.push_back(rng.Chance(0.15) ? 0 : rng.Uniform(0, width - prefix));
  }
  if (variant.swa) in.window = rng.Uniform(1, width + 2);
  if (variant.lut) {
    for (int64_t i = 0; i < kMaxFullSlot; ++i) in.lut.push_back(rng.Uniform(0, kMaxGroupSlot));
  }
  if (variant.pool) {
    in.has_pool = true;
    in.pool = HostTensor<int32_t>({rows, width + 1});
    for (int32_t& token : in.pool.values()) token = rng.Uniform(0, 100000);
    for (int64_t r = 0; r < bs; ++r) in.valid_lens.push_back(rng.Uniform(0, width + 1));
  }
  in.token_offset = variant.token_offset;
  return in;
}

TEST(PropertyPlan, FusedPlanMatchesTheOracle) {
  for (uint64_t seed = 1; seed <= 480; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const PlanVariant& variant = kPlanVariants[seed % std::size(kPlanVariants)];
    const int64_t bs = rng.Uniform(0, seed % 40 == 0 ? 300 : 12);
    const PlanInputs in = RandomPlanInputs(rng, bs, variant);
    const PlanBuffers out = RandomCapacityBuffers(rng, in);
    PlanCall(in).Fused(out, rng.Chance(0.5));
    ExpectPlanMatchesOracle(in, out);
    if (HasFailure()) return;
  }
}

void ExpectSameTensor(const auto& a, const auto& b, const char* name) {
  EXPECT_TRUE(a.values() == b.values()) << name << " differs between Plan and the two stages";
}

TEST(PropertyPlan, OffsetsThenEntriesEqualsTheFusedPlan) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const PlanVariant& variant = kPlanVariants[seed % std::size(kPlanVariants)];
    const int64_t bs = seed == 200 ? kPlanBsBlockSize : rng.Uniform(0, seed % 50 == 0 ? 600 : 12);
    const PlanInputs in = RandomPlanInputs(rng, bs, variant);
    const PlanBuffers fused = RandomCapacityBuffers(rng, in);
    PlanBuffers staged = fused;
    const PlanCall call(in);
    call.Fused(fused, rng.Chance(0.5));
    call.Staged(staged);
    ExpectSameTensor(fused.slots, staged.slots, "verify_slot_indices");
    ExpectSameTensor(fused.tokens, staged.tokens, "verify_expected_tokens");
    ExpectSameTensor(fused.positions, staged.positions, "verify_expected_positions");
    ExpectSameTensor(fused.prevs, staged.prevs, "verify_prev_slot_indices");
    ExpectSameTensor(fused.num_valid, staged.num_valid, "verify_num_valid");
    ExpectSameTensor(fused.enable, staged.enable, "enable");
    ExpectSameTensor(fused.offsets, staged.offsets, "write_offsets");
    ExpectSameTensor(fused.seeds, staged.seeds, "write_seed_slot_indices");
    ExpectSameTensor(fused.num_valid_reqs, staged.num_valid_reqs, "write_num_valid_reqs");
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// SWA translation (spec §7.3) and scatter (spec §10).

TEST(PropertySwaTranslate, EqualsTheOracleOutOfPlaceAndInPlace) {
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    std::vector<int64_t> lut(rng.Uniform(1, 32));
    for (int64_t& value : lut) value = rng.Uniform(-2, 500);
    std::vector<int64_t> slots(rng.Uniform(0, 40));
    for (int64_t& slot : slots) slot = rng.Uniform(-5, 2 * Size(lut) + 3);
    std::vector<int64_t> expected;
    for (int64_t slot : slots) expected.push_back(Tr(lut, slot));

    const HostTensor<int64_t> lut_t = HostTensor<int64_t>::Of(lut);
    const HostTensor<int64_t> in = HostTensor<int64_t>::Of(slots);
    const HostTensor<int64_t> out({Size(slots)}, kSentinel);
    SwaTranslate(SwaTranslateArgs{in.view(), lut_t.view(), out.view()});
    EXPECT_EQ(out.values(), HostTensor<int64_t>::Of(expected).values());
    EXPECT_EQ(in.values(), HostTensor<int64_t>::Of(slots).values()) << "input modified";

    const HostTensor<int64_t> in_place = HostTensor<int64_t>::Of(slots);
    SwaTranslate(SwaTranslateArgs{in_place.view(), lut_t.view(), in_place.view()});
    EXPECT_EQ(in_place.values(), HostTensor<int64_t>::Of(expected).values());
  }
}

TEST(PropertyScatter, CopiesLow32BitsOfEachRowPrefixAndNothingElse) {
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    const int64_t pool_rows = rng.Uniform(1, 8);
    const int64_t width = rng.Uniform(1, 12);
    // The pool is a slice of a wider table: its strides must be honoured.
    const int64_t pitch = width + rng.Uniform(0, 3);
    HostTensor<int32_t> pool({pool_rows, pitch});
    rng.FillBytes(pool);
    // Distinct pool rows, some outside [0, pool_rows) (skipped, D7).
    std::vector<int64_t> candidates(pool_rows + 4);
    std::iota(candidates.begin(), candidates.end(), -2);
    rng.Shuffle(candidates);
    const int64_t bs = rng.Uniform(0, std::min<int64_t>(6, Size(candidates)));
    const std::vector<int64_t> rps(candidates.begin(), candidates.begin() + bs);
    std::vector<int64_t> offsets = {0};
    for (int64_t r = 0; r < bs; ++r) offsets.push_back(offsets.back() + rng.Uniform(0, width + 4));
    std::vector<int64_t> flat(offsets.back());
    for (int64_t& token : flat) token = static_cast<int64_t>(rng.Bits());

    HostTensor<int32_t> expected = pool;
    for (int64_t r = 0; r < bs; ++r) {
      if (rps[r] < 0 || rps[r] >= pool_rows) continue;
      const int64_t copied = std::min(offsets[r + 1] - offsets[r], width);
      for (int64_t c = 0; c < copied; ++c) {
        expected.at(rps[r], c) = static_cast<int32_t>(static_cast<uint32_t>(flat[offsets[r] + c]));
      }
    }
    const HostTensor<int64_t> flat_t = HostTensor<int64_t>::Of(flat);
    const HostTensor<int64_t> offsets_t = HostTensor<int64_t>::Of(offsets);
    const HostTensor<int64_t> rps_t = HostTensor<int64_t>::Of(rps);
    const TensorView pool_view = pool.view({pool_rows, width}, {pitch, 1});
    Scatter(ScatterArgs{flat_t.view(), offsets_t.view(), rps_t.view(), pool_view});
    EXPECT_EQ(pool.values(), expected.values());
  }
}

// ---------------------------------------------------------------------------------------------
// Real-KV oracle (spec §4.3).

struct KvSource {
  HostTensor<uint8_t> bytes;  // [rows, dim1_bytes]
  int64_t page_size = 1;
  int64_t bytes_per_token = 16;
  int64_t read_bytes = 16;

  RealKvSource View() const {
    return RealKvSource{bytes.view(), page_size, bytes_per_token, read_bytes};
  }
  bool HasRow(int64_t slot) const { return slot / page_size < bytes.shape()[0]; }
  int64_t StripOffset(int64_t slot) const {
    return slot / page_size * bytes.shape()[1] + slot % page_size * bytes_per_token;
  }
};

int64_t FoldBytes(const KvSource& source, RealKvHashMode mode) {
  if (mode == RealKvHashMode::kNone) return 0;
  return mode == RealKvHashMode::kPartial ? 16 : source.read_bytes;
}

uint64_t LittleEndianWord(const uint8_t* bytes) {
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = word << 8 | bytes[i];
  return word;
}

uint64_t OracleRealKv(const std::vector<KvSource>& sources, RealKvHashMode mode, int64_t slot) {
  if (mode == RealKvHashMode::kNone || sources.empty()) return 0;
  uint64_t acc = 0;
  for (const KvSource& source : sources) {
    uint64_t hash = 0;
    if (source.HasRow(slot)) {
      const uint8_t* strip = source.bytes.values().data() + source.StripOffset(slot);
      for (int64_t off = 0; off < FoldBytes(source, mode); off += 16) {
        hash = Splitmix64(hash ^ LittleEndianWord(strip + off));
        hash = Splitmix64(hash ^ LittleEndianWord(strip + off + 8));
      }
    }
    acc = Splitmix64(acc ^ hash);
  }
  return acc;
}

// 1-3 random-byte sources covering `num_slots` slots, some rows wider than the slots need.
std::vector<KvSource> RandomSources(Rng& rng, int64_t num_slots) {
  std::vector<KvSource> sources(rng.Uniform(1, 3));
  for (KvSource& source : sources) {
    source.page_size = int64_t{1} << rng.Uniform(0, 2);
    source.bytes_per_token = 16 * rng.Uniform(1, 3);
    source.read_bytes = 16 * rng.Uniform(1, source.bytes_per_token / 16);
    const int64_t rows = (num_slots + source.page_size - 1) / source.page_size;
    const int64_t dim1 = source.page_size * source.bytes_per_token + 16 * rng.Uniform(0, 1);
    source.bytes = HostTensor<uint8_t>({rows, dim1});
    rng.FillBytes(source.bytes);
  }
  return sources;
}

LaunchContext ContextWith(const CanaryState& state, const std::vector<KvSource>& sources,
                          RealKvHashMode mode) {
  LaunchContext context = state.Context();
  for (size_t i = 0; i < sources.size(); ++i) context.real_kv_sources[i] = sources[i].View();
  context.num_real_kv_sources = static_cast<int>(sources.size());
  context.real_kv_hash_mode = static_cast<int32_t>(mode);
  return context;
}

RealKvHashMode ModeOf(int64_t i) { return static_cast<RealKvHashMode>(i % 3); }

// A canary slot stride of 32..48 bytes (spec §3: >= 32, not necessarily a multiple of 8).
int64_t RandomStride(uint64_t seed) { return kCanarySlotBytes + static_cast<int64_t>(seed % 17); }

// Bytes [32, stride) of every slot, which no op may write (spec §3).
std::vector<uint8_t> SlotTails(const CanaryState& state) {
  const int64_t stride = state.canary.shape()[1];
  std::vector<uint8_t> tails;
  for (int64_t s = 0; s < state.canary.shape()[0]; ++s) {
    const uint8_t* slot = state.canary.values().data() + s * stride;
    tails.insert(tails.end(), slot + kCanarySlotBytes, slot + stride);
  }
  return tails;
}

void FillSlotTails(Rng& rng, CanaryState& state) {
  const int64_t stride = state.canary.shape()[1];
  for (int64_t s = 0; s < state.canary.shape()[0]; ++s) {
    for (int64_t b = kCanarySlotBytes; b < stride; ++b) {
      state.canary.values()[s * stride + b] = static_cast<uint8_t>(rng.Uniform(1, 255));
    }
  }
}

// slot_hash of a stored record (spec §4.2), through the chain step.
uint64_t OracleSlotHash(const Record& record) {
  return ChainStep(ToUnsigned(record.prev_hash), record.token, record.position);
}

// ---------------------------------------------------------------------------------------------
// Write oracle on arbitrary rows, seeds and skipped tokens (spec §9).

TEST(PropertyWrite, StoresEveryNonSkippedTokenAndSkipsNegativeSlots) {
  constexpr int64_t kSlots = 96;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    SCOPED_TRACE(SeedTrace(seed));
    Rng rng(seed);
    CanaryState state(kSlots, /*ring_capacity=*/16, RandomStride(seed));
    rng.FillBytes(state.canary);  // seeds read whatever records are there
    const std::vector<uint8_t> tails = SlotTails(state);
    const RealKvHashMode mode = ModeOf(seed);
    const std::vector<KvSource> sources = RandomSources(rng, kSlots);
    std::vector<int64_t> free_slots(kSlots);  // slot 0 included: the write op writes it
    std::iota(free_slots.begin(), free_slots.end(), 0);
    rng.Shuffle(free_slots);
    auto take_slot = [&] {
      const int64_t slot = free_slots.back();
      free_slots.pop_back();
      return slot;
    };

    const int64_t bs = rng.Uniform(1, 8);
    const int64_t capacity = bs + rng.Uniform(0, 2);
    std::vector<int64_t> offsets = {0};
    std::vector<int64_t> seeds;
    std::vector<int64_t> ids, positions, slots;
    for (int64_t r = 0; r < bs; ++r) {
      seeds.push_back(rng.Chance(0.3) ? -1 : take_slot());
      const int64_t count = rng.Uniform(0, 6);
      for (int64_t i = 0; i < count; ++i) {
        ids.push_back(static_cast<int64_t>(rng.Bits()));
        positions.push_back(rng.Uniform(-10, 1 << 20));
        slots.push_back(rng.Chance(0.2) ? -rng.Uniform(1, int64_t{1} << 40) : take_slot());
      }
      offsets.push_back(Size(ids));
    }
    for (int64_t r = bs; r < capacity; ++r) {
      seeds.push_back(static_cast<int64_t>(rng.Bits()));
      offsets.push_back(static_cast<int64_t>(rng.Bits()));
    }
    for (int64_t pad = rng.Uniform(0, 3); pad > 0 && !free_slots.empty(); --pad) {
      ids.push_back(7);  // padded tokens past offsets[bs] are never written
      positions.push_back(0);
      slots.push_back(take_slot());
    }

    std::vector<Record> model(kSlots);
    for (int64_t s = 0; s < kSlots; ++s) model[s] = state.record(s);
    int64_t written = 0;
    for (int64_t r = 0; r < bs; ++r) {
      uint64_t running = seeds[r] >= 0 ? OracleSlotHash(model[seeds[r]]) : ChainHeadHash();
      for (int64_t i = offsets[r]; i < offsets[r + 1]; ++i) {
        if (slots[i] < 0) continue;  // skipped: the chain does not advance
        ++written;
        model[slots[i]] = Record{ids[i], positions[i], ToSigned(running),
                                 ToSigned(OracleRealKv(sources, mode, slots[i]))};
        running = ChainStep(running, ids[i], positions[i]);
      }
    }

    const HostTensor<int64_t> offsets_t = HostTensor<int64_t>::Of(offsets);
    const HostTensor<int64_t> seeds_t = HostTensor<int64_t>::Of(seeds);
    const HostTensor<int32_t> num_valid_reqs({1}, static_cast<int32_t>(bs));
    const HostTensor<int64_t> ids_t = HostTensor<int64_t>::Of(ids);
    const HostTensor<int64_t> positions_t = HostTensor<int64_t>::Of(positions);
    const HostTensor<int64_t> slots_t = HostTensor<int64_t>::Of(slots);
    WriteArgs args;
    args.context = ContextWith(state, sources, mode);
    args.plan = WritePlanView{offsets_t.view(), seeds_t.view(), num_valid_reqs.view()};
    args.input_ids = ids_t.view();
    args.positions = positions_t.view();
    args.out_cache_loc = slots_t.view();
    Write(args);

    for (int64_t s = 0; s < kSlots; ++s) EXPECT_EQ(state.record(s), model[s]) << "slot " << s;
    EXPECT_EQ(SlotTails(state), tails) << "bytes past 32 of a slot were written";
    EXPECT_EQ(state.write_index[0], 0);
    EXPECT_EQ(state.kernel_run_counter[0], 1);
    EXPECT_EQ(state.slot_run_counter[0], written);
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// A small engine: requests in a req_to_token table of distinct slots, prefill then decode, with
// Plan + Verify + Write every step, an expected-token pool filled by Scatter, and real-KV bytes
// written before each write launch. The model holds what every canary slot must contain.

struct SimConfig {
  uint64_t seed = 0;
  RealKvHashMode mode = RealKvHashMode::kNone;
  bool swa = false;
  int64_t token_offset = 0;
};
std::string ConfigTrace(const SimConfig& c) {
  return SeedTrace(c.seed) + " mode=" + std::to_string(static_cast<int>(c.mode)) +
         (c.swa ? " SWA" : " FULL") + " token_offset=" + std::to_string(c.token_offset);
}

enum class Corruption { kToken, kPosition, kPrevHash, kRealKvHash, kKvByte, kKvByteOutsideFold };
constexpr Corruption kCorruptions[] = {Corruption::kToken,    Corruption::kPosition,
                                       Corruption::kPrevHash, Corruption::kRealKvHash,
                                       Corruption::kKvByte,   Corruption::kKvByteOutsideFold};
const char* CorruptionName(Corruption c) {
  constexpr const char* kNames[] = {"token",        "position", "prev_hash",
                                    "real_kv_hash", "kv byte",  "kv byte outside the fold"};
  return kNames[static_cast<int>(c)];
}

struct RowKey {
  int64_t slot = 0;
  int64_t bits = 0;
  bool operator==(const RowKey&) const = default;
};
std::ostream& operator<<(std::ostream& out, const RowKey& k) {
  return out << "{slot " << k.slot << ", bits " << k.bits << "}";
}

class EngineSim {
 public:
  static constexpr int64_t kReqRows = 9;  // row 0 is the padding row
  static constexpr int64_t kWidth = 40;
  static constexpr int64_t kFullSlots = 400;
  static constexpr int64_t kSwaSlots = 448;

  explicit EngineSim(const SimConfig& config)
      : config_(config),
        rng_(config.seed),
        num_slots_(config.swa ? kSwaSlots : kFullSlots),
        state_(num_slots_, /*ring_capacity=*/16, RandomStride(config.seed)),
        model_(num_slots_),
        req_to_token_({kReqRows, kWidth}),
        pool_({kReqRows, kWidth + 1}) {
    for (int64_t row = kReqRows - 1; row >= 1; --row) free_rows_.push_back(row);
    for (int64_t slot = 1; slot < kFullSlots; ++slot) free_slots_.push_back(slot);
    rng_.Shuffle(free_slots_);
    if (config.swa) {
      window_ = rng_.Uniform(1, 12);
      std::vector<int64_t> group_slots(kSwaSlots - 1);
      std::iota(group_slots.begin(), group_slots.end(), 1);
      rng_.Shuffle(group_slots);
      lut_ = {0};  // padded tokens' dummy slot 0 stays 0
      lut_.insert(lut_.end(), group_slots.begin(), group_slots.begin() + kFullSlots - 1);
    }
    sources_ = RandomSources(rng_, num_slots_);
    FillSlotTails(rng_, state_);
    tails_ = SlotTails(state_);
  }

  // One forward: admit, plan, verify (must be clean), write (must match the model).
  void Step() {
    RetireFinished();
    AdmitNew();
    const std::vector<Row> batch = ChooseBatch();
    const Forward forward = AllocateForward(batch);
    const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/false);
    const int64_t total = Size(OraclePlan(in).entries);
    const PlanBuffers plan = SentinelBuffers(total + rng_.Uniform(1, 4), Size(batch) + 1);
    PlanCall(in).Fused(plan, rng_.Chance(0.5));
    ExpectPlanMatchesOracle(in, plan);
    ExpectCleanVerify(plan.verify(), total, rng_.Chance(0.5));
    ExpectClampedCountsOnTightPlan(plan, total);
    WriteKv(forward);
    WriteAndExpectModel(plan, forward);
    for (const Row& row : batch) {
      if (row.req >= 0) live_[row.req].len += row.extend;
    }
  }

  // After a clean history: corrupts one field of one record at a time and checks exactly which
  // verify entries report it, with which bits.
  void CheckSingleFieldCorruptions() {
    const std::vector<Row> batch = VerifyOnlyBatch();
    if (batch.empty()) return;
    const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/true);
    const int64_t total = Size(OraclePlan(in).entries);
    const PlanBuffers plan = SentinelBuffers(total + 1, Size(batch) + 1);
    PlanCall(in).Fused(plan, false);
    ExpectCleanVerify(plan.verify(), total, true);

    const Request& req = live_[batch[rng_.Uniform(0, Size(batch) - 1)].req];
    const int64_t window_start = config_.swa ? std::max<int64_t>(req.len - window_, 0) : 0;
    const int64_t p = rng_.Uniform(std::max<int64_t>(window_start - 1, 0), req.len - 1);
    const int64_t slot = CanarySlot(req_to_token_.at(req.rp, p));
    const bool slot_verified = p >= window_start;
    const int64_t successor = p + 1 < req.len ? CanarySlot(req_to_token_.at(req.rp, p + 1)) : -1;
    const bool check_token = rng_.Chance(0.5);
    SCOPED_TRACE("corrupted slot " + std::to_string(slot) + " at position " + std::to_string(p));

    for (Corruption corruption : kCorruptions) {
      SCOPED_TRACE(CorruptionName(corruption));
      const HostTensor<uint8_t> canary_before = state_.canary;
      const std::vector<KvSource> sources_before = sources_;
      if (!Corrupt(corruption, slot)) continue;
      const std::vector<RowKey> expected =
          ExpectedRows(corruption, slot_verified ? slot : -1, successor, check_token);
      state_.write_index[0] = 0;
      RunVerify(plan.verify(), check_token);
      const std::vector<ViolationRow> rows = state_.rows();
      std::vector<RowKey> keys;
      for (const ViolationRow& row : rows) keys.push_back(RowKey{row.slot, row.fail_reason_bits});
      EXPECT_EQ(keys, expected);
      ExpectRowColumns(rows, check_token, slot);
      if (corruption == Corruption::kPosition) ExpectOverflowedPlanChecksNothing(in, total);
      Restore(canary_before, sources_before);
    }
    state_.write_index[0] = 0;
  }

  // A verify-only plan of every live request (prefix = its length) must record nothing.
  void ExpectFinalVerifyClean() {
    const std::vector<Row> batch = VerifyOnlyBatch();
    const PlanInputs in = InputsOf(batch, /*all_tokens_known=*/true);
    const int64_t total = Size(OraclePlan(in).entries);
    const PlanBuffers plan = SentinelBuffers(total + 1, Size(batch) + 1);
    PlanCall(in).Fused(plan, false);
    ExpectCleanVerify(plan.verify(), total, true);
  }

 private:
  struct Request {
    int64_t rp = 0;
    std::vector<int64_t> tokens;  // the record at position p carries tokens[p + token_offset]
    int64_t target = 0;           // final KV length
    int64_t len = 0;              // KV tokens written so far
    uint64_t running = ChainHeadHash();  // oracle running hash after position len - 1
  };
  struct Row {
    int64_t req = -1;  // index into live_, -1 for a padding row
    int64_t rp = 0, prefix = 0, extend = 0;
  };
  struct Forward {
    std::vector<int64_t> ids, positions, full_slots, owners;  // owners: live_ index, -1 = pad
  };

  int64_t CanarySlot(int64_t full_slot) const { return config_.swa ? lut_[full_slot] : full_slot; }

  void RetireFinished() {
    for (size_t i = 0; i < live_.size();) {
      Request& req = live_[i];
      if (req.len < req.target) {
        ++i;
        continue;
      }
      for (int64_t p = 0; p < req.len; ++p) free_slots_.push_back(req_to_token_.at(req.rp, p));
      free_rows_.push_back(req.rp);
      live_.erase(live_.begin() + i);
    }
  }

  // New requests take free rows; their tokens go into the pool through Scatter.
  void AdmitNew() {
    std::vector<int64_t> flat, offsets = {0}, rps;
    while (!free_rows_.empty() && (live_.empty() || rng_.Chance(0.5))) {
      Request req;
      req.rp = free_rows_.back();
      free_rows_.pop_back();
      req.target = rng_.Uniform(1, kWidth);
      for (int64_t i = 0; i < req.target + config_.token_offset; ++i) {
        req.tokens.push_back(rng_.Uniform(0, 50000));
      }
      flat.insert(flat.end(), req.tokens.begin(), req.tokens.end());
      offsets.push_back(Size(flat));
      rps.push_back(req.rp);
      live_.push_back(std::move(req));
    }
    const HostTensor<int64_t> flat_t = HostTensor<int64_t>::Of(flat);
    const HostTensor<int64_t> offsets_t = HostTensor<int64_t>::Of(offsets);
    const HostTensor<int64_t> rps_t = HostTensor<int64_t>::Of(rps);
    Scatter(ScatterArgs{flat_t.view(), offsets_t.view(), rps_t.view(), pool_.view()});
  }

  // Live requests in random order (prefill chunks, decodes, verify-only rows, some sitting out)
  // with padding rows interleaved.
  std::vector<Row> ChooseBatch() {
    std::vector<int64_t> order(live_.size());
    std::iota(order.begin(), order.end(), 0);
    rng_.Shuffle(order);
    std::vector<Row> batch;
    for (int64_t i : order) {
      if (rng_.Chance(0.2)) continue;
      if (rng_.Chance(0.3)) batch.push_back(Row{-1, 0, rng_.Uniform(0, 5), rng_.Uniform(0, 3)});
      const Request& req = live_[i];
      const int64_t remaining = req.target - req.len;
      int64_t extend = 1;
      if (req.len == 0 || rng_.Chance(0.25)) {
        extend = rng_.Uniform(1, std::min<int64_t>(remaining, 12));
      }
      if (req.len > 0 && rng_.Chance(0.15)) extend = 0;
      batch.push_back(Row{i, req.rp, req.len, extend});
    }
    return batch;
  }

  // Rows of every live request with KV, prefix = its length, extend 0.
  std::vector<Row> VerifyOnlyBatch() const {
    std::vector<Row> batch;
    for (int64_t i = 0; i < Size(live_); ++i) {
      if (live_[i].len > 0) batch.push_back(Row{i, live_[i].rp, live_[i].len, 0});
    }
    return batch;
  }

  // Allocates the slots of every token the batch writes, then appends padded tokens.
  Forward AllocateForward(const std::vector<Row>& batch) {
    Forward forward;
    for (const Row& row : batch) {
      if (row.req < 0) continue;
      const Request& req = live_[row.req];
      for (int64_t pos = row.prefix; pos < row.prefix + row.extend; ++pos) {
        const int64_t slot = free_slots_.back();
        free_slots_.pop_back();
        req_to_token_.at(req.rp, pos) = static_cast<int32_t>(slot);
        forward.ids.push_back(req.tokens[pos + config_.token_offset]);
        forward.positions.push_back(pos);
        forward.full_slots.push_back(slot);
        forward.owners.push_back(row.req);
      }
    }
    for (int64_t pad = rng_.Uniform(0, 3); pad > 0; --pad) {
      forward.ids.push_back(rng_.Uniform(0, 50000));
      forward.positions.push_back(rng_.Uniform(0, kWidth));
      forward.full_slots.push_back(0);
      forward.owners.push_back(-1);
    }
    return forward;
  }

  // The plan inputs of a batch. Unless `all_tokens_known`, each row's pool row is valid only up
  // to a random length, so some entries expect token -1 (not checked).
  PlanInputs InputsOf(const std::vector<Row>& batch, bool all_tokens_known) {
    PlanInputs in;
    for (const Row& row : batch) {
      in.rp.push_back(row.rp);
      in.prefix.push_back(row.prefix);
      in.extend.push_back(row.extend);
      const int64_t known = row.req < 0 ? 0 : Size(live_[row.req].tokens);
      in.valid_lens.push_back(all_tokens_known ? known : rng_.Uniform(0, known));
    }
    in.req_to_token = req_to_token_;
    in.window = window_;
    in.lut = lut_;
    in.has_pool = true;
    in.pool = pool_;
    in.token_offset = config_.token_offset;
    return in;
  }

  void RunVerify(const VerifyPlanView& plan, bool check_token) {
    Verify(VerifyArgs{ContextWith(state_, sources_, config_.mode), plan, check_token});
  }

  // A consistent buffer: nothing recorded, records untouched, counters bumped.
  void ExpectCleanVerify(const VerifyPlanView& plan, int64_t total, bool check_token) {
    ByteSnapshot canary(state_.canary);
    const int64_t kernels = state_.kernel_run_counter[0];
    const int64_t slots = state_.slot_run_counter[0];
    RunVerify(plan, check_token);
    EXPECT_EQ(state_.write_index[0], 0) << "first row " << state_.ring.values()[1];
    EXPECT_TRUE(canary.Unchanged()) << "verify wrote the canary buffer";
    EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
    EXPECT_EQ(state_.slot_run_counter[0], slots + total);
  }

  // The plan's first `total` entries as a tight plan with a random device count: the slot counter
  // grows by the count clamped to [0, total] (D2).
  void ExpectClampedCountsOnTightPlan(const PlanBuffers& plan, int64_t total) {
    if (total == 0) return;
    const HostTensor<int32_t> num_valid({1}, static_cast<int32_t>(rng_.Uniform(-3, total + 3)));
    const HostTensor<int32_t> enable({1}, 1);
    const VerifyPlanView tight{
        plan.slots.view({total}), plan.tokens.view({total}), plan.positions.view({total}),
        plan.prevs.view({total}), num_valid.view(),          enable.view()};
    const int64_t slots = state_.slot_run_counter[0];
    RunVerify(tight, false);
    EXPECT_EQ(state_.write_index[0], 0);
    EXPECT_EQ(state_.slot_run_counter[0], slots + std::clamp<int64_t>(num_valid[0], 0, total));
  }

  // Overflow (capacity one short): enable 0, so only kernel_run_counter moves, even though the
  // buffer is corrupt right now.
  void ExpectOverflowedPlanChecksNothing(const PlanInputs& in, int64_t total) {
    if (total < 2) return;
    const PlanBuffers overflowed = SentinelBuffers(total - 1, in.bs() + 1);
    PlanCall(in).Fused(overflowed, false);
    ASSERT_EQ(overflowed.enable[0], 0);
    const int32_t write_index = state_.write_index[0];
    const int64_t kernels = state_.kernel_run_counter[0];
    const int64_t slots = state_.slot_run_counter[0];
    RunVerify(overflowed.verify(), true);
    EXPECT_EQ(state_.write_index[0], write_index);
    EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
    EXPECT_EQ(state_.slot_run_counter[0], slots);
  }

  // The engine writes the KV of this forward's tokens before the write op runs.
  void WriteKv(const Forward& forward) {
    for (int64_t i = 0; i < Size(forward.ids); ++i) {
      if (forward.owners[i] < 0) continue;
      const int64_t slot = CanarySlot(forward.full_slots[i]);
      for (KvSource& source : sources_) {
        uint8_t* strip = source.bytes.data() + source.StripOffset(slot);
        for (int64_t b = 0; b < source.bytes_per_token; ++b) strip[b] = rng_.Uniform(0, 255);
      }
    }
  }

  HostTensor<int64_t> OutCacheLoc(const Forward& forward) const {
    const HostTensor<int64_t> full = HostTensor<int64_t>::Of(forward.full_slots);
    if (!config_.swa) return full;
    const HostTensor<int64_t> lut = HostTensor<int64_t>::Of(lut_);
    HostTensor<int64_t> translated({Size(forward.full_slots)});
    SwaTranslate(SwaTranslateArgs{full.view(), lut.view(), translated.view()});
    return translated;
  }

  void WriteAndExpectModel(const PlanBuffers& plan, const Forward& forward) {
    const HostTensor<int64_t> ids = HostTensor<int64_t>::Of(forward.ids);
    const HostTensor<int64_t> positions = HostTensor<int64_t>::Of(forward.positions);
    const HostTensor<int64_t> loc = OutCacheLoc(forward);
    WriteArgs args;
    args.context = ContextWith(state_, sources_, config_.mode);
    args.plan = plan.write();
    args.input_ids = ids.view();
    args.positions = positions.view();
    args.out_cache_loc = loc.view();
    args.enable_write_input_assert = rng_.Chance(0.5);
    if (args.enable_write_input_assert) {
      args.expected_input_tokens = ids.view();
      args.expected_input_positions = positions.view();
    }
    state_.chain_assert[0] = rng_.Chance(0.5) ? 1 : 0;
    const int64_t kernels = state_.kernel_run_counter[0];
    const int64_t slots = state_.slot_run_counter[0];
    Write(args);

    int64_t written = 0;
    for (int64_t i = 0; i < Size(forward.ids); ++i) {
      if (forward.owners[i] < 0) continue;
      Request& req = live_[forward.owners[i]];
      const int64_t slot = loc[i];
      model_[slot] = Record{ids[i], positions[i], ToSigned(req.running),
                            ToSigned(OracleRealKv(sources_, config_.mode, slot))};
      req.running = ChainStep(req.running, ids[i], positions[i]);
      ++written;
    }
    EXPECT_EQ(state_.write_index[0], 0) << "first row " << state_.ring.values()[1];
    EXPECT_EQ(state_.kernel_run_counter[0], kernels + 1);
    EXPECT_EQ(state_.slot_run_counter[0], slots + written);
    for (int64_t s = 0; s < num_slots_; ++s) {
      ASSERT_EQ(state_.record(s), model_[s]) << "slot " << s;
    }
    EXPECT_EQ(SlotTails(state_), tails_) << "bytes past 32 of a slot were written";
  }

  // Applies one corruption to `slot`; false when it does not apply to this configuration.
  bool Corrupt(Corruption corruption, int64_t slot) {
    Record record = state_.record(slot);
    const int64_t flip = rng_.Uniform(1, 1000);
    switch (corruption) {
      case Corruption::kToken:
        record.token ^= flip;
        break;
      case Corruption::kPosition:
        record.position += flip;
        break;
      case Corruption::kPrevHash:
        record.prev_hash ^= flip;
        break;
      case Corruption::kRealKvHash:
        record.real_kv_hash ^= flip;
        break;
      case Corruption::kKvByte:
      case Corruption::kKvByteOutsideFold:
        return CorruptKvByte(corruption, slot);
    }
    state_.set_record(slot, record);
    return true;
  }

  // Flips one byte of one source's strip of `slot`, inside or outside the folded range.
  bool CorruptKvByte(Corruption corruption, int64_t slot) {
    KvSource& source = sources_[rng_.Uniform(0, Size(sources_) - 1)];
    const int64_t fold = FoldBytes(source, config_.mode);
    int64_t offset = 0;
    if (corruption == Corruption::kKvByte) {
      offset = rng_.Uniform(0, std::max<int64_t>(fold, 16) - 1);  // mode NONE: folds nothing
    } else {
      if (fold >= source.bytes_per_token) return false;
      offset = rng_.Uniform(fold, source.bytes_per_token - 1);
    }
    source.bytes.data()[source.StripOffset(slot) + offset] ^= rng_.Uniform(1, 255);
    return true;
  }

  // The rows verify must record, in entry order: the corrupted slot's own entry (when verified,
  // i.e. verified_slot >= 0), then its successor's chain check (when it has one).
  std::vector<RowKey> ExpectedRows(Corruption corruption, int64_t verified_slot, int64_t successor,
                                   bool check_token) const {
    std::vector<RowKey> rows;
    const int64_t own_bits = OwnBits(corruption, check_token);
    if (verified_slot >= 0 && own_bits != 0) rows.push_back(RowKey{verified_slot, own_bits});
    const bool changes_slot_hash = corruption == Corruption::kToken ||
                                   corruption == Corruption::kPosition ||
                                   corruption == Corruption::kPrevHash;
    if (changes_slot_hash && successor >= 0) {
      rows.push_back(RowKey{successor, FailReason::kVerifyChainHashMismatch});
    }
    return rows;
  }

  // Puts the canary buffer and the KV bytes back (in place: views point at them).
  void Restore(const HostTensor<uint8_t>& canary, const std::vector<KvSource>& sources) {
    std::copy(canary.values().begin(), canary.values().end(), state_.canary.values().begin());
    for (size_t i = 0; i < sources_.size(); ++i) {
      std::copy(sources[i].bytes.values().begin(), sources[i].bytes.values().end(),
                sources_[i].bytes.values().begin());
    }
  }

  // The bits the corrupted slot's own entry reports.
  int64_t OwnBits(Corruption corruption, bool check_token) const {
    switch (corruption) {
      case Corruption::kToken:
        return check_token ? FailReason::kVerifyTokenMismatch : 0;
      case Corruption::kPosition:
        return FailReason::kVerifyPositionMismatch;
      case Corruption::kPrevHash:
        return FailReason::kVerifyChainHashMismatch;
      case Corruption::kRealKvHash:
        return FailReason::kVerifyRealKvHashMismatch;
      case Corruption::kKvByte:
        return config_.mode == RealKvHashMode::kNone ? 0 : FailReason::kVerifyRealKvHashMismatch;
      case Corruption::kKvByteOutsideFold:
        return 0;
    }
    return 0;
  }

  // A verify row reports the stored token, position and prev_hash of its slot (spec §5).
  // Every column of a verify row (spec §5, §8): the stored record's fields, the plan's token (-1
  // with the check off) and the prev_hash the chain expects; only `corrupted_slot` differs from
  // the model.
  void ExpectRowColumns(const std::vector<ViolationRow>& rows, bool check_token,
                        int64_t corrupted_slot) const {
    for (const ViolationRow& row : rows) {
      const Record stored = state_.record(row.slot);
      EXPECT_EQ(row.kernel_kind, static_cast<int64_t>(CanaryLaunchTag::kTailKFull));
      EXPECT_EQ(row.position, stored.position);
      EXPECT_EQ(row.stored_token, stored.token);
      EXPECT_EQ(row.expected_token, check_token ? model_[row.slot].token : -1);
      EXPECT_EQ(row.stored_chain_hash, stored.prev_hash);
      int64_t expected_aux = stored.prev_hash;  // the chain holds or is unchecked
      if ((row.fail_reason_bits & FailReason::kVerifyChainHashMismatch) != 0) {
        expected_aux = row.slot == corrupted_slot
                           ? model_[row.slot].prev_hash
                           : ToSigned(OracleSlotHash(state_.record(corrupted_slot)));
      }
      EXPECT_EQ(row.expected_aux, expected_aux);
    }
  }

  SimConfig config_;
  Rng rng_;
  int64_t num_slots_;
  CanaryState state_;
  std::vector<Record> model_;   // what every canary slot must hold
  std::vector<uint8_t> tails_;  // bytes [32, stride) of every slot, never written
  HostTensor<int32_t> req_to_token_;
  HostTensor<int32_t> pool_;
  int64_t window_ = 0;
  std::vector<int64_t> lut_;  // full slot -> SWA slot, injective; empty for FULL
  std::vector<KvSource> sources_;
  std::vector<Request> live_;
  std::vector<int64_t> free_rows_, free_slots_;
};

// Every (mode, FULL/SWA, target/draft) configuration, `seeds_per_config` seeds each.
std::vector<SimConfig> SimConfigs(int seeds_per_config) {
  std::vector<SimConfig> configs;
  uint64_t seed = 7000;
  for (int mode = 0; mode < 3; ++mode) {
    for (bool swa : {false, true}) {
      for (int64_t token_offset : {0, 1}) {
        for (int i = 0; i < seeds_per_config; ++i) {
          configs.push_back(SimConfig{seed++, ModeOf(mode), swa, token_offset});
        }
      }
    }
  }
  return configs;
}

TEST(PropertyEngine, WriteThenVerifyRoundTripNeverRecordsAViolation) {
  for (const SimConfig& config : SimConfigs(6)) {
    SCOPED_TRACE(ConfigTrace(config));
    EngineSim sim(config);
    for (int step = 0; step < 10 && !HasFailure(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      sim.Step();
    }
    sim.ExpectFinalVerifyClean();
    if (HasFailure()) return;
  }
}

TEST(PropertyEngine, SingleFieldCorruptionFlagsExactlyTheAffectedEntries) {
  for (const SimConfig& config : SimConfigs(5)) {
    SCOPED_TRACE(ConfigTrace(config));
    EngineSim sim(config);
    for (int step = 0; step < 6 && !HasFailure(); ++step) sim.Step();
    sim.CheckSingleFieldCorruptions();
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace kvcanary
