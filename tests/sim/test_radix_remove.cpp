// Tests for the radix cache's quarantine support: ResidentNodesHolding finds the cached nodes that
// hold failing slots, and Remove drops such a node with its whole subtree.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "sim/radix_cache.h"

namespace kvcanary::sim {
namespace {

using Ids = std::vector<int64_t>;
using NodeId = RadixCache::NodeId;

Ids Sorted(Ids ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The tree [1 2] -> {[3 4] -> [5 6], [7 8]} on device slots 10 11 | 12 13 | 15 16 | 17 18.
struct FourNodes {
  RadixCache cache;
  NodeId head = -1, mid = -1, leaf = -1, side = -1;
  FourNodes() {
    cache.Insert({1, 2, 3, 4, 5, 6}, {10, 11, 12, 13, 15, 16});
    cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});  // splits before 5
    cache.Insert({1, 2, 7, 8}, {10, 11, 17, 18});  // splits before 3
    leaf = cache.MatchPrefix({1, 2, 3, 4, 5, 6}).last_node;
    mid = cache.Parent(leaf);
    head = cache.Parent(mid);
    side = cache.MatchPrefix({1, 2, 7, 8}).last_node;
  }
};

TEST(RadixRemove, TheTreeOfTheFixtureIsAsDescribed) {
  FourNodes t;
  EXPECT_EQ(t.cache.Key(t.head), Ids({1, 2}));
  EXPECT_EQ(t.cache.Key(t.mid), Ids({3, 4}));
  EXPECT_EQ(t.cache.Key(t.leaf), Ids({5, 6}));
  EXPECT_EQ(t.cache.Key(t.side), Ids({7, 8}));
  EXPECT_EQ(t.cache.Parent(t.side), t.head);
  EXPECT_EQ(t.cache.Parent(t.head), RadixCache::kRoot);
  EXPECT_EQ(t.cache.TotalCachedTokens(), 8);
}

TEST(RadixRemove, ResidentNodesHoldingNamesEachNodeOnce) {
  FourNodes t;
  EXPECT_EQ(t.cache.ResidentNodesHolding({12}), std::vector<NodeId>({t.mid}));
  EXPECT_EQ(Sorted(t.cache.ResidentNodesHolding({11, 16, 15, 10})), Sorted({t.head, t.leaf}));
  EXPECT_TRUE(t.cache.ResidentNodesHolding({14, 99}).empty());
  EXPECT_TRUE(t.cache.ResidentNodesHolding({}).empty());
}

TEST(RadixRemove, ResidentNodesHoldingSkipsHostOnlyNodes) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  const NodeId node = cache.MatchPrefix({1, 2, 3}).last_node;
  cache.Evict(3, [](NodeId, const Ids&) { return Ids{100, 101, 102}; });
  ASSERT_TRUE(cache.IsHostOnly(node));
  EXPECT_TRUE(cache.ResidentNodesHolding({10, 11, 12, 100}).empty());
}

TEST(RadixRemove, RemoveReturnsTheSlotsOfTheNodeAndItsDescendants) {
  FourNodes t;
  EXPECT_EQ(Sorted(t.cache.Remove(t.mid)), Ids({12, 13, 15, 16}));
  t.cache.TEST_CheckInvariants();
  EXPECT_EQ(t.cache.TotalCachedTokens(), 4);
  EXPECT_EQ(t.cache.EvictableTokens(), 4);
  EXPECT_EQ(t.cache.NumNodes(), 3);  // the root, [1 2] and [7 8]
  EXPECT_EQ(t.cache.Children(t.head), std::vector<NodeId>({t.side}));
  // The removed prefix is no longer matched past [1 2]; the sibling branch still is.
  EXPECT_EQ(t.cache.MatchPrefix({1, 2, 3, 4, 5, 6}).slots, Ids({10, 11}));
  EXPECT_EQ(t.cache.MatchPrefix({1, 2, 7, 8}).slots, Ids({10, 11, 17, 18}));
  t.cache.TEST_CheckInvariants();
}

TEST(RadixRemove, RemovingTheTopNodeEmptiesTheCache) {
  FourNodes t;
  EXPECT_EQ(Sorted(t.cache.Remove(t.head)), Ids({10, 11, 12, 13, 15, 16, 17, 18}));
  EXPECT_EQ(t.cache.TotalCachedTokens(), 0);
  EXPECT_EQ(t.cache.EvictableTokens(), 0);
  EXPECT_EQ(t.cache.NumNodes(), 1);
  EXPECT_TRUE(t.cache.MatchPrefix({1, 2, 3}).slots.empty());
  t.cache.TEST_CheckInvariants();
  // The freed ids are reused, and the cache works as new.
  EXPECT_TRUE(t.cache.Insert({1, 2}, {20, 21}).empty());
  EXPECT_EQ(t.cache.MatchPrefix({1, 2}).slots, Ids({20, 21}));
  t.cache.TEST_CheckInvariants();
}

TEST(RadixRemove, EvictableTokensOfALockedSiblingStayLocked) {
  FourNodes t;
  t.cache.Lock(t.side);  // pins [1 2] and [7 8]
  EXPECT_EQ(t.cache.EvictableTokens(), 4);
  EXPECT_EQ(Sorted(t.cache.Remove(t.mid)), Ids({12, 13, 15, 16}));
  EXPECT_EQ(t.cache.TotalCachedTokens(), 4);
  EXPECT_EQ(t.cache.EvictableTokens(), 0);
  t.cache.TEST_CheckInvariants();
  t.cache.Unlock(t.side);
  EXPECT_EQ(t.cache.EvictableTokens(), 4);
  t.cache.TEST_CheckInvariants();
}

// A refused Remove leaves the fixture's tree exactly as it was.
void ExpectRefusedAndUnchanged(FourNodes& t, NodeId node) {
  const int64_t cached = t.cache.TotalCachedTokens();
  const int64_t evictable = t.cache.EvictableTokens();
  const int64_t nodes = t.cache.NumNodes();
  EXPECT_THROW(t.cache.Remove(node), std::logic_error) << node;
  EXPECT_EQ(t.cache.TotalCachedTokens(), cached);
  EXPECT_EQ(t.cache.EvictableTokens(), evictable);
  EXPECT_EQ(t.cache.NumNodes(), nodes);
  t.cache.TEST_CheckInvariants();
}

TEST(RadixRemove, RefusesTheRootAndLockedNodes) {
  FourNodes t;
  ExpectRefusedAndUnchanged(t, RadixCache::kRoot);
  t.cache.Lock(t.leaf);
  ExpectRefusedAndUnchanged(t, t.leaf);
  ExpectRefusedAndUnchanged(t, t.mid);   // a locked descendant
  ExpectRefusedAndUnchanged(t, t.head);
  EXPECT_EQ(t.cache.MatchPrefix({1, 2, 3, 4, 5, 6}).slots, Ids({10, 11, 12, 13, 15, 16}));
  t.cache.Unlock(t.leaf);
  EXPECT_EQ(Sorted(t.cache.Remove(t.mid)), Ids({12, 13, 15, 16}));
}

TEST(RadixRemove, RefusesAHostOnlyNode) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({1, 2, 3, 4, 5}, {10, 11, 12, 14, 15});
  const NodeId leaf = cache.MatchPrefix({1, 2, 3, 4, 5}).last_node;
  cache.Evict(2, [](NodeId, const Ids&) { return Ids{100, 101}; });
  ASSERT_TRUE(cache.IsHostOnly(leaf));
  EXPECT_THROW(cache.Remove(leaf), std::logic_error);
  EXPECT_EQ(cache.HostOnlyTokens(), 2);
  EXPECT_EQ(cache.TotalCachedTokens(), 3);
  EXPECT_TRUE(cache.TakeReleasedHostSlots().empty());
  cache.TEST_CheckInvariants();
}

TEST(RadixRemove, DropsHostOnlyDescendantsAndReleasesTheirHostSlots) {
  RadixCache cache;
  cache.EnableHostTier(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({1, 2, 3, 4, 5}, {10, 11, 12, 14, 15});
  const NodeId top = cache.MatchPrefix({1, 2, 3}).last_node;
  cache.Evict(2, [](NodeId, const Ids&) { return Ids{100, 101}; });
  ASSERT_EQ(cache.HostOnlyTokens(), 2);
  // Only the resident node's device slots come back; the host copy below it goes to the host pool.
  EXPECT_EQ(Sorted(cache.Remove(top)), Ids({10, 11, 12}));
  EXPECT_EQ(Sorted(cache.TakeReleasedHostSlots()), Ids({100, 101}));
  EXPECT_EQ(cache.HostOnlyTokens(), 0);
  EXPECT_EQ(cache.TotalCachedTokens(), 0);
  EXPECT_EQ(cache.NumNodes(), 1);
  const RadixCache::MatchResult match = cache.MatchPrefix({1, 2, 3, 4, 5});
  EXPECT_TRUE(match.slots.empty());
  EXPECT_EQ(match.host_only_tokens, 0);
  cache.TEST_CheckInvariants();
}

TEST(RadixRemove, PagedRemoveReleasesWholePages) {
  RadixCache cache(4);
  cache.Insert(Ids({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}),
               Ids({40, 41, 42, 43, 44, 45, 46, 47, 52, 53, 54, 55}));
  cache.Insert(Ids({1, 2, 3, 4, 5, 6, 7, 8}), Ids({40, 41, 42, 43, 44, 45, 46, 47}));
  cache.Insert(Ids({1, 2, 3, 4, 20, 21, 22, 23}), Ids({40, 41, 42, 43, 60, 61, 62, 63}));
  const std::vector<NodeId> holding = cache.ResidentNodesHolding({45});
  ASSERT_EQ(holding.size(), 1u);
  EXPECT_EQ(cache.Key(holding[0]), Ids({5, 6, 7, 8}));
  EXPECT_EQ(Sorted(cache.Remove(holding[0])), Ids({44, 45, 46, 47, 52, 53, 54, 55}));
  EXPECT_EQ(cache.TotalCachedTokens(), 8);
  EXPECT_EQ(cache.EvictableTokens(), 8);
  cache.TEST_CheckInvariants();
  EXPECT_EQ(cache.MatchPrefix(Ids({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})).slots,
            Ids({40, 41, 42, 43}));
  EXPECT_EQ(cache.MatchPrefix(Ids({1, 2, 3, 4, 20, 21, 22, 23})).slots,
            Ids({40, 41, 42, 43, 60, 61, 62, 63}));
  cache.TEST_CheckInvariants();
}

}  // namespace
}  // namespace kvcanary::sim
