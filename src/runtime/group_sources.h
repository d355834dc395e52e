// The real-KV sources of one half of a buffer group, chosen at install from the half's layers
// (GroupSpec::k_layer0 or k_layers, likewise V) and Config::fingerprint_layers.
#pragma once

#include <vector>

#include "kvcanary/context.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/config.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime {

struct HalfSources {
  std::vector<RealKvSource> sources;  // what each TAIL and SWEEP launch passes; empty: none
  std::vector<TensorView> layers;     // the fingerprinted layers in fold order (the perturber's)
  DeviceBuffer layer_table;           // [layers] int64 addresses when one source spans them
};

// The layers a half lists: its `layers` list, else layer 0 alone. Throws for both given, more than
// kMaxRealKvLayers layers, or verify_backup (which re-hashes one layer) with more than one
// fingerprinted layer.
std::vector<TensorView> ListedLayers(const TensorView& layer0, const std::vector<TensorView>& layers,
                                     const char* half, const GroupSpec& spec, const Config& config);

// Where a group's sources live and how many of them one launch may take.
struct SourceTarget {
  Device device;
  StreamHandle stream = nullptr;
  int max_sources = kMaxRealKvSources;  // more fingerprinted layers share one spanning source
};

// The sources of the fingerprinted layers of `listed`: none with mode none or a row width that is
// not a positive multiple of 16; one per layer up to target.max_sources layers; beyond, one source
// spanning them through an address table allocated on target.device here (never per step).
HalfSources BuildHalfSources(const std::vector<TensorView>& listed, const char* half,
                             const GroupSpec& spec, const Config& config,
                             const SourceTarget& target);

// The same for an nsa group's indexer_layers (their own bytes per token, the group's page size),
// folded by the K half after its latent sources.
HalfSources BuildIndexerSources(const GroupSpec& spec, const Config& config,
                                const SourceTarget& target);

// Refuses a layout its fields contradict (pool_layout.cpp): a V layer in an mla or nsa group,
// indexer layers outside nsa, an nsa group without them or with a row width the fingerprint
// cannot fold, more than kMaxRealKvLayers of them, or verify_backup (which re-hashes the latent
// layer alone) over an nsa group.
void CheckPoolLayout(const GroupSpec& spec, const Config& config);

}  // namespace kvcanary::runtime
