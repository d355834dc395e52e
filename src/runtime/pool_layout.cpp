// The pool layouts' names and the install refusals of a layout its group's fields contradict.
#include "kvcanary/runtime/pool_layout.h"

#include <cstdint>
#include <iterator>
#include <string>

#include "kvcanary/error.h"
#include "runtime/group_sources.h"

namespace kvcanary::runtime {
namespace {

constexpr const char* kPoolLayoutNames[] = {"mha", "mla", "nsa"};

std::string GroupName(const GroupSpec& spec) {
  return std::string("group ") + GroupKindName(spec.kind);
}

int64_t VLayerCount(const GroupSpec& spec) {
  return static_cast<int64_t>(spec.v_layers.size()) + (spec.v_layer0.defined() ? 1 : 0);
}

// nsa: the indexer's key buffer is there, foldable, and within the layer limit.
void CheckIndexer(const GroupSpec& spec, const Config& config) {
  const std::string group = GroupName(spec);
  if (spec.indexer_layers.empty()) {
    ThrowError("kv-canary: ", group,
               " indexer_layers must hold the indexer's key buffer with layout nsa, got none");
  }
  if (static_cast<int64_t>(spec.indexer_layers.size()) > kMaxRealKvLayers) {
    ThrowError("kv-canary: ", group, " indexer_layers must hold at most ", kMaxRealKvLayers,
               " layers, got ", spec.indexer_layers.size());
  }
  if (spec.indexer_bytes_per_token <= 0 || spec.indexer_bytes_per_token % kRealKvBlockBytes != 0) {
    ThrowError("kv-canary: ", group, " indexer_bytes_per_token must be a positive multiple of ",
               kRealKvBlockBytes, ", got ", spec.indexer_bytes_per_token);
  }
  if (config.verify_backup) {
    ThrowError("kv-canary: verify_backup re-hashes the latent layer alone; ", group,
               " layout nsa also fingerprints indexer_layers (turn verify_backup off)");
  }
}

}  // namespace

const char* PoolLayoutName(PoolLayout layout) {
  const auto index = static_cast<size_t>(layout);
  return index < std::size(kPoolLayoutNames) ? kPoolLayoutNames[index] : "unknown";
}

void CheckPoolLayout(const GroupSpec& spec, const Config& config) {
  const std::string group = GroupName(spec);
  const int raw = static_cast<int>(spec.layout);
  if (raw < 0 || raw >= static_cast<int>(std::size(kPoolLayoutNames))) {
    ThrowError("kv-canary: ", group, " layout must be one of mha/mla/nsa, got ", raw);
  }
  const char* name = PoolLayoutName(spec.layout);
  if (spec.layout != PoolLayout::kMha && VLayerCount(spec) > 0) {
    ThrowError("kv-canary: ", group, " v_layer0 and v_layers must be empty with layout ", name,
               " (its latent layers are k_layer0 / k_layers), got ", VLayerCount(spec),
               " V layer(s)");
  }
  if (spec.layout != PoolLayout::kNsa && !spec.indexer_layers.empty()) {
    ThrowError("kv-canary: ", group, " indexer_layers must be empty unless layout is nsa, got ",
               spec.indexer_layers.size(), " layer(s) with layout ", name);
  }
  if (spec.layout == PoolLayout::kNsa) CheckIndexer(spec, config);
}

}  // namespace kvcanary::runtime
