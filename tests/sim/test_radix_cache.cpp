#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "sim/radix_cache.h"

namespace kvcanary::sim {
namespace {

using Ids = std::vector<int64_t>;
using NodeId = RadixCache::NodeId;

// The child of `node` whose key starts with `token`.
NodeId ChildStartingWith(const RadixCache& cache, NodeId node, int64_t token) {
  for (NodeId child : cache.Children(node)) {
    if (cache.Key(child).front() == token) return child;
  }
  ADD_FAILURE() << "no child starting with " << token;
  return -1;
}

TEST(RadixCache, EmptyCacheMatchesNothing) {
  RadixCache cache;
  const auto match = cache.MatchPrefix({1, 2, 3});
  EXPECT_TRUE(match.slots.empty());
  EXPECT_EQ(match.last_node, RadixCache::kRoot);
  EXPECT_EQ(match.host_only_tokens, 0);
  EXPECT_EQ(cache.TotalCachedTokens(), 0);
  EXPECT_TRUE(cache.Children(cache.Root()).empty());
}

TEST(RadixCache, InsertThenMatchTheLongestPrefix) {
  RadixCache cache;
  EXPECT_TRUE(cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13}).empty());
  EXPECT_EQ(cache.TotalCachedTokens(), 4);
  EXPECT_EQ(cache.EvictableTokens(), 4);
  auto full = cache.MatchPrefix({1, 2, 3, 4, 5, 6});
  EXPECT_EQ(full.slots, Ids({10, 11, 12, 13}));
  EXPECT_EQ(cache.Key(full.last_node), Ids({1, 2, 3, 4}));
  EXPECT_TRUE(cache.MatchPrefix({2, 1}).slots.empty());
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, APartialMatchSplitsTheNode) {
  RadixCache cache;
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  ASSERT_EQ(cache.NumNodes(), 2);
  const auto match = cache.MatchPrefix({1, 2, 9});
  EXPECT_EQ(match.slots, Ids({10, 11}));
  EXPECT_EQ(cache.NumNodes(), 3);
  const NodeId head = ChildStartingWith(cache, cache.Root(), 1);
  EXPECT_EQ(head, match.last_node);
  EXPECT_EQ(cache.Key(head), Ids({1, 2}));
  EXPECT_EQ(cache.DeviceSlots(head), Ids({10, 11}));
  const NodeId tail = ChildStartingWith(cache, head, 3);
  EXPECT_EQ(cache.Key(tail), Ids({3, 4}));
  EXPECT_EQ(cache.DeviceSlots(tail), Ids({12, 13}));
  EXPECT_EQ(cache.Depth(tail), 2);
  EXPECT_EQ(cache.TotalCachedTokens(), 4);
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, InsertReturnsTheSlotsThatDuplicateCachedPositions) {
  RadixCache cache;
  cache.Insert({1, 2, 3}, {10, 11, 12});
  // Positions 0..2 are cached under other slots: 20 21 22 are duplicates; 23 is new.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4}, {20, 21, 22, 23}), Ids({20, 21, 22}));
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 4}).slots, Ids({10, 11, 12, 23}));
  // A request that matched the cached prefix passes the cache's own slots back: not duplicates.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 5}, {10, 11, 12, 23, 24}), Ids{});
  // Diverging inside a node splits it and dedups only the shared part.
  EXPECT_EQ(cache.Insert({1, 2, 7}, {30, 31, 32}), Ids({30, 31}));
  EXPECT_EQ(cache.MatchPrefix({1, 2, 7}).slots, Ids({10, 11, 32}));
  EXPECT_EQ(cache.TotalCachedTokens(), 6);
  EXPECT_EQ(cache.stats().inserted_tokens, 6);
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, PagesMatchAndSplitOnlyAtPageBoundaries) {
  RadixCache cache(4);
  EXPECT_TRUE(cache.Insert({1, 2, 3, 4, 5, 6, 7, 8}, {40, 41, 42, 43, 44, 45, 46, 47}).empty());
  // 7 tokens looked up: only the first whole page can match, and the node splits after it.
  const auto head = cache.MatchPrefix({1, 2, 3, 4, 5, 6, 9});
  EXPECT_EQ(head.slots, (Ids{40, 41, 42, 43}));
  EXPECT_EQ(cache.KeyLength(head.last_node), 4);
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 4, 5, 6, 7, 8, 9}).slots.size(), 8u);
  // A first page that differs in its last token is no match at all.
  EXPECT_TRUE(cache.MatchPrefix({1, 2, 3, 9, 5}).slots.empty());
  // A sequence diverging inside its first page is a child of its own; inside its second page,
  // it hangs below the shared first page.
  EXPECT_TRUE(cache.Insert({1, 2, 3, 9}, {60, 61, 62, 63}).empty());
  EXPECT_TRUE(cache.Insert({1, 2, 3, 4, 5, 6, 9, 9}, {40, 41, 42, 43, 64, 65, 66, 67}).empty());
  EXPECT_EQ(cache.Children(cache.Root()).size(), 2u);
  EXPECT_EQ(cache.Children(head.last_node).size(), 2u);
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 9, 0}).slots, (Ids{60, 61, 62, 63}));
  EXPECT_EQ(cache.TotalCachedTokens(), 16);
  cache.TEST_CheckInvariants();
  // Only whole pages go in.
  EXPECT_THROW(cache.Insert({1, 2, 3, 4, 5, 6}, {40, 41, 42, 43, 50, 51}), std::logic_error);
  EXPECT_THROW(RadixCache(0), std::logic_error);
}

// A compressed pool's records chain through the slots that close a compressed slot, so a
// sequence cached after another's slots would not verify: with slot-dependent records the cache
// adopts no input slot after the first duplicate.
TEST(RadixCache, SlotDependentRecordsExtendOnlyAnOwnPath) {
  RadixCache cache;
  cache.SetSlotDependentRecords(true);
  cache.Insert({1, 2, 3}, {10, 11, 12});
  // Position 2 is cached under slot 12: 22 is a duplicate, so 23 and 24 are returned too.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 5}, {10, 11, 22, 23, 24}), Ids({22, 23, 24}));
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 4, 5}).slots, Ids({10, 11, 12}));
  EXPECT_EQ(cache.TotalCachedTokens(), 3);
  // The cache's own slots extended: adopted as before.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4}, {10, 11, 12, 33}), Ids{});
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3, 4}).slots, Ids({10, 11, 12, 33}));
  // After a duplicate, positions the cache holds under the same slots stay the cache's; the
  // positions it lacks come back.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 6}, {40, 11, 12, 33, 44}), Ids({40, 44}));
  EXPECT_EQ(cache.TotalCachedTokens(), 4);
  cache.TEST_CheckInvariants();
  // A host tier would revive host-only nodes with the input's slots: refused either way round.
  EXPECT_THROW(cache.EnableHostTier(true), std::logic_error);
  RadixCache with_host;
  with_host.EnableHostTier(true);
  EXPECT_THROW(with_host.SetSlotDependentRecords(true), std::logic_error);
}

// Pages: a duplicate page returns the rest of the input's pages the tree lacks, whole.
TEST(RadixCache, SlotDependentRecordsDropWholePagesAfterADuplicate) {
  RadixCache cache(2);
  cache.SetSlotDependentRecords(true);
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 5, 6}, {10, 11, 22, 23, 24, 25}), Ids({22, 23, 24, 25}));
  EXPECT_EQ(cache.TotalCachedTokens(), 4);
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 5, 6}, {10, 11, 12, 13, 34, 35}), Ids{});
  EXPECT_EQ(cache.TotalCachedTokens(), 6);
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, PagedDuplicatesAndEvictionsAreWholePages) {
  RadixCache cache(2);
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  // The same tokens in other blocks: both pages are duplicates, slot for slot.
  EXPECT_EQ(cache.Insert({1, 2, 3, 4, 5, 6}, {20, 21, 22, 23, 24, 25}), (Ids{20, 21, 22, 23}));
  const Ids evicted = cache.Evict(1);
  EXPECT_EQ(evicted, (Ids{24, 25}));  // the leaf: one whole page, though one token was asked
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, InsertRejectsMismatchedLengths) {
  RadixCache cache;
  EXPECT_THROW(cache.Insert({1, 2}, {10}), std::logic_error);
}

TEST(RadixCache, LockCountsThePathAndSurvivesASplit) {
  RadixCache cache;
  cache.Insert({1, 2, 3, 4}, {10, 11, 12, 13});
  const NodeId node = cache.MatchPrefix({1, 2, 3, 4}).last_node;
  cache.Lock(node);
  cache.Lock(node);
  EXPECT_EQ(cache.LockRef(node), 2);
  EXPECT_TRUE(cache.IsLocked(node, false));
  EXPECT_EQ(cache.EvictableTokens(), 0);
  // A split above a locked node: the old id keeps the tail and the head inherits the locks.
  cache.MatchPrefix({1, 2});
  EXPECT_EQ(cache.Key(node), Ids({3, 4}));
  const NodeId head = cache.Parent(node);
  EXPECT_EQ(cache.LockRef(head), 2);
  cache.Unlock(node);
  EXPECT_EQ(cache.LockRef(head), 1);
  cache.Unlock(node);
  EXPECT_FALSE(cache.IsLocked(head, false));
  EXPECT_EQ(cache.EvictableTokens(), 4);
  EXPECT_THROW(cache.Unlock(node), std::logic_error);
  EXPECT_EQ(cache.EvictableTokens(), 4);  // the failed Unlock changed nothing
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, ALockedPathIsNeverEvicted) {
  RadixCache cache;
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({5, 6}, {20, 21});
  const NodeId locked = cache.MatchPrefix({1, 2, 3}).last_node;
  cache.Lock(locked);
  const Ids evicted = cache.Evict(100);
  EXPECT_EQ(evicted, Ids({20, 21}));
  EXPECT_EQ(cache.TotalCachedTokens(), 3);
  EXPECT_EQ(cache.EvictableTokens(), 0);
  EXPECT_EQ(cache.MatchPrefix({1, 2, 3}).slots, Ids({10, 11, 12}));
  cache.Unlock(locked);
  EXPECT_EQ(cache.Evict(1), Ids({10, 11, 12}));
  EXPECT_EQ(cache.TotalCachedTokens(), 0);
  EXPECT_EQ(cache.NumNodes(), 1);
  cache.TEST_CheckInvariants();
}

TEST(RadixCache, EvictsTheLeastRecentlyUsedLeafFirst) {
  RadixCache cache;
  cache.Insert({1, 1}, {10, 11});  // A
  cache.Insert({2, 2}, {20, 21});  // B
  cache.Insert({3, 3}, {30, 31});  // C
  cache.MatchPrefix({1, 1});       // A is now the most recent
  EXPECT_EQ(cache.Evict(2), Ids({20, 21}));
  EXPECT_EQ(cache.Evict(1), Ids({30, 31}));  // whole leaves: asks for 1, releases 2
  EXPECT_EQ(cache.Evict(2), Ids({10, 11}));
  EXPECT_EQ(cache.Evict(2), Ids{});
  EXPECT_EQ(cache.stats().evicted_tokens, 6);
}

TEST(RadixCache, AParentIsEvictedOnlyAfterItsChildren) {
  RadixCache cache;
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.Insert({1, 2, 4}, {10, 11, 14});  // splits into [1 2] -> {[3], [4]}
  ASSERT_EQ(cache.NumNodes(), 4);
  cache.MatchPrefix({1, 2, 3});  // the [3] leaf and the parent are more recent than [4]
  EXPECT_EQ(cache.Evict(1), Ids({14}));
  EXPECT_EQ(cache.Evict(1), Ids({12}));
  EXPECT_EQ(cache.Evict(1), Ids({10, 11}));
  cache.TEST_CheckInvariants();

  // Within one call too: the parent joins the candidates once its last child is gone.
  RadixCache again;
  again.Insert({1, 2, 3}, {10, 11, 12});
  again.Insert({1, 2, 4}, {10, 11, 14});
  again.Insert({9}, {90});
  again.MatchPrefix({9});
  EXPECT_EQ(again.Evict(5), Ids({12, 14, 10, 11, 90}));
}

TEST(RadixCache, EvictCallbackSeesEachNodeBeforeItGoes) {
  RadixCache cache;
  cache.Insert({1, 2}, {10, 11});
  cache.Insert({7}, {70});
  std::vector<std::pair<int64_t, Ids>> seen;
  cache.Evict(3, [&](NodeId node, const Ids& slots) {
    seen.emplace_back(cache.Key(node).front(), slots);
    return Ids{};
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(int64_t{1}, Ids({10, 11})));
  EXPECT_EQ(seen[1], std::make_pair(int64_t{7}, Ids({70})));
}

TEST(RadixCache, ViewListsChildrenByFirstTokenWithKeysSlotsAndLocks) {
  RadixCache cache;
  cache.Insert({5, 1}, {50, 51});
  cache.Insert({3, 1, 1}, {30, 31, 32});
  cache.Insert({9}, {90});
  cache.Insert({3, 1, 2}, {30, 31, 40});
  const auto top = cache.Children(cache.Root());
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(cache.Key(top[0]).front(), 3);
  EXPECT_EQ(cache.Key(top[1]).front(), 5);
  EXPECT_EQ(cache.Key(top[2]).front(), 9);
  EXPECT_EQ(cache.KeyLength(top[0]), 2);
  EXPECT_EQ(cache.DeviceSlots(top[0]), Ids({30, 31}));
  const auto below = cache.Children(top[0]);
  ASSERT_EQ(below.size(), 2u);
  EXPECT_EQ(cache.DeviceSlots(below[0]), Ids({32}));
  EXPECT_EQ(cache.DeviceSlots(below[1]), Ids({40}));
  EXPECT_TRUE(cache.Children(below[1]).empty());
  EXPECT_EQ(cache.KeyLength(cache.Root()), 0);
  EXPECT_TRUE(cache.DeviceSlots(cache.Root()).empty());
  cache.Lock(below[1]);
  EXPECT_TRUE(cache.IsLocked(below[1], false));
  EXPECT_TRUE(cache.IsLocked(top[0], true));  // no SWA part: the full lock answers
  EXPECT_FALSE(cache.IsLocked(below[0], false));
  EXPECT_FALSE(cache.IsLocked(top[1], false));
  EXPECT_TRUE(cache.IsSwaResident(top[1]));
  EXPECT_THROW(cache.Children(1000), std::logic_error);
}

TEST(RadixCache, HitStatisticsCountLookedUpAndMatchedTokens) {
  RadixCache cache;
  cache.Insert({1, 2, 3}, {10, 11, 12});
  cache.MatchPrefix({1, 2, 3, 4});  // 3 of 4
  cache.MatchPrefix({9, 9, 9, 9});  // 0 of 4
  EXPECT_EQ(cache.stats().lookups, 2);
  EXPECT_EQ(cache.stats().looked_up_tokens, 8);
  EXPECT_EQ(cache.stats().device_hit_tokens, 3);
  EXPECT_DOUBLE_EQ(cache.stats().HitRate(), 3.0 / 8.0);
}

// Random inserts, matches, locks and evictions over a 3-token alphabet (many splits), against a
// model that maps every cached prefix to its slot. Prints the seed on failure.
TEST(RadixCache, RandomOperationsAgreeWithAPrefixMapModel) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    RadixCache cache;
    std::map<Ids, int64_t> model;  // prefix -> slot of its last position
    std::vector<NodeId> locks;
    int64_t next_slot = 1;
    auto random_seq = [&] {
      Ids seq(1 + rng() % 8);
      for (auto& t : seq) t = 1 + static_cast<int64_t>(rng() % 3);
      return seq;
    };
    for (int op = 0; op < 300; ++op) {
      const Ids seq = random_seq();
      switch (rng() % 4) {
        case 0:
        case 1: {
          Ids slots;
          for (size_t i = 0; i < seq.size(); ++i) slots.push_back(next_slot++);
          const Ids dups = cache.Insert(seq, slots);
          Ids expected_dups;
          for (size_t i = 0; i < seq.size(); ++i) {
            const Ids prefix(seq.begin(), seq.begin() + i + 1);
            if (!model.emplace(prefix, slots[i]).second) expected_dups.push_back(slots[i]);
          }
          EXPECT_EQ(dups, expected_dups);
          break;
        }
        case 2: {
          const auto match = cache.MatchPrefix(seq);
          Ids expected;
          for (size_t i = 0; i < seq.size(); ++i) {
            const auto it = model.find(Ids(seq.begin(), seq.begin() + i + 1));
            if (it == model.end()) break;
            expected.push_back(it->second);
          }
          EXPECT_EQ(match.slots, expected);
          if (rng() % 2 == 0) {
            cache.Lock(match.last_node);
            locks.push_back(match.last_node);
          } else if (!locks.empty()) {
            cache.Unlock(locks.back());
            locks.pop_back();
          }
          break;
        }
        case 3: {
          const int64_t before = cache.TotalCachedTokens();
          const Ids evicted = cache.Evict(1 + static_cast<int64_t>(rng() % 6));
          EXPECT_EQ(cache.TotalCachedTokens(), before - static_cast<int64_t>(evicted.size()));
          const std::set<int64_t> gone(evicted.begin(), evicted.end());
          for (auto it = model.begin(); it != model.end();) {
            it = gone.count(it->second) ? model.erase(it) : std::next(it);
          }
          break;
        }
      }
      cache.TEST_CheckInvariants();
      ASSERT_EQ(cache.TotalCachedTokens(), static_cast<int64_t>(model.size()));
    }
  }
}

}  // namespace
}  // namespace kvcanary::sim
