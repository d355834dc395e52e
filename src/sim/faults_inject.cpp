// The injection side of FaultInjector: one function per fault class, each breaking the engine
// the way a buggy engine would and opening an injection that records what it touched. The
// bookkeeping side (attribution, quarantine) is in faults.cpp.
#include <algorithm>
#include <set>
#include <sstream>

#include "kvcanary/runtime/radix_view.h"
#include "sim/faults.h"

namespace kvcanary::sim {

void FaultInjector::InjectReqToToken(Engine& engine, Batch& batch) {
  Request* victim = PickDecodeVictim(batch, 4);
  if (victim == nullptr) return;
  const int64_t row = victim->row;
  const int64_t pos = Uniform(0, victim->kv_len - 3);  // never the write seed (kv_len - 1)
  const int64_t original = engine.table().Get(row, pos);
  // A live slot of another request whose record differs: a slot with the same token at the same
  // position after the same prefix is indistinguishable, and harmless.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const BatchRow& donor_row = batch.rows[Uniform(0, static_cast<int64_t>(batch.rows.size()) - 1)];
    if (donor_row.req == victim || donor_row.prefix_len < 1) continue;
    const int64_t donor = engine.table().Get(donor_row.row, Uniform(0, donor_row.prefix_len - 1));
    if (donor <= 0 || donor == original || engine.SlotContent(donor) == engine.SlotContent(original)) {
      continue;
    }
    engine.table().Set(row, pos, donor);
    std::ostringstream target;
    target << "req " << victim->spec.id << " row " << row << " pos " << pos << ": slot "
           << original << " -> " << donor;
    Open& open = Start(FaultKind::kReqToToken, target.str());
    open.victims = {victim->spec.id};
    open.slots = {donor, original, engine.table().Get(row, pos + 1)};
    const int64_t id = victim->spec.id;
    open.undo = [id, row, pos, original](Engine& e) {
      Request* req = e.FindRunning(id);
      if (req != nullptr && req->row == row) e.table().Set(row, pos, original);
    };
    return;
  }
}

void FaultInjector::InjectStrideView(ForwardView& view, Engine& engine) {
  // The table became a view of a wider one; the engine still passes its old hard-coded pitch.
  view.stride0 = engine.options().max_context_len;
  std::ostringstream target;
  target << "plan called with req_to_token_stride0=" << engine.options().max_context_len
         << " on a view of pitch " << engine.table().row_pitch();
  Start(FaultKind::kStrideView, target.str());
}

bool FaultInjector::OnApiError(Engine&, const std::string& message) {
  if (message.find("req_to_token_stride0") == std::string::npos) return false;
  for (Open& open : opens_) {
    Injection& injection = injections_[open.index];
    if (open.closed_step < 0 && injection.fault == FaultKind::kStrideView) {
      injection.detected = true;
      injection.detected_step = step_;
      injection.detected_by = "API: " + message;
      injection.detected_forwards = ForwardsThrough(open, step_);
      return true;
    }
  }
  return false;
}

void FaultInjector::InjectWrongStrideRead(Engine& engine, Batch& batch, ForwardView& view) {
  if (batch.kind != Batch::kDecode || batch.rows.size() < 2) return;
  for (const BatchRow& row : batch.rows) {
    if (row.req->seq_len() + kVictimMargin >= options_.max_context_len) return;
  }
  // Every row is a victim and will be aborted: none may finish (and hand its wrongly chained
  // records to the radix cache) before the quarantine.
  for (const BatchRow& row : batch.rows) {
    const int64_t floor = static_cast<int64_t>(row.req->output.size()) + kVictimMargin;
    row.req->spec.max_new_tokens = std::max(row.req->spec.max_new_tokens, floor);
  }
  const int64_t stale = options_.max_context_len;
  view.table_stride = stale;
  view.stride0 = stale;  // consistent with the view: the op cannot tell, only the records can
  std::ostringstream target;
  target << "decode batch of " << batch.rows.size() << " rows read with row stride " << stale
         << " instead of " << engine.table().row_pitch();
  Open& open = Start(FaultKind::kWrongStrideRead, target.str());
  const int32_t* data = engine.table().HostData();
  for (const BatchRow& row : batch.rows) {
    open.victims.insert(row.req->spec.id);
    for (int64_t pos = 0; pos < row.prefix_len + row.extend_len; ++pos) {
      open.slots.insert(data[row.row * stale + pos]);
    }
    open.slots.insert(row.new_slots.begin(), row.new_slots.end());
  }
  open.abort_victims = true;  // their new records were chained to the wrong predecessors
}

void FaultInjector::InjectRealKvUsed(Engine& engine, Batch& batch) {
  Request* victim = PickDecodeVictim(batch, 2);
  if (victim == nullptr) return;
  const int64_t pos = Uniform(0, victim->kv_len - 1);
  const int64_t slot = victim->slots[pos];
  const int64_t byte = Uniform(0, 15);  // inside the 16 bytes `partial` fingerprints
  engine.pool().FlipByte(0, 0, slot, byte);
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << " slot " << slot << " layer 0 K byte "
         << byte;
  Open& open = Start(FaultKind::kRealKvUsed, target.str());
  open.victims = {victim->spec.id};
  MarkFlip(engine, open, slot);
}

void FaultInjector::InjectRealKvDeepLayer(Engine& engine, Batch& batch) {
  Request* victim = PickDecodeVictim(batch, 2);
  if (victim == nullptr) return;
  const int64_t pos = Uniform(0, victim->kv_len - 1);
  const BlockTable* blocks = engine.block_table();
  const int64_t slot = blocks != nullptr ? blocks->SlotAt(victim->row, pos) : victim->slots[pos];
  // A layer past layer 0: only --fingerprint-layers all can see it.
  const int layer = static_cast<int>(Uniform(1, engine.pool().num_layers() - 1));
  const int kv = static_cast<int>(Uniform(0, 1));
  const int64_t byte = Uniform(0, 15);  // inside the 16 bytes `partial` fingerprints
  engine.pool().FlipByte(layer, kv, slot, byte);
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << " slot " << slot << " layer " << layer
         << (kv == 0 ? " K" : " V") << " byte " << byte;
  Open& open = Start(FaultKind::kRealKvDeepLayer, target.str());
  open.victims = {victim->spec.id};
  MarkFlip(engine, open, slot);
}

void FaultInjector::InjectRealKvUnusedCache(Engine& engine) {
  // Only right before a sweep: eviction runs while scheduling, so the flipped slot is still
  // cached when this step's sweep reads it (an evicted flip would go to the host tier unseen).
  const runtime::CanaryManager* canary = engine.canary();
  const int64_t interval = options_.sweep_interval;
  if (canary != nullptr && interval > 0 && canary->outer_step() % interval != 0) return;
  const runtime::RadixWalk walk = runtime::WalkRadix(engine.radix(), /*unlocked_only=*/true);
  std::set<int64_t> in_use;
  for (const auto& req : engine.scheduler().running()) in_use.insert(req->slots.begin(), req->slots.end());
  std::vector<int64_t> orphans;
  for (int64_t slot : walk.slot_indices) {
    if (slot > 0 && !in_use.count(slot)) orphans.push_back(slot);
  }
  if (orphans.empty()) return;
  const int64_t slot = orphans[Uniform(0, static_cast<int64_t>(orphans.size()) - 1)];
  const int64_t byte = Uniform(0, 15);
  engine.pool().FlipByte(0, 0, slot, byte);
  std::ostringstream target;
  target << "cached slot " << slot << " (no running request) layer 0 K byte " << byte;
  Open& open = Start(FaultKind::kRealKvUnusedCache, target.str());
  MarkFlip(engine, open, slot);
}

void FaultInjector::InjectStaleSlotReuse(Engine&, Batch& batch) {
  Request* victim = PickDecodeVictim(batch, 3);
  if (victim == nullptr || victim->kv_len - 2 < victim->cached_len) return;
  // An owned slot (not the radix cache's), never the write seed.
  const int64_t pos = Uniform(victim->cached_len, victim->kv_len - 2);
  const int64_t slot = victim->slots[pos];
  // The bug: the slot is freed while the request still reads it. Freed at the end of the step
  // (AfterStep), so it is on top of the LIFO free list when the next step allocates.
  pending_free_unit_ = slot;
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << " slot " << slot
         << " freed while in use";
  Open& open = Start(FaultKind::kStaleSlotReuse, target.str());
  open.victims = {victim->spec.id};
  open.slots = {slot};
  open.abort_victims = true;
}

void FaultInjector::InjectPositionSkip(Batch& batch, ForwardView& view) {
  size_t index = 0;
  Request* victim = PickDecodeVictim(batch, 1, &index);
  if (victim == nullptr) return;
  int64_t token = 0;
  for (size_t i = 0; i < index; ++i) token += batch.rows[i].extend_len;
  view.positions[token] += 1;
  std::ostringstream target;
  target << "req " << victim->spec.id << " decode wrote position " << view.positions[token]
         << " instead of " << view.positions[token] - 1;
  Open& open = Start(FaultKind::kPositionSkip, target.str());
  open.victims = {victim->spec.id};
  open.slots = {batch.rows[index].new_slots[0]};
  open.abort_victims = true;  // the record's position stays wrong
}

void FaultInjector::InjectSwaLutStale(Engine& engine, Batch& batch) {
  SwaState* swa = engine.swa();
  if (swa == nullptr) return;
  Request* victim = PickDecodeVictim(batch, swa->window() + 2);
  if (victim == nullptr) return;
  // A position in the middle of the window: it stays verified for several more steps.
  const int64_t window = swa->window();
  const int64_t pos = victim->kv_len - window + Uniform(window / 4, (3 * window) / 4);
  const int64_t full_slot = victim->slots[pos];
  const int64_t swa_slot = swa->FreeKeepingStaleEntry(victim->spec.id, pos);
  if (swa_slot < 0) return;
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << ": full slot " << full_slot
         << " still maps to SWA slot " << swa_slot << " after it was freed";
  Open& open = Start(FaultKind::kSwaLutStale, target.str());
  open.victims = {victim->spec.id};
  open.slots = {full_slot};
  open.swa_slots = {swa_slot};
  open.abort_victims = true;
}

void FaultInjector::AfterForward(Engine& engine, const Batch& batch) {
  CountForward(engine, batch);  // before injecting: this forward ran without the fault below
  if (!Due(FaultKind::kRealKvPostForward)) return;
  Batch copy = batch;
  size_t index = 0;
  Request* victim = PickDecodeVictim(copy, 1, &index);
  if (victim == nullptr) return;
  const int64_t slot = batch.rows[index].new_slots[0];
  const int64_t byte = Uniform(0, 15);
  engine.pool().FlipByte(0, 0, slot, byte);
  std::ostringstream target;
  target << "req " << victim->spec.id << " slot " << slot << " just written, layer 0 K byte "
         << byte;
  Open& open = Start(FaultKind::kRealKvPostForward, target.str());
  open.victims = {victim->spec.id};
  MarkFlip(engine, open, slot);
}

void FaultInjector::OnSampled(Engine&, const Batch& batch, std::vector<int64_t>& sampled) {
  if (!Due(FaultKind::kNextTokenSwap) || batch.kind != Batch::kDecode) return;
  std::vector<std::pair<size_t, Request*>> candidates;  // index into sampled, request
  size_t k = 0;
  for (const BatchRow& row : batch.rows) {
    if (!row.produces_token) continue;
    const Request& req = *row.req;
    const int64_t remaining = req.spec.max_new_tokens - static_cast<int64_t>(req.output.size());
    // Both victims must outlive the detection: their rows explain the write_token rows.
    if (remaining >= kVictimMargin && req.seq_len() + kVictimMargin < options_.max_context_len) {
      candidates.emplace_back(k, row.req);
    }
    ++k;
  }
  if (candidates.size() < 2) return;
  const int64_t a = Uniform(0, static_cast<int64_t>(candidates.size()) - 1);
  int64_t b = Uniform(0, static_cast<int64_t>(candidates.size()) - 2);
  if (b >= a) b += 1;
  auto [i, req_i] = candidates[a];
  auto [j, req_j] = candidates[b];
  if (sampled[i] == sampled[j]) return;
  std::swap(sampled[i], sampled[j]);
  std::ostringstream target;
  target << "sampled tokens of req " << req_i->spec.id << " and req " << req_j->spec.id
         << " swapped";
  Open& open = Start(FaultKind::kNextTokenSwap, target.str());
  open.victims = {req_i->spec.id, req_j->spec.id};
  // The two users receive a token the model did not produce (with quarantine, unless the
  // hold-back catches it).
  Injection& injection = injections_[open.index];
  injection.outputs_corrupted = 2;
  injection.corrupted_returned_before_detection = 2;
  for (const Request* req : {req_i, req_j}) {
    CountCorrupted(injection, open.index, req->spec.id, req->seq_len());
  }
}

void FaultInjector::OnRestore(Engine& engine, std::vector<int64_t>& record_host_slots,
                              const std::vector<int64_t>& device_slots) {
  // Misindex two records of the restored node; never its last slot, which seeds the next write.
  if (!Due(FaultKind::kOffloadDrop) || device_slots.size() < 3) return;
  std::swap(record_host_slots[0], record_host_slots[1]);
  std::ostringstream target;
  target << "host-tier restore into slots " << device_slots[0] << ", " << device_slots[1]
         << " swapped their canary records";
  Open& open = Start(FaultKind::kOffloadDrop, target.str());
  open.slots = {device_slots[0], device_slots[1], device_slots[2]};
  const int64_t a = device_slots[0];
  const int64_t b = device_slots[1];
  open.undo = [a, b, content_a = engine.SlotContent(a), content_b = engine.SlotContent(b)](Engine& e) {
    // Only while both slots still hold what was restored into them.
    if (e.SlotContent(a) == content_a && e.SlotContent(b) == content_b) e.SwapCanaryRecords(a, b);
  };
}

}  // namespace kvcanary::sim
