// Removing cached prefixes that hold failing slots (an engine's quarantine): the nodes holding
// a slot, and the removal of an unlocked node with its whole subtree.
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/radix_cache.h"

namespace kvcanary::sim {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  throw std::logic_error("kv-canary sim: radix cache: " + what);
}

}  // namespace

std::vector<RadixCache::NodeId> RadixCache::ResidentNodesHolding(
    const std::set<int64_t>& slots) const {
  std::vector<NodeId> holding;
  for (NodeId id = 1; id < static_cast<NodeId>(nodes_.size()); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    for (int64_t slot : n.slots) {
      if (slots.count(slot)) {
        holding.push_back(id);
        break;
      }
    }
  }
  return holding;
}

std::vector<int64_t> RadixCache::Remove(NodeId node) {
  const Node& n = At(node);
  if (node == kRoot || !IsResident(node) || n.lock_ref != 0) {
    Fail("Remove of node " + std::to_string(node) + ": expected an unlocked resident node");
  }
  std::vector<int64_t> released;
  std::vector<NodeId> stack{node};
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    for (const auto& [token, child] : nodes_[id].children) stack.push_back(child);
    released.insert(released.end(), nodes_[id].slots.begin(), nodes_[id].slots.end());
  }
  const auto len = static_cast<int64_t>(released.size());
  device_tokens_ -= len;
  evictable_tokens_ -= len;  // the subtree is unlocked: lock_ref counts descendants' locks
  stats_.evicted_tokens += len;
  Drop(node);
  return released;
}

}  // namespace kvcanary::sim
