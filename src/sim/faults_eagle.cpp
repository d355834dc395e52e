// The speculative-decoding fault: eagle_position_plus_one, an inner draft forward that writes its
// token at position + 1 (the off-by-one a draft worker makes when it numbers the drafts from the
// sampled token instead of from the last token in the cache). The write's chain-position check
// sees it at once (the record before it holds position - 1); the next draft forward's verify
// reads the wrong position too.
#include <sstream>

#include "sim/faults.h"

namespace kvcanary::sim {

void FaultInjector::OnDrafts(Engine& engine, std::vector<DraftRow>& drafts) {
  (void)engine;
  // A victim's drafts are part of its row this step: the violations a fault causes on them (a
  // chain that follows a bent record) are the fault's, even after a rejected draft's slot is freed.
  for (Open& open : opens_) {
    if (open.closed_step >= 0) continue;
    for (const DraftRow& draft : drafts) {
      if (open.victims.count(draft.req->spec.id))
        open.slots.insert(draft.slots.begin(), draft.slots.end());
    }
  }
  if (!Due(FaultKind::kEaglePositionPlusOne)) return;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const Request& req = *drafts[i].req;
    const int64_t remaining = req.spec.max_new_tokens - static_cast<int64_t>(req.output.size());
    if (remaining >= kVictimMargin && req.seq_len() + kVictimMargin < options_.max_context_len) {
      candidates.push_back(i);
    }
  }
  if (candidates.empty()) return;
  DraftRow& draft = drafts[candidates[Uniform(0, static_cast<int64_t>(candidates.size()) - 1)]];
  const int64_t j = Uniform(0, static_cast<int64_t>(draft.slots.size()) - 1);
  draft.positions[j] += 1;
  std::ostringstream target;
  target << "req " << draft.req->spec.id << " draft " << j << " wrote position "
         << draft.positions[j] << " instead of " << draft.positions[j] - 1 << " (slot "
         << draft.slots[j] << ")";
  Open& open = Start(FaultKind::kEaglePositionPlusOne, target.str());
  open.victims = {draft.req->spec.id};
  open.slots.insert(draft.slots.begin(), draft.slots.end());
  open.abort_victims = true;  // an accepted draft's record keeps the wrong position
}

}  // namespace kvcanary::sim
