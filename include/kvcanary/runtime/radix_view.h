// The radix walker contract: how an engine exposes its prefix cache so the
// runtime can sweep the records of cached prefixes that no running request reads.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

namespace kvcanary::runtime {

// A read-only view of the engine's prefix tree. Node ids are the engine's own; the root emits
// nothing. The runtime only calls these during a sweep, outside any graph.
class RadixView {
 public:
  using NodeId = int64_t;
  virtual ~RadixView() = default;

  virtual NodeId Root() const = 0;
  // Children in the order the walk visits them.
  virtual std::vector<NodeId> Children(NodeId node) const = 0;
  // Positions the node's key spans.
  virtual int64_t KeyLength(NodeId node) const = 0;
  // The node's device slots, one per position; empty when the node lives only on the host.
  virtual std::vector<int64_t> DeviceSlots(NodeId node) const = 0;
  // Whether a running request holds the node (plain radix: lock_ref > 0). `swa_component` asks
  // for the lock of the node's SWA part (unified SWA caches), else the full lock.
  virtual bool IsLocked(NodeId node, bool swa_component) const = 0;
  // Whether the node's SWA slots are resident; a cache without SWA answers true.
  virtual bool IsSwaResident(NodeId node) const = 0;
};

// One emitted entry per resident slot, depth-first pre-order.
struct RadixWalk {
  std::vector<int64_t> slot_indices;
  std::vector<int64_t> positions;
  std::vector<int64_t> prev_slot_indices;  // -1 below the root, 0 = chain unchecked
  int64_t size() const { return static_cast<int64_t>(slot_indices.size()); }
};

// Walks the view: a node at depth d with slots v[0..m) and incoming chain slot p emits
// (v[j], d + j, j == 0 ? p : v[j-1]); its children start at depth d + key_len with chain slot
// v[m-1], or 0 after a slot-less node (R5). Skipped nodes (locked with `unlocked_only`,
// non-resident with `swa_resident_only`) emit nothing but still advance depth and chain.
// A view that is not a tree of prefixes is refused with a kv-canary error, never walked without
// end: a node reached twice (a cycle, or a node under two parents), a negative key length, or a
// node deeper than `max_depth` (the runtime passes its table's max_seq_len_per_req).
RadixWalk WalkRadix(const RadixView& view, bool unlocked_only = false,
                    bool swa_resident_only = false, int64_t max_depth = INT64_MAX);

// The walk of one sequence's slots: slot i at position i, its predecessor the slot before (-1 for
// position 0), every chain checked.
RadixWalk WalkOfSequence(const std::vector<int64_t>& slots);

// The walk's slots through a full->SWA table: out[i] = lut[slot] for 0 <= slot < len(lut), the
// slot itself (negative) otherwise.
std::vector<int64_t> TranslateWalkSlots(const std::vector<int64_t>& slots,
                                        const std::vector<int64_t>& full_to_swa);

}  // namespace kvcanary::runtime
