// The seeded cases the fused verify's property tests draw: random plan inputs reaching past every
// edge the ops clamp, records holding the table's chains with a few flipped bytes, and the
// outcome (rows and counters) two runs are compared by.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"

namespace kvcanary::testing {

// Random plan inputs over a pool of `num_slots` slots, reaching past every edge the ops clamp.
inline PlanInputs RandomInputs(Rng& rng, int64_t num_slots) {
  PlanInputs in;
  const int64_t rows = rng.Uniform(1, 8);
  const int64_t width = rng.Uniform(1, 48);
  in.req_to_token = HostTensor<int32_t>({rows, width});
  for (int32_t& slot : in.req_to_token.values()) {
    const int64_t kind = rng.Uniform(0, 19);
    slot = static_cast<int32_t>(kind == 0   ? 0
                                : kind == 1 ? num_slots + rng.Uniform(0, 3)
                                : kind == 2 ? -1
                                            : rng.Uniform(1, num_slots - 1));
  }
  in.req_to_token_pad = rng.Uniform(0, 3);
  const int64_t bs = rng.Uniform(0, 10);
  for (int64_t r = 0; r < bs; ++r) {
    in.rp.push_back(rng.Uniform(0, rows));  // 0 pads; `rows` reads the clamped last row (D7)
    in.prefix.push_back(rng.Chance(0.05) ? -2 : rng.Uniform(0, width + 2));
    in.extend.push_back(rng.Uniform(0, 3));
  }
  if (rng.Chance(0.3)) {
    in.window = rng.Uniform(1, 12);
    in.lut.resize(rng.Uniform(1, num_slots + 3));
    for (int64_t& slot : in.lut) slot = rng.Uniform(-1, num_slots + 2);
  }
  if (rng.Chance(0.6)) {
    in.has_pool = true;
    in.pool = HostTensor<int32_t>({rows + 1, width + 1});
    for (int32_t& token : in.pool.values()) token = static_cast<int32_t>(rng.Uniform(0, 9));
    for (int64_t r = 0; r < bs; ++r) in.valid_lens.push_back(rng.Uniform(0, width + 2));
    in.token_offset = rng.Uniform(0, 1);
  }
  return in;
}

// Writes each table row's chain into `state` (later rows overwrite shared slots, which leaves
// some records inconsistent), then flips a few record bytes.
inline void FillRecords(Rng& rng, const PlanInputs& in, const std::vector<KvSource>& sources,
                        RealKvHashMode mode, CanaryState& state) {
  const int64_t num_slots = state.canary.shape()[0];
  const int64_t rows = in.req_to_token.shape()[0];
  const int64_t width = in.req_to_token.shape()[1];
  for (int64_t rp = 0; rp < rows; ++rp) {
    uint64_t running = ChainHeadHash();
    for (int64_t p = 0; p < width; ++p) {
      const int64_t slot = Tr(in.lut, Rt(in.req_to_token, rp, p));
      if (slot < 0 || slot >= num_slots) continue;
      const int64_t token = rng.Uniform(0, 9);
      state.set_record(
          slot, Record{token, p, ToSigned(running), ToSigned(OracleRealKv(sources, mode, slot))});
      running = ChainStep(running, token, p);
    }
  }
  for (int64_t flips = rng.Uniform(0, 3); flips > 0; --flips) {
    const int64_t slot = rng.Uniform(0, num_slots - 1);
    state.canary.values()[slot * state.canary.shape()[1] + rng.Uniform(0, 31)] ^= 0x10;
  }
}

struct Outcome {
  std::vector<ViolationRow> rows;
  int32_t write_index = 0;
  int64_t slot_runs = 0;
  int64_t kernel_runs = 0;
};
inline Outcome OutcomeOf(const CanaryState& state) {
  return Outcome{state.rows(), state.write_index[0], state.slot_run_counter[0],
                 state.kernel_run_counter[0]};
}
inline void ExpectSameOutcome(const CanaryState& planned, const CanaryState& fused) {
  const Outcome a = OutcomeOf(planned);
  const Outcome b = OutcomeOf(fused);
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.write_index, a.write_index);
  EXPECT_EQ(b.slot_runs, a.slot_runs);
  EXPECT_EQ(b.kernel_runs, a.kernel_runs);
}

}  // namespace kvcanary::testing
