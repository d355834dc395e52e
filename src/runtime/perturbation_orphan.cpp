// real_perturb_bytes: SGLang's older real-KV flip, which prefers an orphan slot (cached in the
// prefix tree, held by no running request, outside the step's batch) so that only the sweep can
// see the corruption. Testing only, like every perturbation.
#include <unordered_set>
#include <vector>

#include "kvcanary/runtime/radix_view.h"
#include "runtime/perturbation.h"
#include "runtime/runtime_state.h"

namespace kvcanary::runtime {

std::vector<Perturber::CachedSlot> Perturber::OrphanSlots(const ForwardState& forward,
                                                          bool swa) const {
  if (host_.Radix() == nullptr) return {};
  // Every slot the batch touches: the table entries it reads and the slots it writes. A locked
  // node is held by a running request, but a request may read an unlocked node's slots too (an
  // engine that locks lazily), so the batch is excluded by slot as well.
  std::unordered_set<int64_t> in_batch;
  for (const ActiveEntry& entry : CollectActive(forward)) in_batch.insert(entry.slot);
  for (const int64_t slot : WrittenSlots(forward)) in_batch.insert(slot);
  const RadixWalk walk = WalkRadix(*host_.Radix(), /*unlocked_only=*/true,
                                   /*swa_resident_only=*/swa, host_.InstalledTable().max_seq_len);
  std::vector<CachedSlot> orphans;
  for (int64_t i = 0; i < walk.size(); ++i) {
    const int64_t slot = walk.slot_indices[i];
    if (slot >= 1 && in_batch.count(slot) == 0) orphans.push_back({slot, walk.positions[i]});
  }
  return orphans;
}

void Perturber::PerturbRealBytes(const ForwardState& forward, int64_t step) {
  const char* name = "real_perturb_bytes";
  const int group = PickGroup(name);
  if (group < 0) return;
  const bool swa = host_.Groups()[group].spec.kind == GroupKind::kSwa;
  const std::vector<CachedSlot> orphans = OrphanSlots(forward, swa);
  if (!orphans.empty()) {
    const CachedSlot& target = orphans[rng_.Below(static_cast<int64_t>(orphans.size()))];
    return Flip(name, group, target.slot, -1, target.position, step, /*random_byte=*/true);
  }
  if (config_.real_perturb_bytes_require_orphan) {
    return Skip(name, host_.Radix() == nullptr
                          ? "no radix cache is attached and require_orphan is set"
                          : "the radix cache has no orphan slot and require_orphan is set");
  }
  // No orphan: a live slot of the batch, which HEAD or TAIL then sees.
  const std::vector<ActiveEntry> live = LiveEntries(forward, group);
  if (live.empty()) return Skip(name, "the batch has no live slot and there is no orphan slot");
  const ActiveEntry& entry = live[rng_.Below(static_cast<int64_t>(live.size()))];
  Flip(name, group, entry.slot, entry.req_pool_idx, entry.position, step, /*random_byte=*/true);
}

}  // namespace kvcanary::runtime
