// FaultInjector::Explains: whether an open injection accounts for a violation row's slot. Rows name
// slots of the group's own slot space (SWA-pool or compressed-pool slots), so what an injection
// touched (full-pool slots, its victims' rows) is mapped into that space first.
#include <algorithm>
#include <vector>

#include "sim/compressed_state.h"
#include "sim/faults.h"
#include "sim/swa_state.h"

namespace kvcanary::sim {

bool FaultInjector::Explains(Engine& engine, const Open& open, int64_t slot, bool swa_tag) const {
  if (swa_tag) {
    // SWA rows name SWA-pool slots: map what the injection touched through the table.
    SwaState* swa = engine.swa();
    if (swa == nullptr) return false;
    if (open.swa_slots.count(slot)) return true;
    for (int64_t full : open.slots) {
      if (full > 0 && full < options_.num_slots && swa->LastSwaSlotOf(full) == slot) return true;
    }
    for (int64_t id : open.victims) {
      const Request* req = engine.FindRunning(id);
      if (req == nullptr) continue;
      for (int64_t full : req->slots) {
        if (swa->LastSwaSlotOf(full) == slot) return true;
      }
      const int32_t* row = engine.table().HostRow(req->row);
      for (int64_t pos = 0; pos < std::min<int64_t>(req->seq_len(), options_.max_context_len); ++pos) {
        const int64_t full = row[pos];
        if (full > 0 && full < options_.num_slots && swa->LastSwaSlotOf(full) == slot) return true;
      }
    }
    if (open.content.has_value() && swa->SlotContent(slot) == *open.content) return true;
    return false;
  }
  // A compressed pool's rows name compressed slots: the injection's own, or (through the full
  // slots whose entries name them) what it touched in the full pool and its victims' rows hold,
  // as the record after a stale entry fails its chain at its own slot. The two slot spaces
  // overlap in numbers, so each is only compared with its own.
  std::vector<int64_t> full_slots{slot};
  if (const CompressedState* compressed = engine.compressed()) {
    if (open.compressed_slots.count(slot)) return true;
    full_slots = compressed->FullSlotsNaming(slot);
  }
  for (int64_t full : full_slots) {
    if (open.slots.count(full)) return true;
    if (open.content.has_value() && full > 0 && full < options_.num_slots &&
        engine.SlotContent(full) == *open.content) {
      return true;
    }
    for (int64_t id : open.victims) {
      const Request* req = engine.FindRunning(id);
      if (req != nullptr && RowHolds(engine, *req, full)) return true;
    }
  }
  return false;
}

}  // namespace kvcanary::sim
