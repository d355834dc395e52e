#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sim/compressed_state.h"

namespace kvcanary::sim {
namespace {

// What FullSlotsNaming answers, by the definition: every full slot whose entry names the slot.
std::vector<int64_t> ScanNaming(const CompressedState& state, int64_t full_slots, int64_t slot) {
  std::vector<int64_t> full;
  if (slot <= 0) return full;
  for (int64_t s = 1; s <= full_slots; ++s) {
    if (state.Entry(s) == slot) full.push_back(s);
  }
  return full;
}

TEST(CompressedState, AsBuiltEachCompressedSlotIsNamedByTheSlotThatClosesIt) {
  constexpr int64_t kFull = 30, kRatio = 4;
  const CompressedState state(Device::CPU(), kFull, kRatio, 16, nullptr);
  EXPECT_EQ(state.FullSlotsNaming(1), (std::vector<int64_t>{7}));
  EXPECT_TRUE(state.FullSlotsNaming(7).empty());   // its closing slot, 31, lies past the pool
  EXPECT_TRUE(state.FullSlotsNaming(0).empty());   // the padding slot: none
  EXPECT_TRUE(state.FullSlotsNaming(99).empty());  // past the pool: none
  for (int64_t c = -1; c <= state.num_slots() + 1; ++c) {
    EXPECT_EQ(state.FullSlotsNaming(c), ScanNaming(state, kFull, c)) << c;
  }
}

TEST(CompressedState, EditedEntriesAreFoundAscendingAndRestoredOnesForgotten) {
  constexpr int64_t kFull = 64, kRatio = 4;
  CompressedState state(Device::CPU(), kFull, kRatio, 16, nullptr);
  state.SetEntry(2, 3);   // below 3's own closing slot (15)
  state.SetEntry(40, 3);  // above it
  EXPECT_EQ(state.FullSlotsNaming(3), (std::vector<int64_t>{2, 15, 40}));
  state.SetEntry(15, 0);  // its closing slot now closes none
  EXPECT_EQ(state.FullSlotsNaming(3), (std::vector<int64_t>{2, 40}));
  state.SetEntry(15, 3);  // restored: as built again
  state.SetEntry(2, 0);
  EXPECT_EQ(state.FullSlotsNaming(3), (std::vector<int64_t>{15, 40}));
}

TEST(CompressedState, NamingEqualsAScanOfTheTableUnderRandomEdits) {
  std::mt19937_64 rng(20261206);
  for (int64_t ratio : {2, 3, 4, 8}) {
    const int64_t full = 97;
    CompressedState state(Device::CPU(), full, ratio, 8, nullptr);
    for (int edit = 0; edit < 300; ++edit) {
      const int64_t slot = 1 + static_cast<int64_t>(rng() % full);
      // Mostly another compressed slot, sometimes none or the one it closes as built.
      const int64_t pick = static_cast<int64_t>(rng() % 8);
      const int64_t value = pick == 0   ? 0
                            : pick == 1 ? state.ClosedBy(slot)
                                        : static_cast<int64_t>(rng() % state.num_slots());
      state.SetEntry(slot, value);
      for (int64_t c = 0; c < state.num_slots(); ++c) {
        ASSERT_EQ(state.FullSlotsNaming(c), ScanNaming(state, full, c))
            << "ratio " << ratio << " edit " << edit << " compressed slot " << c;
      }
    }
  }
}

}  // namespace
}  // namespace kvcanary::sim
