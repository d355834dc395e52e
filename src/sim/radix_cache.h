// The engine's radix prefix cache (SGLang's RadixCache, with HiCache's host tier in its simplest
// form): a tree over token sequences whose nodes map key segments to device slots.
//
// A request matches its prompt on admission and locks the matched path; shared prefixes are then
// read from the cache's slots, not recomputed. On finish the request inserts its sequence; the
// slots of positions already cached are duplicates, which the caller frees. When the slot
// allocator runs dry the caller evicts unlocked leaves, least recently used first.
//
// With a page size P > 1 (the paged layout), the tree shares whole pages only, as a paged engine's
// prefix cache shares whole KV blocks: a match is cut down to a multiple of P, nodes are split
// only at page boundaries, inserted sequences are whole pages, and children are keyed by their
// first page. Every node then holds whole blocks, so eviction releases whole blocks.
//
// With the host tier on, an evicted node is not dropped: a callback backs its KV (and canary
// records) up to host slots it chooses, and the node stays in the tree as host-only. A later
// match walks through host-only nodes too and reports them, so the caller can copy them back to
// new device slots and call LoadBack.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "kvcanary/runtime/radix_view.h"

namespace kvcanary::sim {

struct RadixStats {
  int64_t lookups = 0;            // MatchPrefix calls
  int64_t looked_up_tokens = 0;   // tokens passed to MatchPrefix
  int64_t device_hit_tokens = 0;  // of those, matched on device-resident nodes
  int64_t host_hit_tokens = 0;    // of those, matched on host-only nodes
  int64_t inserted_tokens = 0;    // tokens new to the tree (Insert, not counting duplicates)
  int64_t evicted_tokens = 0;     // device tokens released by Evict (and by Remove)
  int64_t backed_up_tokens = 0;   // of those, kept as host-only
  int64_t loaded_back_tokens = 0;
  double HitRate() const {
    return looked_up_tokens == 0
               ? 0.0
               : static_cast<double>(device_hit_tokens + host_hit_tokens) / looked_up_tokens;
  }
};

// Thread safety: none.
//
// Invariants: node 0 is the root (empty key, never evicted). Every other live node has a
// non-empty key and is either device-resident (one device slot per key token, no host slots) or
// host-only (no device slots, one host slot per key token). The parent of a resident node is
// resident (or the root): host-only nodes hang below the resident tree. lock_ref of a node is the
// number of Lock calls on it or a descendant minus the Unlocks; host-only nodes are never locked.
// Children of a node start with distinct tokens and are visited in increasing first-token order.
// A node id stays valid until the node is dropped (eviction without backup); ids are reused.
class RadixCache : public runtime::RadixView {
 public:
  using NodeId = runtime::RadixView::NodeId;
  static constexpr NodeId kRoot = 0;

  // Called once per node evicted from the device, before its slots are returned, with the node
  // and its device slots (their KV is still intact). With the host tier on, the callback backs
  // them up and returns the host slots holding the copy (same length), or an empty vector to
  // drop the node instead. Without the host tier the result is ignored; the callback may be null.
  // It may read the cache (Key, Depth) but must not change it.
  using EvictCallback =
      std::function<std::vector<int64_t>(NodeId node, const std::vector<int64_t>& device_slots)>;

  struct MatchResult {
    // Device slots of the matched device-resident prefix (position i -> slots[i]).
    std::vector<int64_t> slots;
    // The deepest matched device-resident node (kRoot when none): the node to Lock.
    NodeId last_node = kRoot;
    // Tokens matched beyond `slots` on host-only nodes, and those nodes, top-down; their key
    // lengths sum to host_only_tokens. LoadBack each in order to make the whole match resident.
    int64_t host_only_tokens = 0;
    std::vector<NodeId> host_nodes;
  };

  // REQUIRES: page_size >= 1 (std::logic_error otherwise).
  explicit RadixCache(int64_t page_size = 1);
  int64_t page_size() const { return page_size_; }

  // Off by default. REQUIRES: no host-only node exists when turning it off; not with
  // slot-dependent records (std::logic_error).
  void EnableHostTier(bool enabled);
  // Off by default. On: once a position of an Insert was a duplicate, the tree learns nothing
  // after it: the input's later positions it lacks are returned as duplicates too, since their
  // records were chained through the input's slots, not the tree's. For a pool whose records
  // depend on the slots that hold a sequence, not on its tokens alone (a compressed pool:
  // whether a slot closes a compressed slot is a property of the slot). Not with the host tier
  // (std::logic_error): host-only nodes would revive with the input's slots.
  void SetSlotDependentRecords(bool on);
  bool host_tier() const { return host_tier_; }

  // The longest cached prefix of `tokens` that is a whole number of pages. A match ending inside a node splits it (the new node
  // takes the matched part, the old id keeps the rest, so ids held by Lock stay valid). Bumps the
  // LRU clock of every node on the matched path. Counts into stats().
  MatchResult MatchPrefix(const std::vector<int64_t>& tokens);

  // lock_ref += 1 (Unlock: -= 1) on `node` and every ancestor except the root. Locked nodes are
  // never evicted. REQUIRES: node is kRoot or resident; Unlock matches an earlier Lock.
  void Lock(NodeId node);
  void Unlock(NodeId node);

  // Inserts `tokens` (position i's KV in slots[i]). Where the tree already holds a position on a
  // resident node with a different slot, the input slot is a duplicate: it is returned and the
  // caller frees it; the cache keeps its own (SetSlotDependentRecords: and what follows one).
  // Positions on host-only nodes are revived with the input slots (their host slots go to
  // TakeReleasedHostSlots). All other input slots now belong to the cache.
  // REQUIRES: tokens.size() == slots.size().
  std::vector<int64_t> Insert(const std::vector<int64_t>& tokens,
                              const std::vector<int64_t>& slots);

  // Evicts unlocked resident nodes with no resident child, least recently used first (ties by
  // id), until at least `num_tokens` device slots are released or nothing is evictable. Returns
  // the released device slots; the caller frees them. See EvictCallback for the host tier.
  // Dropping a node drops its host-only descendants; their host slots go to
  // TakeReleasedHostSlots.
  std::vector<int64_t> Evict(int64_t num_tokens, const EvictCallback& on_evict = nullptr);

  // The resident nodes (not the root) whose device slots include one of `slots`.
  std::vector<NodeId> ResidentNodesHolding(const std::set<int64_t>& slots) const;
  // Removes unlocked resident `node` and its whole subtree (a node holding a corrupt slot: every
  // cached sequence through it would read it) and returns the device slots of its resident
  // nodes; the caller frees them. Host-only descendants go as in Evict.
  // REQUIRES: node resident, not the root, lock_ref 0 (std::logic_error otherwise).
  std::vector<int64_t> Remove(NodeId node);

  // Makes host-only `node` resident again in `device_slots` (the caller has copied its KV and
  // records there). Returns its host slots, which the node no longer references.
  // REQUIRES: node host-only, its parent resident or the root, device_slots.size() == key length.
  std::vector<int64_t> LoadBack(NodeId node, const std::vector<int64_t>& device_slots);

  // Host slots the tree stopped referencing (dropped or revived host-only nodes) since the last
  // call; the caller returns them to its host pool.
  std::vector<int64_t> TakeReleasedHostSlots();

  // Sizes, in tokens.
  int64_t TotalCachedTokens() const { return device_tokens_; }   // resident
  int64_t EvictableTokens() const { return evictable_tokens_; }  // resident and unlocked
  int64_t HostOnlyTokens() const { return host_tokens_; }
  const RadixStats& stats() const { return stats_; }

  // Node inspection (REQUIRES: a live node).
  NodeId Parent(NodeId node) const { return At(node).parent; }
  const std::vector<int64_t>& Key(NodeId node) const { return At(node).key; }
  bool IsHostOnly(NodeId node) const { return !At(node).host_slots.empty(); }
  const std::vector<int64_t>& HostSlots(NodeId node) const { return At(node).host_slots; }
  int64_t LockRef(NodeId node) const { return At(node).lock_ref; }
  // Positions before the node's key (the sum of its ancestors' key lengths).
  int64_t Depth(NodeId node) const;
  int64_t NumNodes() const { return static_cast<int64_t>(nodes_.size() - free_ids_.size()); }

  // Recomputes every counter and invariant from scratch; throws std::logic_error on a mismatch.
  void TEST_CheckInvariants() const;

  // RadixView.
  NodeId Root() const override { return kRoot; }
  std::vector<NodeId> Children(NodeId node) const override;
  int64_t KeyLength(NodeId node) const override;
  std::vector<int64_t> DeviceSlots(NodeId node) const override;
  bool IsLocked(NodeId node, bool swa_component) const override;
  bool IsSwaResident(NodeId node) const override { return (void)node, true; }

 private:
  struct Node {
    std::vector<int64_t> key;
    std::vector<int64_t> slots;          // device slots; empty when host-only (and for the root)
    std::vector<int64_t> host_slots;     // non-empty iff host-only
    std::map<int64_t, NodeId> children;  // by first key token
    NodeId parent = -1;
    int64_t lock_ref = 0;
    uint64_t last_access = 0;
    bool live = false;
  };

  const Node& At(NodeId node) const;
  // The key a child starting at tokens[start] is filed under: its first token, or with pages a
  // hash of its first page (a lookup then compares the page itself: a collision is no match).
  int64_t ChildKey(const std::vector<int64_t>& tokens, size_t start) const;
  // Tokens of key that equal tokens[start...], cut down to whole pages.
  int64_t MatchedPages(const std::vector<int64_t>& key, const std::vector<int64_t>& tokens,
                       size_t start) const;
  bool IsResident(NodeId node) const { return node == kRoot || !nodes_[node].slots.empty(); }
  bool HasResidentChild(NodeId node) const;
  NodeId NewNode();
  // Splits `node` after `at` key tokens; returns the new node holding the first part.
  NodeId Split(NodeId node, int64_t at);
  // Removes `node` and its (host-only) subtree from the tree.
  void Drop(NodeId node);

  std::vector<Node> nodes_;
  std::vector<NodeId> free_ids_;
  std::vector<int64_t> released_host_slots_;
  uint64_t clock_ = 0;
  int64_t page_size_ = 1;
  bool host_tier_ = false;
  bool slot_dependent_records_ = false;
  int64_t device_tokens_ = 0;
  int64_t evictable_tokens_ = 0;
  int64_t host_tokens_ = 0;
  RadixStats stats_;
};

}  // namespace kvcanary::sim
