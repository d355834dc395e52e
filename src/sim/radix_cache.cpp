#include "sim/radix_cache.h"

#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "kvcanary/hash.h"

namespace kvcanary::sim {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  throw std::logic_error("kv-canary sim: radix cache: " + what);
}

int64_t CommonPrefix(const std::vector<int64_t>& key, const std::vector<int64_t>& tokens,
                     size_t start) {
  size_t n = 0;
  while (n < key.size() && start + n < tokens.size() && key[n] == tokens[start + n]) ++n;
  return static_cast<int64_t>(n);
}

std::vector<int64_t> Slice(const std::vector<int64_t>& v, size_t begin, size_t end) {
  return std::vector<int64_t>(v.begin() + begin, v.begin() + end);
}

}  // namespace

RadixCache::RadixCache(int64_t page_size) : page_size_(page_size) {
  if (page_size < 1) Fail("page size must be >= 1, got " + std::to_string(page_size));
  nodes_.emplace_back();
  nodes_[kRoot].live = true;
}

void RadixCache::EnableHostTier(bool enabled) {
  if (!enabled && host_tokens_ > 0) Fail("host tier turned off while host-only nodes exist");
  if (enabled && slot_dependent_records_) Fail("a host tier with slot-dependent records");
  host_tier_ = enabled;
}

void RadixCache::SetSlotDependentRecords(bool on) {
  if (on && host_tier_) Fail("slot-dependent records with a host tier");
  slot_dependent_records_ = on;
}

const RadixCache::Node& RadixCache::At(NodeId node) const {
  if (node < 0 || node >= static_cast<NodeId>(nodes_.size()) || !nodes_[node].live) {
    Fail("node " + std::to_string(node) + " is not a live node");
  }
  return nodes_[node];
}

int64_t RadixCache::ChildKey(const std::vector<int64_t>& tokens, size_t start) const {
  if (page_size_ == 1) return tokens[start];
  uint64_t hash = 0;
  for (size_t i = start; i < start + static_cast<size_t>(page_size_); ++i) {
    hash = Splitmix64(hash ^ static_cast<uint64_t>(tokens[i]));
  }
  return static_cast<int64_t>(hash);
}

int64_t RadixCache::MatchedPages(const std::vector<int64_t>& key,
                                 const std::vector<int64_t>& tokens, size_t start) const {
  return CommonPrefix(key, tokens, start) / page_size_ * page_size_;
}

bool RadixCache::HasResidentChild(NodeId node) const {
  for (const auto& [token, child] : nodes_[node].children) {
    if (IsResident(child)) return true;
  }
  return false;
}

RadixCache::NodeId RadixCache::NewNode() {
  NodeId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    nodes_[id] = Node{};
  } else {
    id = static_cast<NodeId>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[id].live = true;
  return id;
}

RadixCache::NodeId RadixCache::Split(NodeId node, int64_t at) {
  const NodeId head = NewNode();  // may reallocate nodes_: index, never hold references across
  Node& tail = nodes_[node];
  Node& first = nodes_[head];
  first.key = Slice(tail.key, 0, at);
  tail.key.erase(tail.key.begin(), tail.key.begin() + at);
  if (!tail.slots.empty()) {
    first.slots = Slice(tail.slots, 0, at);
    tail.slots.erase(tail.slots.begin(), tail.slots.begin() + at);
  } else {
    first.host_slots = Slice(tail.host_slots, 0, at);
    tail.host_slots.erase(tail.host_slots.begin(), tail.host_slots.begin() + at);
  }
  // The head inherits the locks: every lock on the tail also covers its new parent. Token counts
  // are unchanged, so the evictable/host totals need no update.
  first.lock_ref = tail.lock_ref;
  first.last_access = tail.last_access;
  first.parent = tail.parent;
  first.children[ChildKey(tail.key, 0)] = node;
  nodes_[first.parent].children[ChildKey(first.key, 0)] = head;
  tail.parent = head;
  return head;
}

RadixCache::MatchResult RadixCache::MatchPrefix(const std::vector<int64_t>& tokens) {
  ++clock_;
  MatchResult result;
  stats_.lookups += 1;
  stats_.looked_up_tokens += static_cast<int64_t>(tokens.size());
  NodeId node = kRoot;
  size_t i = 0;
  // Only whole pages can match: the request's next token must start a block of its own.
  const size_t usable = tokens.size() / static_cast<size_t>(page_size_) * page_size_;
  while (i < usable) {
    const auto it = nodes_[node].children.find(ChildKey(tokens, i));
    if (it == nodes_[node].children.end()) break;
    NodeId child = it->second;
    const int64_t matched = MatchedPages(nodes_[child].key, tokens, i);
    if (matched == 0) break;  // a hash collision of first pages
    nodes_[child].last_access = clock_;
    const bool partial = matched < static_cast<int64_t>(nodes_[child].key.size());
    if (partial) child = Split(child, matched);
    if (IsResident(child)) {
      const auto& slots = nodes_[child].slots;
      result.slots.insert(result.slots.end(), slots.begin(), slots.end());
      result.last_node = child;
    } else {
      result.host_nodes.push_back(child);
      result.host_only_tokens += matched;
    }
    node = child;
    i += static_cast<size_t>(matched);
    if (partial) break;
  }
  stats_.device_hit_tokens += static_cast<int64_t>(result.slots.size());
  stats_.host_hit_tokens += result.host_only_tokens;
  return result;
}

void RadixCache::Lock(NodeId node) {
  At(node);
  if (!IsResident(node)) Fail("Lock of host-only node " + std::to_string(node));
  for (; node != kRoot; node = nodes_[node].parent) {
    Node& n = nodes_[node];
    if (n.lock_ref == 0) evictable_tokens_ -= static_cast<int64_t>(n.key.size());
    n.lock_ref += 1;
  }
}

void RadixCache::Unlock(NodeId node) {
  At(node);
  // Check the whole path before changing anything, so a bad call leaves the counts intact.
  for (NodeId n = node; n != kRoot; n = nodes_[n].parent) {
    if (nodes_[n].lock_ref <= 0) Fail("Unlock of unlocked node " + std::to_string(n));
  }
  for (; node != kRoot; node = nodes_[node].parent) {
    Node& n = nodes_[node];
    n.lock_ref -= 1;
    if (n.lock_ref == 0) evictable_tokens_ += static_cast<int64_t>(n.key.size());
  }
}

std::vector<int64_t> RadixCache::Insert(const std::vector<int64_t>& tokens,
                                        const std::vector<int64_t>& slots) {
  if (tokens.size() != slots.size() || tokens.size() % static_cast<size_t>(page_size_) != 0) {
    Fail("Insert of " + std::to_string(tokens.size()) + " tokens with " +
         std::to_string(slots.size()) + " slots in pages of " + std::to_string(page_size_));
  }
  ++clock_;
  std::vector<int64_t> duplicates;
  NodeId node = kRoot;
  size_t i = 0;
  while (i < tokens.size()) {
    const int64_t child_key = ChildKey(tokens, i);
    const auto it = nodes_[node].children.find(child_key);
    const int64_t matched =
        it == nodes_[node].children.end() ? 0 : MatchedPages(nodes_[it->second].key, tokens, i);
    // With slot-dependent records, nothing after a duplicate is cached (see the header).
    const bool adopt = !slot_dependent_records_ || duplicates.empty();
    if (matched == 0) {
      if (it != nodes_[node].children.end()) Fail("two first pages share a child key");
      if (!adopt) {
        duplicates.insert(duplicates.end(), slots.begin() + static_cast<int64_t>(i), slots.end());
        break;
      }
      const NodeId leaf = NewNode();
      Node& n = nodes_[leaf];
      n.key = Slice(tokens, i, tokens.size());
      n.slots = Slice(slots, i, slots.size());
      n.parent = node;
      n.last_access = clock_;
      nodes_[node].children[child_key] = leaf;
      const auto added = static_cast<int64_t>(n.key.size());
      device_tokens_ += added;
      evictable_tokens_ += added;
      stats_.inserted_tokens += added;
      break;
    }
    NodeId child = it->second;
    nodes_[child].last_access = clock_;
    if (matched < static_cast<int64_t>(nodes_[child].key.size())) child = Split(child, matched);
    Node& n = nodes_[child];
    if (IsResident(child)) {
      for (int64_t j = 0; j < matched; ++j) {
        if (n.slots[j] != slots[i + j]) duplicates.push_back(slots[i + j]);
      }
    } else {
      // The input recomputed a prefix the device had lost: its slots become the node's, and the
      // host copy is no longer needed (the device copy is the fresher one).
      n.slots = Slice(slots, i, i + matched);
      released_host_slots_.insert(released_host_slots_.end(), n.host_slots.begin(),
                                  n.host_slots.end());
      n.host_slots.clear();
      host_tokens_ -= matched;
      device_tokens_ += matched;
      evictable_tokens_ += matched;  // host-only nodes are never locked
      stats_.inserted_tokens += matched;
    }
    node = child;
    i += static_cast<size_t>(matched);
  }
  return duplicates;
}

std::vector<int64_t> RadixCache::Evict(int64_t num_tokens, const EvictCallback& on_evict) {
  // Min-heap of candidates by (last_access, id): unlocked resident nodes without resident
  // children. Rebuilt per call: Evict runs only when the allocator is dry.
  using Entry = std::pair<uint64_t, NodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto is_candidate = [&](NodeId id) {
    return id != kRoot && nodes_[id].live && IsResident(id) && nodes_[id].lock_ref == 0 &&
           !HasResidentChild(id);
  };
  for (NodeId id = 1; id < static_cast<NodeId>(nodes_.size()); ++id) {
    if (is_candidate(id)) heap.emplace(nodes_[id].last_access, id);
  }
  std::vector<int64_t> released;
  while (static_cast<int64_t>(released.size()) < num_tokens && !heap.empty()) {
    const NodeId id = heap.top().second;
    heap.pop();
    const NodeId parent = nodes_[id].parent;
    std::vector<int64_t> slots = nodes_[id].slots;
    const auto len = static_cast<int64_t>(slots.size());
    std::vector<int64_t> host_slots;
    if (on_evict) host_slots = on_evict(id, slots);
    device_tokens_ -= len;
    evictable_tokens_ -= len;
    stats_.evicted_tokens += len;
    if (host_tier_ && static_cast<int64_t>(host_slots.size()) == len) {
      nodes_[id].slots.clear();
      nodes_[id].host_slots = std::move(host_slots);
      host_tokens_ += len;
      stats_.backed_up_tokens += len;
    } else {
      Drop(id);
    }
    released.insert(released.end(), slots.begin(), slots.end());
    if (is_candidate(parent)) heap.emplace(nodes_[parent].last_access, parent);
  }
  return released;
}

void RadixCache::Drop(NodeId node) {
  // Resident nodes' device tokens were already taken off the counters by the caller (Evict drops
  // a node without resident children, Remove a whole unlocked subtree).
  std::vector<NodeId> stack{node};
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    Node& n = nodes_[id];
    for (const auto& [token, child] : n.children) stack.push_back(child);
    if (!n.host_slots.empty()) {
      host_tokens_ -= static_cast<int64_t>(n.host_slots.size());
      released_host_slots_.insert(released_host_slots_.end(), n.host_slots.begin(),
                                  n.host_slots.end());
    }
    if (id == node) nodes_[n.parent].children.erase(ChildKey(n.key, 0));
    nodes_[id] = Node{};
    free_ids_.push_back(id);
  }
}

std::vector<int64_t> RadixCache::LoadBack(NodeId node, const std::vector<int64_t>& device_slots) {
  const Node& n = At(node);
  if (n.host_slots.empty()) Fail("LoadBack of resident node " + std::to_string(node));
  if (!IsResident(n.parent)) Fail("LoadBack below a host-only node " + std::to_string(n.parent));
  if (device_slots.size() != n.key.size()) {
    Fail("LoadBack of " + std::to_string(n.key.size()) + " tokens into " +
         std::to_string(device_slots.size()) + " slots");
  }
  Node& m = nodes_[node];
  const auto len = static_cast<int64_t>(m.key.size());
  m.slots = device_slots;
  m.last_access = ++clock_;
  host_tokens_ -= len;
  device_tokens_ += len;
  evictable_tokens_ += len;
  stats_.loaded_back_tokens += len;
  return std::exchange(m.host_slots, {});
}

std::vector<int64_t> RadixCache::TakeReleasedHostSlots() {
  return std::exchange(released_host_slots_, {});
}

int64_t RadixCache::Depth(NodeId node) const {
  int64_t depth = 0;
  for (NodeId n = At(node).parent; n > kRoot; n = nodes_[n].parent) {
    depth += static_cast<int64_t>(nodes_[n].key.size());
  }
  return depth;
}

std::vector<RadixCache::NodeId> RadixCache::Children(NodeId node) const {
  std::vector<NodeId> out;
  for (const auto& [token, child] : At(node).children) out.push_back(child);
  return out;
}

int64_t RadixCache::KeyLength(NodeId node) const {
  return static_cast<int64_t>(At(node).key.size());
}

std::vector<int64_t> RadixCache::DeviceSlots(NodeId node) const { return At(node).slots; }

bool RadixCache::IsLocked(NodeId node, bool swa_component) const {
  (void)swa_component;  // no SWA component: the full lock answers both
  return At(node).lock_ref > 0;
}

void RadixCache::TEST_CheckInvariants() const {
  int64_t device = 0, evictable = 0, host = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    const std::string name = "node " + std::to_string(id);
    int64_t child_locks = 0;
    for (const auto& [token, child] : n.children) {
      const Node& c = At(child);
      if (c.parent != id) Fail(name + ": child " + std::to_string(child) + " has another parent");
      if (c.key.empty() || c.key.size() % static_cast<size_t>(page_size_) != 0 ||
          ChildKey(c.key, 0) != token) {
        Fail(name + ": child keyed by a wrong token, or not whole pages");
      }
      child_locks += c.lock_ref;
    }
    if (id == kRoot) continue;
    if (n.key.empty()) Fail(name + ": empty key");
    const bool resident = !n.slots.empty();
    if (resident == !n.host_slots.empty()) Fail(name + ": must be resident xor host-only");
    const auto& held = resident ? n.slots : n.host_slots;
    if (held.size() != n.key.size()) Fail(name + ": slot count differs from key length");
    if (resident && !IsResident(n.parent)) Fail(name + ": resident below a host-only node");
    if (!resident && n.lock_ref != 0) Fail(name + ": host-only node is locked");
    if (n.lock_ref < child_locks) Fail(name + ": lock_ref below its children's sum");
    const auto len = static_cast<int64_t>(n.key.size());
    if (resident) {
      device += len;
      if (n.lock_ref == 0) evictable += len;
    } else {
      host += len;
    }
  }
  if (device != device_tokens_ || evictable != evictable_tokens_ || host != host_tokens_) {
    Fail("counters (device " + std::to_string(device_tokens_) + ", evictable " +
         std::to_string(evictable_tokens_) + ", host " + std::to_string(host_tokens_) +
         ") differ from the tree (" + std::to_string(device) + ", " + std::to_string(evictable) +
         ", " + std::to_string(host) + ")");
  }
}

}  // namespace kvcanary::sim
