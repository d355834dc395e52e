// The forwards latency of FaultInjector: a victim is only verified in steps whose batch holds it,
// so the report counts the victims' forwards from an injection to its detection as well as wall
// steps. The rest of the bookkeeping is in faults.cpp.
#include <algorithm>

#include "sim/faults.h"

namespace kvcanary::sim {
namespace {

// Faults that free an allocation unit at the end of the injection step, after its forward.
bool FreesAUnit(FaultKind fault) {
  return fault == FaultKind::kStaleSlotReuse || fault == FaultKind::kFreedBlockReuse;
}

}  // namespace

bool FaultInjector::InPlace(const Engine& engine, Open& open) const {
  const Injection& injection = injections_[open.index];
  // Faults injected after the forward or at the sampler are opened after CountForward ran, so
  // their injection step does not count; the others act before the forward.
  if (!FreesAUnit(injection.fault) || open.overwritten) return true;
  if (step_ == injection.step) {
    // The unit is freed after this forward, which read intact records.
    for (int64_t slot : open.slots) open.freed_contents[slot] = engine.SlotContent(slot);
    return false;
  }
  // The pool's LIFO free list can keep the unit unused for several steps (an eviction frees more
  // slots on top of it): a verify can only see the fault once the new owner wrote into it.
  open.overwritten = std::any_of(
      open.freed_contents.begin(), open.freed_contents.end(),
      [&](const auto& freed) { return engine.SlotContent(freed.first) != freed.second; });
  return open.overwritten;
}

void FaultInjector::CountForward(const Engine& engine, const Batch& batch) {
  for (Open& open : opens_) {
    if (open.closed_step >= 0 || !InPlace(engine, open)) continue;
    // Without a victim (a cached prefix, a restore, the plan's stride), every forward of the
    // engine is one that could find the fault.
    const bool holds_victim =
        open.victims.empty() ||
        std::any_of(batch.rows.begin(), batch.rows.end(), [&](const BatchRow& row) {
          return open.victims.count(row.req->spec.id) > 0;
        });
    if (holds_victim) open.forward_steps.push_back(step_);
  }
}

int64_t FaultInjector::ForwardsThrough(const Open& open, int64_t detecting_step) {
  // The detecting forward counts as one whether or not it held a victim (a sweep, or another
  // request reading the same slot, can find the fault without one).
  const auto before = std::count_if(open.forward_steps.begin(), open.forward_steps.end(),
                                    [&](int64_t step) { return step < detecting_step; });
  return static_cast<int64_t>(before) + 1;
}

}  // namespace kvcanary::sim
