// The faults of the pool kinds the canary sees through a description: mla_latent_page (an MLA
// pool's latent page written through another page) and compressed_slot_stale (a compressed
// pool's table entry naming the compressed slot of a freed full slot).
#include <sstream>
#include <utility>
#include <vector>

#include "sim/faults.h"

namespace kvcanary::sim {

void FaultInjector::InjectPoolKindFault(FaultKind kind, Engine& engine, Batch& batch) {
  if (kind == FaultKind::kMlaLatentPage) return InjectMlaLatentPage(engine, batch);
  if (kind == FaultKind::kCompressedSlotStale) return InjectCompressedSlotStale(engine, batch);
}

void FaultInjector::InjectMlaLatentPage(Engine& engine, Batch& batch) {
  size_t index = 0;
  Request* victim = PickDecodeVictim(batch, 2, &index);
  if (victim == nullptr) return;
  // The decode token's latent bytes land on a page of its own prefix, which TAIL verifies in this
  // very forward; its own page keeps the bytes of whatever held it before.
  const int64_t own = batch.rows[index].new_slots[0];
  const int64_t pos = Uniform(0, batch.rows[index].prefix_len - 1);
  const int64_t other = victim->slots[pos];
  engine.MisdirectLatentWrite(own, other);
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << victim->kv_len << ": latent page of slot "
         << own << " written through the page of slot " << other << " (pos " << pos << ")";
  Open& open = Start(FaultKind::kMlaLatentPage, target.str());
  open.victims = {victim->spec.id};
  open.slots = {own, other};
  open.content = engine.SlotContent(other);
  open.undo = [content = *open.content](Engine& e) { e.RepairKv(content); };
  open.abort_victims = true;  // its own page's record fingerprints the stale bytes
}

void FaultInjector::InjectCompressedSlotStale(Engine& engine, Batch& batch) {
  CompressedState* compressed = engine.compressed();
  if (compressed == nullptr) return;
  Request* victim = PickDecodeVictim(batch, 2 * compressed->ratio());
  if (victim == nullptr) return;
  std::vector<int64_t> closing;  // prefix positions whose slot closes a compressed slot
  for (int64_t pos = 0; pos < victim->kv_len; ++pos) {
    if (compressed->ClosedBy(victim->slots[pos]) != 0) closing.push_back(pos);
  }
  if (closing.empty()) return;
  const int64_t pos = closing[Uniform(0, static_cast<int64_t>(closing.size()) - 1)];
  const int64_t full = victim->slots[pos];
  // The entry left from before: the compressed slot of a full slot used and freed since, which
  // holds another position's record. (A never-written record reads as untouched, which the
  // reporter leaves out.)
  std::vector<int64_t> freed;
  for (int64_t slot = 1; slot < engine.allocator().num_slots(); ++slot) {
    const std::pair<int64_t, int64_t> held = engine.SlotContent(slot);
    if (compressed->ClosedBy(slot) != 0 && engine.allocator().IsFree(slot) &&
        held != std::make_pair<int64_t, int64_t>(0, 0) && held.second != pos) {
      freed.push_back(slot);
    }
  }
  if (freed.empty()) return;
  const int64_t stale =
      compressed->ClosedBy(freed[Uniform(0, static_cast<int64_t>(freed.size()) - 1)]);
  const int64_t proper = compressed->Entry(full);
  compressed->SetEntry(full, stale);
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << ": full slot " << full
         << " maps to compressed slot " << stale << " of a freed slot instead of " << proper;
  Open& open = Start(FaultKind::kCompressedSlotStale, target.str());
  open.victims = {victim->spec.id};
  open.compressed_slots = {stale};  // the canary's rows name compressed slots
  open.undo = [full, proper](Engine& e) { e.compressed()->SetEntry(full, proper); };
}

}  // namespace kvcanary::sim
