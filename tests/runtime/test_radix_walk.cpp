#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "kvcanary/runtime/radix_view.h"
#include "runtime/error_message.h"

namespace kvcanary::runtime {
namespace {

// An in-memory prefix tree. Node 0 is the root; Add() appends a child in visit order.
class TestRadix final : public RadixView {
 public:
  struct Node {
    std::vector<NodeId> children;
    int64_t key_length = 0;
    std::vector<int64_t> slots;
    bool locked = false;
    bool swa_locked = false;
    bool swa_resident = true;
  };

  TestRadix() : nodes_(1) {}

  // A device-resident node spanning its slots.
  NodeId Add(NodeId parent, std::vector<int64_t> slots) {
    const int64_t key_length = static_cast<int64_t>(slots.size());
    return AddNode(parent, {{}, key_length, std::move(slots)});
  }
  // A node that lives only on the host.
  NodeId AddHostOnly(NodeId parent, int64_t key_length) {
    return AddNode(parent, {{}, key_length, {}});
  }
  Node& node(NodeId id) { return nodes_[id]; }

  NodeId Root() const override { return 0; }
  std::vector<NodeId> Children(NodeId id) const override { return nodes_[id].children; }
  int64_t KeyLength(NodeId id) const override { return nodes_[id].key_length; }
  std::vector<int64_t> DeviceSlots(NodeId id) const override { return nodes_[id].slots; }
  bool IsLocked(NodeId id, bool swa_component) const override {
    return swa_component ? nodes_[id].swa_locked : nodes_[id].locked;
  }
  bool IsSwaResident(NodeId id) const override { return nodes_[id].swa_resident; }

 private:
  NodeId AddNode(NodeId parent, Node node) {
    nodes_.push_back(std::move(node));
    const NodeId id = static_cast<NodeId>(nodes_.size() - 1);
    nodes_[parent].children.push_back(id);
    return id;
  }

  std::vector<Node> nodes_;
};

using Ints = std::vector<int64_t>;

void ExpectWalk(const RadixWalk& walk, const Ints& slots, const Ints& positions,
                const Ints& prev) {
  EXPECT_EQ(walk.slot_indices, slots);
  EXPECT_EQ(walk.positions, positions);
  EXPECT_EQ(walk.prev_slot_indices, prev);
  EXPECT_EQ(walk.size(), static_cast<int64_t>(slots.size()));
}

// SGLang's walker vectors (single-child chains).
TEST(RadixWalk, OneNode) {
  TestRadix tree;
  tree.Add(0, {10, 20, 30, 40});
  ExpectWalk(WalkRadix(tree), {10, 20, 30, 40}, {0, 1, 2, 3}, {-1, 10, 20, 30});
}

TEST(RadixWalk, TwoNodesChainAcrossTheEdge) {
  TestRadix tree;
  tree.Add(tree.Add(0, {7, 8}), {9, 10});
  ExpectWalk(WalkRadix(tree), {7, 8, 9, 10}, {0, 1, 2, 3}, {-1, 7, 8, 9});
}

TEST(RadixWalk, ThreeNodes) {
  TestRadix tree;
  tree.Add(tree.Add(tree.Add(0, {1, 2}), {3}), {4, 5});
  ExpectWalk(WalkRadix(tree), {1, 2, 3, 4, 5}, {0, 1, 2, 3, 4}, {-1, 1, 2, 3, 4});
}

TEST(RadixWalk, UnlockedOnlySkipsLockedNodeButKeepsDepthAndChain) {
  TestRadix tree;
  const auto locked = tree.Add(0, {1, 2});
  tree.node(locked).locked = true;
  tree.Add(locked, {3, 4});
  ExpectWalk(WalkRadix(tree, /*unlocked_only=*/true), {3, 4}, {2, 3}, {2, 3});
  // Without the option the locked node is emitted.
  ExpectWalk(WalkRadix(tree), {1, 2, 3, 4}, {0, 1, 2, 3}, {-1, 1, 2, 3});
}

// R5 (docs/ARCHITECTURE.md): after a host-only node the chain is unchecked (0); SGLang passes
// -1 through.
TEST(RadixWalk, HostOnlyNodeGivesChainSlotZero) {
  TestRadix tree;
  tree.Add(tree.AddHostOnly(0, 2), {5, 6});
  ExpectWalk(WalkRadix(tree), {5, 6}, {2, 3}, {0, 5});
}

TEST(RadixWalk, HostOnlyNodeBelowResidentNodeAlsoBreaksTheChain) {
  TestRadix tree;
  tree.Add(tree.AddHostOnly(tree.Add(0, {1, 2}), 3), {9});
  ExpectWalk(WalkRadix(tree), {1, 2, 9}, {0, 1, 5}, {-1, 1, 0});
}

TEST(RadixWalk, BranchesArePreOrderInViewOrder) {
  TestRadix tree;
  const auto a = tree.Add(0, {1, 2});
  tree.Add(tree.Add(a, {3}), {4});
  tree.Add(a, {5, 6});
  tree.Add(0, {7});
  ExpectWalk(WalkRadix(tree), {1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 2, 3, 0},
             {-1, 1, 2, 3, 2, 5, -1});
}

TEST(RadixWalk, SwaResidentOnlySkipsTombstonedNodes) {
  TestRadix tree;
  const auto tombstone = tree.Add(0, {1, 2});
  tree.node(tombstone).swa_resident = false;
  tree.Add(tombstone, {3});
  ExpectWalk(WalkRadix(tree, false, /*swa_resident_only=*/true), {3}, {2}, {2});
  ExpectWalk(WalkRadix(tree), {1, 2, 3}, {0, 1, 2}, {-1, 1, 2});
}

TEST(RadixWalk, ResidencyFilteredWalkAsksForTheSwaLock) {
  TestRadix tree;
  const auto node = tree.Add(0, {1});
  tree.node(node).swa_locked = true;  // the full lock is free
  ExpectWalk(WalkRadix(tree, /*unlocked_only=*/true), {1}, {0}, {-1});
  ExpectWalk(WalkRadix(tree, true, /*swa_resident_only=*/true), {}, {}, {});
}

TEST(RadixWalk, EmptyTreeEmitsNothing) {
  TestRadix tree;
  EXPECT_EQ(WalkRadix(tree).size(), 0);
}

TEST(RadixWalk, DeepChainDoesNotRecurse) {
  TestRadix tree;
  RadixView::NodeId parent = 0;
  constexpr int64_t kDepth = 200000;
  for (int64_t i = 1; i <= kDepth; ++i) parent = tree.Add(parent, {i});
  const RadixWalk walk = WalkRadix(tree);
  ASSERT_EQ(walk.size(), kDepth);
  EXPECT_EQ(walk.positions.back(), kDepth - 1);
  EXPECT_EQ(walk.prev_slot_indices.back(), kDepth - 1);
}

// A view that is not a tree of prefixes is refused, not walked without end: a node under two
// parents, a negative key length, a node deeper than the table.
TEST(RadixWalk, AViewThatIsNotATreeOfPrefixesIsRefused) {
  TestRadix shared;
  const auto a = shared.Add(0, {1, 2});
  const auto b = shared.Add(0, {3});
  shared.node(b).children.push_back(a);
  EXPECT_EQ(ErrorMessage([&] { WalkRadix(shared); }),
            "kv-canary: the radix view reaches node 1 twice (a cycle, or a node under two "
            "parents): not a tree, not walked");
  TestRadix negative;
  negative.AddHostOnly(0, -5);
  EXPECT_EQ(ErrorMessage([&] { WalkRadix(negative); }),
            "kv-canary: radix node 1 has key_length -5 at depth 0; a prefix lies within [0, "
            "9223372036854775807]");
  TestRadix deep;
  deep.Add(deep.Add(0, {1, 2, 3}), {4, 5});
  EXPECT_EQ(WalkRadix(deep, false, false, /*max_depth=*/3).size(), 5);
  EXPECT_EQ(ErrorMessage([&] { WalkRadix(deep, false, false, /*max_depth=*/2); }),
            "kv-canary: radix node 2 has key_length 2 at depth 3; a prefix lies within [0, 2]");
}

// SGLang's LUT-translation vector of a walk.
TEST(RadixWalk, TranslateThroughLut) {
  EXPECT_EQ(TranslateWalkSlots({}, {10, 20, 30}), Ints{});
  EXPECT_EQ(TranslateWalkSlots({2}, {10, 20, 30}), Ints{30});
  EXPECT_EQ(TranslateWalkSlots({1, 1, 0}, {100, 200, 300}), (Ints{200, 200, 100}));
  EXPECT_EQ(TranslateWalkSlots({-1, 0, 2}, {10, 20, 30}), (Ints{-1, 10, 30}));
  // Past the table the slot is kept, like a negative one.
  EXPECT_EQ(TranslateWalkSlots({3, 7}, {10, 20, 30}), (Ints{3, 7}));
}

}  // namespace
}  // namespace kvcanary::runtime
