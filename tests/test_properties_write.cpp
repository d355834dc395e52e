// Property tests of Write on arbitrary rows, seeds and skipped tokens:
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
// Write oracle on arbitrary rows, seeds and skipped tokens.

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

}  // namespace
}  // namespace kvcanary::testing
