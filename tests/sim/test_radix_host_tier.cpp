// The radix cache's host tier: evicted nodes backed up to host slots, matched as host-only, and
// loaded back.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "sim/radix_cache.h"

namespace kvcanary::sim {
namespace {

using Ids = std::vector<int64_t>;
using NodeId = RadixCache::NodeId;

// A host pool that hands out host slots 100, 101, ... and records what it backed up.
struct FakeHost {
  int64_t next = 100;
  int64_t capacity = 1000;
  std::vector<std::pair<NodeId, Ids>> backups;
  RadixCache::EvictCallback Callback() {
    return [this](NodeId node, const Ids& device_slots) {
      backups.emplace_back(node, device_slots);
      if (next - 100 + static_cast<int64_t>(device_slots.size()) > capacity) return Ids{};
      Ids host;
      for (size_t i = 0; i < device_slots.size(); ++i) host.push_back(next++);
      return host;
    };
  }
};

// Turns the host tier on and caches the path [1 2 3] -> [4 5] on device slots 10 11 12 and 14 15.
void InsertTwoLevelPath(RadixCache& cache) {
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({1, 2, 3, 4, 5}, {10, 11, 12, 14, 15});
}

TEST(RadixHostTier, AnEvictedNodeStaysAsHostOnly) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  const NodeId node = cache.MatchPrefix({1, 2, 3, 4}).last_node;
  FakeHost host;
  EXPECT_EQ(cache.Evict(4, host.Callback()), Ids({10, 11, 12, 13}));
  ASSERT_EQ(host.backups.size(), 1u);
  EXPECT_EQ(host.backups[0].first, node);
  EXPECT_EQ(host.backups[0].second, Ids({10, 11, 12, 13}));
  EXPECT_TRUE(cache.IsHostOnly(node));
  EXPECT_TRUE(cache.DeviceSlots(node).empty());
  EXPECT_EQ(cache.HostSlots(node), Ids({100, 101, 102, 103}));
  EXPECT_EQ(cache.KeyLength(node), 4);  // the walker still sees the positions it spans
  EXPECT_EQ(cache.TotalCachedTokens(), 0);
  EXPECT_EQ(cache.EvictableTokens(), 0);
  EXPECT_EQ(cache.HostOnlyTokens(), 4);
  EXPECT_EQ(cache.stats().backed_up_tokens, 4);
  // Nothing resident is left to evict.
  EXPECT_EQ(cache.Evict(1, host.Callback()), Ids{});
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, MatchReportsTheHostOnlyTail) {
  RadixCache cache;
  InsertTwoLevelPath(cache);
  FakeHost host;
  EXPECT_EQ(cache.Evict(1, host.Callback()), Ids({14, 15}));  // the leaf [4 5] only
  const auto match = cache.MatchPrefix({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(match.slots, Ids({10, 11, 12}));
  EXPECT_EQ(cache.Key(match.last_node), Ids({1, 2, 3}));
  EXPECT_EQ(match.host_only_tokens, 2);
  ASSERT_EQ(match.host_nodes.size(), 1u);
  EXPECT_EQ(cache.HostSlots(match.host_nodes[0]), Ids({100, 101}));
  EXPECT_EQ(cache.stats().host_hit_tokens, 2);
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, AParentBecomesEvictableOnceItsChildrenAreOnTheHost) {
  RadixCache cache;
  InsertTwoLevelPath(cache);
  FakeHost host;
  EXPECT_EQ(cache.Evict(5, host.Callback()), Ids({14, 15, 10, 11, 12}));
  const auto match = cache.MatchPrefix({1, 2, 3, 4, 5});
  EXPECT_TRUE(match.slots.empty());
  EXPECT_EQ(match.host_only_tokens, 5);
  ASSERT_EQ(match.host_nodes.size(), 2u);
  EXPECT_EQ(cache.KeyLength(match.host_nodes[0]), 3);
  EXPECT_EQ(cache.Parent(match.host_nodes[1]), match.host_nodes[0]);
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, LoadBackMakesTheNodeResidentAgain) {
  RadixCache cache;
  InsertTwoLevelPath(cache);
  FakeHost host;
  cache.Evict(5, host.Callback());
  const auto match = cache.MatchPrefix({1, 2, 3, 4, 5});
  // Top-down only: a child cannot come back before its parent.
  EXPECT_THROW(cache.LoadBack(match.host_nodes[1], {30, 31}), std::logic_error);
  EXPECT_THROW(cache.LoadBack(match.host_nodes[0], {20}), std::logic_error);  // wrong length
  EXPECT_EQ(cache.LoadBack(match.host_nodes[0], {20, 21, 22}), Ids({102, 103, 104}));
  EXPECT_EQ(cache.LoadBack(match.host_nodes[1], {30, 31}), Ids({100, 101}));
  EXPECT_THROW(cache.LoadBack(match.host_nodes[1], {30, 31}), std::logic_error);  // resident
  const auto again = cache.MatchPrefix({1, 2, 3, 4, 5});
  EXPECT_EQ(again.slots, Ids({20, 21, 22, 30, 31}));
  EXPECT_EQ(again.host_only_tokens, 0);
  EXPECT_EQ(cache.TotalCachedTokens(), 5);
  EXPECT_EQ(cache.EvictableTokens(), 5);
  EXPECT_EQ(cache.HostOnlyTokens(), 0);
  EXPECT_EQ(cache.stats().loaded_back_tokens, 5);
  cache.Lock(again.last_node);  // a restored path can be locked like any other
  EXPECT_EQ(cache.EvictableTokens(), 0);
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, APartialMatchSplitsAHostOnlyNodeAndItsHostSlots) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  FakeHost host;
  cache.Evict(4, host.Callback());
  const auto match = cache.MatchPrefix({1, 2, 9});
  EXPECT_EQ(match.host_only_tokens, 2);
  ASSERT_EQ(match.host_nodes.size(), 1u);
  const NodeId head = match.host_nodes[0];
  EXPECT_EQ(cache.HostSlots(head), Ids({100, 101}));
  const auto below = cache.Children(head);
  ASSERT_EQ(below.size(), 1u);
  EXPECT_EQ(cache.HostSlots(below[0]), Ids({102, 103}));
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, InsertRevivesHostOnlyPositionsWithTheNewSlots) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  FakeHost host;
  cache.Evict(3, host.Callback());
  // A request recomputed the prefix: its slots are kept, not freed as duplicates.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4}, {20, 21, 22, 23}), Ids{});
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 4}).slots, Ids({20, 21, 22, 23}));
  EXPECT_EQ(cache.TakeReleasedHostSlots(), Ids({100, 101, 102}));
  EXPECT_EQ(cache.TakeReleasedHostSlots(), Ids{});
  EXPECT_EQ(cache.HostOnlyTokens(), 0);
  EXPECT_EQ(cache.TotalCachedTokens(), 4);
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, ABackupRefusalDropsTheNodeWithItsHostOnlySubtree) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2}, {10, 11});
  cache.Insert({1, 2, 3}, {10, 11, 12});
  FakeHost host;
  host.capacity = 1;  // room for the leaf [3], not for [1 2]
  EXPECT_EQ(cache.Evict(3, host.Callback()), Ids({12, 10, 11}));
  EXPECT_EQ(host.backups.size(), 2u);
  EXPECT_EQ(cache.NumNodes(), 1);
  EXPECT_EQ(cache.HostOnlyTokens(), 0);
  EXPECT_EQ(cache.TakeReleasedHostSlots(), Ids({100}));
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3}).host_only_tokens, 0);
  cache.TEST_CheckInvariants();
}

TEST(RadixHostTier, HostOnlyNodesAreNeverLocked) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2}, {10, 11});
  FakeHost host;
  cache.Evict(2, host.Callback());
  const auto match = cache.MatchPrefix({1, 2});
  EXPECT_THROW(cache.Lock(match.host_nodes[0]), std::logic_error);
  EXPECT_FALSE(cache.IsLocked(match.host_nodes[0], false));
  EXPECT_THROW(cache.EnableHostTier(false), std::logic_error);  // host-only nodes exist
}

TEST(RadixHostTier, WithoutTheHostTierEvictionDrops) {
  RadixCache cache;
  cache.Insert({1, 2}, {10, 11});
  FakeHost host;
  EXPECT_EQ(cache.Evict(2, host.Callback()), Ids({10, 11}));
  EXPECT_EQ(host.backups.size(), 1u);  // told, but its host slots are not kept
  EXPECT_EQ(cache.NumNodes(), 1);
  EXPECT_EQ(cache.HostOnlyTokens(), 0);
}

}  // namespace
}  // namespace kvcanary::sim
