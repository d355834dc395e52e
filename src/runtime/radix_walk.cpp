#include <cstddef>
#include <unordered_set>
#include <vector>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/radix_view.h"

namespace kvcanary::runtime {
namespace {

// Where a node's walk starts: its first position and the slot its first record chains to.
struct PendingNode {
  RadixView::NodeId node;
  int64_t depth;
  int64_t chain_slot;
};

// Pushes `children` so that the first child is popped first (pre-order in view order).
void PushChildren(const std::vector<RadixView::NodeId>& children, int64_t depth,
                  int64_t chain_slot, std::vector<PendingNode>& stack) {
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    stack.push_back({*it, depth, chain_slot});
  }
}

}  // namespace

RadixWalk WalkRadix(const RadixView& view, bool unlocked_only, bool swa_resident_only,
                    int64_t max_depth) {
  RadixWalk walk;
  // An explicit stack, not recursion: a long single-child chain (one node per cached chunk of a
  // long prompt) must not exhaust the thread's stack.
  std::vector<PendingNode> stack;
  std::unordered_set<RadixView::NodeId> visited{view.Root()};
  PushChildren(view.Children(view.Root()), /*depth=*/0, /*chain_slot=*/-1, stack);
  while (!stack.empty()) {
    const PendingNode pending = stack.back();
    stack.pop_back();
    if (!visited.insert(pending.node).second) {
      ThrowError("kv-canary: the radix view reaches node ", pending.node,
                 " twice (a cycle, or a node under two parents): not a tree, not walked");
    }
    const int64_t key_length = view.KeyLength(pending.node);
    if (key_length < 0 || pending.depth > max_depth) {
      ThrowError("kv-canary: radix node ", pending.node, " has key_length ", key_length,
                 " at depth ", pending.depth, "; a prefix lies within [0, ", max_depth, "]");
    }
    const std::vector<int64_t> slots = view.DeviceSlots(pending.node);
    // A unified SWA cache locks its SWA component separately; a residency-filtered walk asks for
    // that lock.
    const bool skipped = (unlocked_only && view.IsLocked(pending.node, swa_resident_only)) ||
                         (swa_resident_only && !view.IsSwaResident(pending.node));
    if (!skipped) {
      for (size_t j = 0; j < slots.size(); ++j) {
        walk.slot_indices.push_back(slots[j]);
        walk.positions.push_back(pending.depth + static_cast<int64_t>(j));
        walk.prev_slot_indices.push_back(j == 0 ? pending.chain_slot : slots[j - 1]);
      }
    }
    // After a host-only node the device predecessor of the next resident slot is unknown, so the
    // chain check of that one entry is disabled (0) rather than pointed at a slot that does not
    // precede it (R5 in docs/ARCHITECTURE.md).
    const int64_t next_chain_slot = slots.empty() ? 0 : slots.back();
    PushChildren(view.Children(pending.node), SaturatingAdd(pending.depth, key_length),
                 next_chain_slot, stack);
  }
  return walk;
}

RadixWalk WalkOfSequence(const std::vector<int64_t>& slots) {
  RadixWalk walk;
  walk.slot_indices = slots;
  for (size_t i = 0; i < slots.size(); ++i) {
    walk.positions.push_back(static_cast<int64_t>(i));
    walk.prev_slot_indices.push_back(i == 0 ? -1 : slots[i - 1]);
  }
  return walk;
}

std::vector<int64_t> TranslateWalkSlots(const std::vector<int64_t>& slots,
                                        const std::vector<int64_t>& full_to_swa) {
  std::vector<int64_t> translated;
  translated.reserve(slots.size());
  const int64_t lut_len = static_cast<int64_t>(full_to_swa.size());
  for (const int64_t slot : slots) {
    translated.push_back(slot >= 0 && slot < lut_len ? full_to_swa[slot] : slot);
  }
  return translated;
}

}  // namespace kvcanary::runtime
