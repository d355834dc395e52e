// A group whose records live in a slot space of their own, reached from the full pool's slots
// through a table: the SWA group (full_to_swa) and a compressed pool (full_to_compressed, one slot
// per compress_ratio full-pool tokens). The runtime reuses one path for both: the plan translates
// the slots it reads, SwaTranslate the slots the write stores to, the sweep its walk.
#pragma once

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/config.h"

namespace kvcanary::runtime {

// A FULL group with compress_ratio > 1.
inline bool IsCompressed(const GroupSpec& spec) { return spec.compress_ratio > 1; }

// The group's full slot -> group slot table: full_to_swa for SWA, full_to_compressed for a
// compressed group, absent otherwise.
inline TensorView SlotTable(const GroupSpec& spec) {
  if (spec.kind == GroupKind::kSwa) return spec.full_to_swa;
  return IsCompressed(spec) ? spec.full_to_compressed : TensorView();
}

// Refuses a compressed description its fields or the install contradict: a ratio below 1, a table
// without a ratio or a ratio without a table, a compressed SWA group, a table that is not int64
// [pool_slot_count + 1] on the install's device, fewer slots than the ratio needs, or the SWA
// divergence report (which reads FULL records at full slots). Throws kvcanary::Error.
void CheckCompressedPool(const GroupSpec& spec, const InstallArgs& args, const Config& config);

}  // namespace kvcanary::runtime
