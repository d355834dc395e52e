// The engine's quarantine policy (--on-violation quarantine): sampled tokens are held back until
// the canary's verdict covers them (HeldTokens), and when a violation names requests
// (CanaryManager::TakeAffectedRequests) the engine discards their held tokens, sends them back to
// be computed again from their token ids, keeps their failing slots out of reuse and drops the
// cached prefixes that hold those slots. Nothing corrupted reaches a user, and every request still
// finishes with the model's own output.
#include <algorithm>

#include "kvcanary/runtime/health.h"
#include "sim/engine.h"

namespace kvcanary::sim {
namespace {

// Steps of row ownership kept: a report names rows of its step and the one before.
constexpr int64_t kOwnerHistorySteps = 3;

}  // namespace

void Engine::RecordRowOwners(const Batch& batch, int64_t outer) {
  std::map<int64_t, int64_t>& owners = row_owners_[outer];
  for (const BatchRow& row : batch.rows) owners[row.row] = row.req->spec.id;
  while (!row_owners_.empty() && row_owners_.begin()->first + kOwnerHistorySteps <= outer) {
    row_owners_.erase(row_owners_.begin());
  }
}

void Engine::HoldSampled(const Batch& batch, const std::vector<int64_t>& sampled, int64_t outer,
                         const std::vector<std::unique_ptr<Request>>& done) {
  // This forward consumed (wrote and checked) the tokens its rows were fed: count it first.
  for (const BatchRow& row : batch.rows) held_->Forwarded(row.req->spec.id, outer);
  // The sampler's tokens first (as the hooks left them), then those the drafts appended: each
  // request's accepted drafts and bonus, after its sampled token.
  for (size_t k = 0; k < last_sampled_.size(); ++k) {
    const SampledToken& token = last_sampled_[k];
    const int64_t actual = k < sampled.size() ? sampled[k] : token.actual;
    held_->Hold(token.req->spec.id, token.position, actual, token.expected, outer);
  }
  for (const std::unique_ptr<Request>& req : done) held_->Finished(req->spec.id, outer);
}

void Engine::VerifyFinishedSlots(const std::vector<std::unique_ptr<Request>>& done) {
  // One walk for the step's finished requests: one verification (and its stream waits), not one
  // a request.
  runtime::RadixWalk walk;
  for (const std::unique_ptr<Request>& req : done) {
    const runtime::RadixWalk own = runtime::WalkOfSequence(req->slots);
    walk.slot_indices.insert(walk.slot_indices.end(), own.slot_indices.begin(),
                             own.slot_indices.end());
    walk.positions.insert(walk.positions.end(), own.positions.begin(), own.positions.end());
    walk.prev_slot_indices.insert(walk.prev_slot_indices.end(), own.prev_slot_indices.begin(),
                                  own.prev_slot_indices.end());
  }
  if (walk.size() > 0) canary_->VerifyRecordsNow(walk);
}

Request* Engine::FindHeldRequest(int64_t id) {
  if (Request* running = FindRunning(id)) return running;
  for (const std::unique_ptr<Request>& req : finishing_) {
    if (req->spec.id == id) return req.get();
  }
  return nullptr;
}

void Engine::AfterVerdict(int64_t outer) {
  // Failing slots: the ones the named requests read or wrote, and any other full-pool slot a
  // row showed (a sweep row names a cached slot no request holds).
  std::set<int64_t> failing;
  std::set<int64_t> swept;  // the failing slots a sweep (or VerifyRecordsNow) found
  for (size_t i = violations_seen_; i < violations_.size(); ++i) {
    AddFullPoolSlotsOf(violations_[i].row, failing);
    if (runtime::IsSweepTag(static_cast<int>(violations_[i].row.kernel_kind))) {
      AddFullPoolSlotsOf(violations_[i].row, swept);
    }
  }
  violations_seen_ = violations_.size();
  std::set<int64_t> ids;
  for (const runtime::AffectedRequest& affected : canary_->TakeAffectedRequests()) {
    failing.insert(affected.slots.begin(), affected.slots.end());
    const auto step = row_owners_.find(affected.step);
    if (step == row_owners_.end()) continue;
    const auto owner = step->second.find(affected.req_pool_idx);
    if (owner != step->second.end()) ids.insert(owner->second);
  }
  if (options_.verify_sample > 1) {
    // A finished request's last verdict is the verification of its slots (VerifyFinishedSlots),
    // whose rows name slots, not requests.
    const auto reads_any_of = [](const Request& req, const std::set<int64_t>& slots) {
      return std::any_of(req.slots.begin(), req.slots.end(),
                         [&](int64_t slot) { return slots.count(slot) > 0; });
    };
    for (const std::unique_ptr<Request>& req : finishing_) {
      if (reads_any_of(*req, failing)) ids.insert(req->spec.id);
    }
    // A sweep's row names a slot only: the running requests that read it are affected too (at
    // K = 1 their own next verify names them; sampled, it may not see the slot for K forwards).
    for (const std::unique_ptr<Request>& req : scheduler_->running()) {
      if (reads_any_of(*req, swept)) ids.insert(req->spec.id);
    }
  }
  for (int64_t id : ids) Recompute(id);
  bad_slots_.insert(failing.begin(), failing.end());
  RemoveCachedBadSlots();
  // Every violation of the steps before `outer` is known now.
  Deliver(held_->Release(outer - 1));
}

void Engine::AddFullPoolSlotsOf(const runtime::ViolationRow& row, std::set<int64_t>& slots) const {
  // Rows of the SWA launches name SWA-pool slots, which neither the cache nor a request's slots
  // hold.
  if (row.kernel_kind >= 6 && row.kernel_kind < 12) return;
  if (compressed_) {
    const std::vector<int64_t> full = compressed_->FullSlotsNaming(row.slot_idx);
    slots.insert(full.begin(), full.end());
    return;
  }
  slots.insert(row.slot_idx);
}

bool Engine::OwnedByRunning(int64_t unit, const Request* except) const {
  for (const std::unique_ptr<Request>& req : scheduler_->running()) {
    if (req.get() == except) continue;
    for (size_t pos = static_cast<size_t>(req->cached_len); pos < req->slots.size(); ++pos) {
      if (req->slots[pos] / Unit() == unit) return true;
    }
  }
  return false;
}

std::set<int64_t> Engine::OwnUnits(const Request& req) const {
  std::set<int64_t> units;
  for (size_t pos = static_cast<size_t>(req.cached_len); pos < req.slots.size(); ++pos) {
    units.insert(req.slots[pos] / Unit());
  }
  return units;
}

std::vector<int64_t> Engine::UnitsOwnedElsewhere(const Request& req) const {
  const std::set<int64_t> own = OwnUnits(req);
  std::set<int64_t> shared;
  for (const std::unique_ptr<Request>& other : scheduler_->running()) {
    if (other.get() == &req) continue;
    for (int64_t unit : OwnUnits(*other)) {
      if (own.count(unit)) shared.insert(unit);
    }
  }
  std::set<int64_t> own_slots;
  for (int64_t unit : own) {
    for (int64_t slot = unit * Unit(); slot < (unit + 1) * Unit(); ++slot) own_slots.insert(slot);
  }
  for (RadixCache::NodeId node : radix_->ResidentNodesHolding(own_slots)) {
    for (int64_t slot : radix_->DeviceSlots(node)) {
      if (own.count(slot / Unit())) shared.insert(slot / Unit());
    }
  }
  return {shared.begin(), shared.end()};
}

void Engine::Recompute(int64_t id) {
  if (Request* req = FindHeldRequest(id); req != nullptr && hooks_ != nullptr) {
    hooks_->BeforeRecompute(*this, *req);
  }
  for (const HeldToken& token : held_->Discard(id)) {
    outcomes_.push_back(TokenOutcome{id, token.position, token.corrupted(), false});
    quarantine_stats_.tokens_discarded += 1;
  }
  Request* req = FindRunning(id);
  if (req != nullptr) {
    // A unit may be another owner's too (a slot freed while in use and handed out again): it
    // stays with that owner, so it is not freed twice. Not only the failing units: a sampled
    // verify may name the slot after the reused one (its chain hash) and not the reused slot.
    scheduler_->Requeue(req, UnitsOwnedElsewhere(*req), req->delivered);
  } else {
    auto it = std::find_if(finishing_.begin(), finishing_.end(),
                           [id](const std::unique_ptr<Request>& r) { return r->spec.id == id; });
    if (it == finishing_.end()) return;  // already queued again, or gone
    req = it->get();
    scheduler_->Resubmit(std::move(*it), req->delivered);
    finishing_.erase(it);
  }
  ForgetRequest(id);
  // Its last delivered token is the sampler's own: the write of it is checked against that.
  if (!req->output.empty()) last_true_sample_[id] = req->output.back();
  quarantine_stats_.requests_recomputed += 1;
}

void Engine::RemoveCachedBadSlots() {
  // Called every step: with no failing slot pending there is nothing to look for, and the walks
  // below would visit every radix node twice for nothing.
  if (bad_slots_.empty()) return;
  // A locked node waits for the requests reading it (a violation names them when they verify it).
  for (;;) {
    std::vector<RadixCache::NodeId> nodes = radix_->ResidentNodesHolding(bad_slots_);
    auto unlocked = std::find_if(nodes.begin(), nodes.end(),
                                 [&](RadixCache::NodeId node) { return radix_->LockRef(node) == 0; });
    if (unlocked == nodes.end()) break;
    std::vector<int64_t> units;
    const std::vector<int64_t> slots = radix_->Remove(*unlocked);
    for (int64_t u : WholeBlocksOf(slots, Unit())) {
      // A running request may own one too (handed out again while the cache held it).
      if (!OwnedByRunning(u, nullptr) && !allocator_->IsFree(u)) units.push_back(u);
    }
    allocator_->Free(units);
    quarantine_stats_.nodes_removed += 1;
  }
  // Slots no cached prefix holds any more need no watch.
  std::set<int64_t> still_cached;
  for (RadixCache::NodeId node : radix_->ResidentNodesHolding(bad_slots_)) {
    for (int64_t slot : radix_->DeviceSlots(node)) {
      if (bad_slots_.count(slot)) still_cached.insert(slot);
    }
  }
  bad_slots_.swap(still_cached);
}

void Engine::Deliver(const std::vector<HeldToken>& tokens) {
  for (const HeldToken& token : tokens) {
    outcomes_.push_back(TokenOutcome{token.request, token.position, token.corrupted(), true});
    quarantine_stats_.tokens_delivered += 1;
    if (Request* req = FindHeldRequest(token.request)) req->delivered += 1;
  }
  for (auto it = finishing_.begin(); it != finishing_.end();) {
    if (held_->Holds((*it)->spec.id)) {
      ++it;
      continue;
    }
    std::unique_ptr<Request> done = std::move(*it);
    it = finishing_.erase(it);
    Finish(std::move(done));
  }
}

std::vector<TokenOutcome> Engine::TakeTokenOutcomes() {
  std::vector<TokenOutcome> taken;
  taken.swap(outcomes_);
  return taken;
}

}  // namespace kvcanary::sim
