// The fault classes' names: one table for both directions, so a name cannot drift between
// FaultName and ParseFault.
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/sim_options.h"

namespace kvcanary::sim {
namespace {

struct FaultEntry {
  FaultKind fault;
  const char* name;
};

constexpr std::array<FaultEntry, 22> kFaults = {{
    {FaultKind::kReqToToken, "req_to_token"},
    {FaultKind::kStrideView, "stride_view"},
    {FaultKind::kWrongStrideRead, "wrong_stride_read"},
    {FaultKind::kRealKvUsed, "real_kv_used"},
    {FaultKind::kRealKvUnusedCache, "real_kv_unused_cache"},
    {FaultKind::kRealKvPostForward, "real_kv_post_forward"},
    {FaultKind::kStaleSlotReuse, "stale_slot_reuse"},
    {FaultKind::kOffloadDrop, "offload_drop"},
    {FaultKind::kPdTransferDrop, "pd_transfer_drop"},
    {FaultKind::kSwaLutStale, "swa_lut_stale"},
    {FaultKind::kNextTokenSwap, "next_token_swap"},
    {FaultKind::kPositionSkip, "position_skip"},
    {FaultKind::kBlockTableSwap, "block_table_swap"},
    {FaultKind::kFreedBlockReuse, "freed_block_reuse"},
    {FaultKind::kRealKvPage, "real_kv_page"},
    {FaultKind::kStaleOutCacheLoc, "stale_out_cache_loc"},
    {FaultKind::kRealKvDeepLayer, "real_kv_deep_layer"},
    {FaultKind::kL3Corrupt, "l3_corrupt"},
    {FaultKind::kL3Stale, "l3_stale"},
    {FaultKind::kEaglePositionPlusOne, "eagle_position_plus_one"},
    {FaultKind::kMlaLatentPage, "mla_latent_page"},
    {FaultKind::kCompressedSlotStale, "compressed_slot_stale"},
}};

}  // namespace

const char* FaultName(FaultKind fault) {
  for (const FaultEntry& entry : kFaults) {
    if (entry.fault == fault) return entry.name;
  }
  return "unknown";
}

std::optional<FaultKind> ParseFault(std::string_view name) {
  for (const FaultEntry& entry : kFaults) {
    if (name == entry.name) return entry.fault;
  }
  return std::nullopt;
}

std::vector<FaultKind> AllFaults() {
  std::vector<FaultKind> faults;
  for (const FaultEntry& entry : kFaults) faults.push_back(entry.fault);
  return faults;
}

}  // namespace kvcanary::sim
