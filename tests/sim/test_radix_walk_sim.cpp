// The simulator's radix cache through the runtime's walker: what a sweep
// verifies is exactly the cached slots, in pre-order, with each slot chained to its predecessor.
#include <gtest/gtest.h>

#include <vector>

#include "kvcanary/runtime/radix_view.h"
#include "sim/radix_cache.h"

namespace kvcanary::sim {
namespace {

using Ids = std::vector<int64_t>;

TEST(RadixCacheWalk, SharedPrefixIsWalkedOnceThenEachBranch) {
  RadixCache cache;
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  cache.Insert({1, 2, 7}, {10, 11, 20});  // splits after [1, 2]
  const runtime::RadixWalk walk = runtime::WalkRadix(cache);
  // [1,2] -> {[3,4], [7]}: children by first token.
  EXPECT_EQ(walk.slot_indices, (Ids{10, 11, 12, 13, 20}));
  EXPECT_EQ(walk.positions, (Ids{0, 1, 2, 3, 2}));
  EXPECT_EQ(walk.prev_slot_indices, (Ids{-1, 10, 11, 12, 11}));
}

TEST(RadixCacheWalk, UnlockedOnlySkipsTheLockedPathButKeepsDepthAndChain) {
  RadixCache cache;
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  cache.Insert({1, 2, 7}, {10, 11, 20});
  const auto match = cache.MatchPrefix({1, 2, 3, 4});
  cache.Lock(match.last_node);  // locks [1,2] and [3,4]
  const runtime::RadixWalk walk = runtime::WalkRadix(cache, /*unlocked_only=*/true);
  EXPECT_EQ(walk.slot_indices, (Ids{20}));
  EXPECT_EQ(walk.positions, (Ids{2}));
  EXPECT_EQ(walk.prev_slot_indices, (Ids{11}));
  cache.Unlock(match.last_node);
  EXPECT_EQ(runtime::WalkRadix(cache, true).size(), 5);
}

TEST(RadixCacheWalk, EvictedLeavesLeaveTheWalk) {
  RadixCache cache;
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({5, 6}, {30, 31});
  cache.MatchPrefix({5, 6});  // most recently used: [1,2,3] goes first
  const Ids freed = cache.Evict(3);
  EXPECT_EQ(freed.size(), 3u);
  const runtime::RadixWalk walk = runtime::WalkRadix(cache);
  EXPECT_EQ(walk.slot_indices, (Ids{30, 31}));
  EXPECT_EQ(walk.prev_slot_indices, (Ids{-1, 30}));
}

}  // namespace
}  // namespace kvcanary::sim
