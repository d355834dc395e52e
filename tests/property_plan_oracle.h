// Seeded randomness and the plan side of the property tests' oracles: the plan oracle, the runner
// of the plan ops (PlanCall), plan buffers at their sentinels and the check of a plan against the
// oracle. Written from SGLang's pseudo-code, never by calling library internals. The tests
// include it through property_oracle.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {

// What plan outputs hold before a call, so "left untouched" is observable.
inline constexpr int64_t kSentinel = 0x5A5A5A5A5A5A5A5ALL;
inline constexpr int32_t kSentinel32 = -7;

inline std::string SeedTrace(uint64_t seed) { return "seed=" + std::to_string(seed); }

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
// Plan oracle, written from SGLang's plan pseudo-code.

struct Entry {
  int64_t slot = 0;
  int64_t prev = 0;
  int64_t position = 0;
  int64_t token = 0;
  bool operator==(const Entry&) const = default;
};
inline std::ostream& operator<<(std::ostream& out, const Entry& e) {
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
  // Sampled verify: K, and the phases passed as verify_phase (empty: absent, phase 0); a row's
  // phase is the entry of its req_pool_index, clamped.
  int64_t sample = 1;
  std::vector<int64_t> phases;
  int64_t bs() const { return Size(rp); }
};

// Whether a sampled verify checks `pos` of a row whose prefix is `prefix`: the positions of every
// K-th run of kVerifySampleRun, (pos / run + phase) % K == 0, and the newest one.
inline bool OracleSampled(const PlanInputs& in, int64_t rp, int64_t prefix, int64_t pos) {
  const int64_t last = Size(in.phases) - 1;
  const int64_t phase = in.phases.empty() ? 0 : in.phases[std::clamp<int64_t>(rp, 0, last)];
  const int64_t k = in.sample;
  const int64_t run = pos / kVerifySampleRun;
  return pos == prefix - 1 || ((run % k) + (phase % k) + 2 * k) % k == 0;
}

struct ExpectedPlan {
  std::vector<Entry> entries;
  std::vector<int64_t> write_offsets;  // [bs + 1]
  std::vector<int64_t> seeds;          // [bs]
};

// rt(row, col): row and column clamped (D4, D7).
inline int64_t Rt(const HostTensor<int32_t>& table, int64_t row, int64_t col) {
  const int64_t rows = table.shape()[0];
  const int64_t width = table.shape()[1];
  row = std::clamp<int64_t>(row, 0, rows - 1);
  col = std::clamp<int64_t>(col, 0, width - 1);
  return table.values()[row * width + col];
}

// tr(x): negatives pass through, indices past the table clamp (D3).
inline int64_t Tr(const std::vector<int64_t>& lut, int64_t x) {
  if (lut.empty() || x < 0) return x;
  return lut[std::min(x, Size(lut) - 1)];
}

inline int64_t OracleExpectedToken(const PlanInputs& in, int64_t r, int64_t position) {
  if (!in.has_pool) return -1;
  const int64_t rp = in.rp[r];
  const int64_t q = position + in.token_offset;
  const int64_t rows = in.pool.shape()[0];
  const int64_t width = in.pool.shape()[1];
  if (q < 0 || q >= in.valid_lens[r] || q >= width || rp < 0 || rp >= rows) return -1;
  return in.pool.values()[rp * width + q];
}

inline ExpectedPlan OraclePlan(const PlanInputs& in) {
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
      if (!OracleSampled(in, rp, p, pos)) continue;
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
        phases_(HostTensor<int64_t>::Of(in.phases)),
        wide_table_({in.req_to_token.shape()[0], Width() + in.req_to_token_pad}) {
    for (int64_t r = 0; r < in.req_to_token.shape()[0]; ++r) {
      for (int64_t c = 0; c < Width(); ++c) {
        wide_table_.at(r, c) = in.req_to_token.values()[r * Width() + c];
      }
    }
  }

  // launch_canary_plan_kernels.
  void Fused(const PlanBuffers& out, bool with_scratch) const {
    HostTensor<int64_t> scratch({in_.bs() + 1}, kSentinel);
    PlanArgs args = ArgsOf(out.verify(), out, out.slots.shape()[0]);
    if (with_scratch) args.verify_offsets_scratch = scratch.view();
    Plan(args);
  }

  // The offsets-only plan (kvcanary addition): stage 1 into `out`'s counts and write plan and
  // into `scratch`; returns the FusedVerify arguments over the same inputs (context left empty).
  FusedVerifyArgs OffsetsOnly(const PlanBuffers& out, const HostTensor<int64_t>& scratch,
                              int64_t verify_capacity) const {
    const VerifyPlanView counts{TensorView(), TensorView(),         TensorView(),
                                TensorView(), out.num_valid.view(), out.enable.view()};
    PlanArgs args = ArgsOf(counts, out, verify_capacity);
    args.verify_offsets_scratch = scratch.view();
    Plan(args);
    return FusedVerifyArgs{.inputs = args.inputs,
                           .verify_offsets_scratch = args.verify_offsets_scratch,
                           .verify_num_valid = out.num_valid.view(),
                           .verify_enable = out.enable.view(),
                           .verify_capacity = verify_capacity};
  }

  // launch_plan_offsets_kernel then launch_plan_entries_kernel, after zeroing write_offsets.
  void Staged(PlanBuffers& out) const {
    std::fill(out.offsets.values().begin(), out.offsets.values().end(), 0);
    HostTensor<int64_t> scratch({std::max(kPlanOffsetsScratchMinLength, in_.bs() + 1)}, kSentinel);
    // Both stages get one PlanInputs, as an engine passes them (stage 1 reads no pool, stage 2
    // no extend_seq_lens).
    PlanOffsets(OffsetsCallOver(out, scratch.view(), Inputs(), out.slots.shape()[0]));

    PlanEntries({.inputs = Inputs(),
                 .verify_offsets_scratch = scratch.view(),
                 .verify_enable = out.enable.view(),
                 .out_verify_slot_indices = out.slots.view(),
                 .out_verify_expected_tokens = out.tokens.view(),
                 .out_verify_expected_positions = out.positions.view(),
                 .out_verify_prev_slot_indices = out.prevs.view()});
  }

 private:
  int64_t Width() const { return in_.req_to_token.shape()[1]; }
  // The plan of `in_` into `verify` and `out`'s write plan, without a scratch.
  PlanArgs ArgsOf(const VerifyPlanView& verify, const PlanBuffers& out, int64_t capacity) const {
    PlanArgs args;
    args.verify_plan_out = verify;
    args.write_plan_out = out.write();
    args.inputs = Inputs();
    args.verify_capacity = capacity;
    return args;
  }
  // Every input `in_` describes: batch, table, window and LUT, token pool.
  ::kvcanary::PlanInputs Inputs() const {
    ::kvcanary::PlanInputs inputs =
        BatchInputs(rp_.view(), prefix_.view(), extend_.view(), Table());
    inputs.swa_window_size = in_.window;
    inputs.full_to_swa_index_mapping = Lut();
    inputs.req_to_verify_expected_tokens = Pool();
    inputs.req_to_verify_expected_tokens_valid_lens = ValidLens();
    inputs.kv_token_id_vs_position_offset = in_.token_offset;
    inputs.verify_sample = in_.sample;
    if (!in_.phases.empty()) inputs.verify_phase = phases_.view();
    return inputs;
  }
  TensorView Table() const {
    return wide_table_.view({in_.req_to_token.shape()[0], Width()},
                            {Width() + in_.req_to_token_pad, 1});
  }
  TensorView Lut() const { return in_.lut.empty() ? TensorView() : lut_.view(); }
  TensorView Pool() const { return in_.has_pool ? in_.pool.view() : TensorView(); }
  TensorView ValidLens() const { return in_.has_pool ? valid_lens_.view() : TensorView(); }

  const PlanInputs& in_;
  HostTensor<int64_t> rp_, prefix_, extend_, lut_, valid_lens_, phases_;
  HostTensor<int32_t> wide_table_;  // req_to_token in the first Width() columns
};

// Plan buffers of the given capacities with every array at its sentinel.
inline PlanBuffers SentinelBuffers(int64_t verify_capacity, int64_t write_capacity) {
  PlanBuffers out(verify_capacity, write_capacity);
  for (HostTensor<int64_t>* t :
       {&out.slots, &out.tokens, &out.positions, &out.prevs, &out.offsets, &out.seeds}) {
    std::fill(t->values().begin(), t->values().end(), kSentinel);
  }
  out.num_valid[0] = out.enable[0] = out.num_valid_reqs[0] = kSentinel32;
  return out;
}

// Loose, tight or one-short verify capacity (the last only when the plan has >= 2 entries).
inline PlanBuffers RandomCapacityBuffers(Rng& rng, const PlanInputs& in) {
  const int64_t total = Size(OraclePlan(in).entries);
  int64_t capacity = total + rng.Uniform(1, 8);
  const int64_t kind = rng.Uniform(0, 2);
  if (kind == 1 && total >= 1) capacity = total;
  if (kind == 2 && total >= 2) capacity = total - 1;
  return SentinelBuffers(capacity, std::max<int64_t>(in.bs() + rng.Uniform(0, 3), 1));
}

inline std::vector<Entry> EntriesOf(const PlanBuffers& out, int64_t n) {
  std::vector<Entry> entries;
  for (int64_t e = 0; e < n; ++e) {
    entries.push_back(Entry{out.slots[e], out.prevs[e], out.positions[e], out.tokens[e]});
  }
  return entries;
}

inline std::vector<int64_t> Range(const HostTensor<int64_t>& t, int64_t begin, int64_t end) {
  return std::vector<int64_t>(t.values().begin() + begin, t.values().begin() + end);
}

// Asserts every output of the plan for `in` in buffers that held the sentinel before the call.
inline void ExpectPlanMatchesOracle(const PlanInputs& in, const PlanBuffers& out) {
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

}  // namespace kvcanary::testing
