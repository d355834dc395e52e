// Property tests of the plan ops, SWA translation and scatter:
// seeded random valid inputs checked against small oracles written from SGLang's pseudo-code
// (tests/property_oracle.h), never by calling library internals. Every case traces its seed, so a
// failure names the std::mt19937_64 seed that replays it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/kvcanary.h"
#include "property_oracle.h"
#include "testutil.h"

namespace kvcanary::testing {
namespace {

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
// SWA translation and scatter.

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

}  // namespace
}  // namespace kvcanary::testing
