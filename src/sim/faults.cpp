#include "sim/faults.h"

#include <algorithm>
#include <sstream>

#include "kvcanary/runtime/radix_view.h"
#include "kvcanary/runtime/violation_format.h"

namespace kvcanary::sim {
namespace {

// Tokens a victim must still have to generate: it must outlive its detection (a victim only
// advances when it is in a batch, so this counts its own forwards, not wall steps).
constexpr int64_t kVictimMargin = 12;
// Steps before the first injection: requests must be decoding with a prefix to corrupt.
constexpr int64_t kWarmupSteps = 12;
// Consecutive steps the next fault may find no target before it is moved to the back.
constexpr int64_t kMaxStuckSteps = 40;
// Steps a closed injection still explains violations: rows are reported one step late, and the
// step it was closed in may have staged more.
constexpr int64_t kGraceSteps = 2;

std::string Describe(const runtime::ViolationRow& row) {
  return runtime::LaunchTagLabel(row.kernel_kind) + " " +
         runtime::FailReasonLabels(row.fail_reason_bits, "+");
}

bool RowHolds(const Engine& engine, const Request& req, int64_t slot) {
  if (std::find(req.slots.begin(), req.slots.end(), slot) != req.slots.end()) return true;
  if (req.row <= 0) return false;
  const int32_t* row = const_cast<Engine&>(engine).table().HostRow(req.row);
  const int64_t len = std::min<int64_t>(req.seq_len(), engine.options().max_context_len);
  return std::find(row, row + len, static_cast<int32_t>(slot)) != row + len;
}

}  // namespace

FaultInjector::FaultInjector(const SimOptions& options, int64_t total_steps)
    : options_(options), rng_(options.seed * 0x9E3779B97F4A7C15ull + 17), total_steps_(total_steps) {
  // Wall steps an injection waits for its detection: a victim is only verified when it is in a
  // batch, and long prefill phases can hold decodes back for dozens of steps.
  horizon_ = std::max<int64_t>(64, 2 * options.sweep_interval + 8);
  for (int64_t k = 0; k < options.fault_rate; ++k) {
    for (FaultKind fault : EnabledFaults(options)) queue_.push_back(fault);
  }
  std::shuffle(queue_.begin(), queue_.end(), rng_);
  const int64_t usable = total_steps - kWarmupSteps - horizon_;
  spacing_ = queue_.empty() ? 1
                            : std::max<int64_t>(1, usable / static_cast<int64_t>(queue_.size()));
  next_due_step_ = kWarmupSteps;
}

int64_t FaultInjector::Uniform(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

bool FaultInjector::Due(FaultKind fault) const {
  if (queue_.empty() || queue_.front() != fault || step_ < next_due_step_) return false;
  if (step_ + horizon_ >= total_steps_) return false;  // too late to see it through
  for (const Open& open : opens_) {
    if (open.closed_step < 0) return false;  // one injection at a time keeps attribution exact
  }
  return true;
}

FaultInjector::Open& FaultInjector::Start(FaultKind fault, std::string target) {
  Injection injection;
  injection.fault = fault;
  injection.step = step_;
  injection.target = std::move(target);
  injections_.push_back(injection);
  Open open;
  open.index = injections_.size() - 1;
  open.horizon_end = step_ + horizon_;
  opens_.push_back(open);
  queue_.erase(queue_.begin());
  next_due_step_ = step_ + spacing_;
  stuck_steps_ = 0;
  return opens_.back();
}

Request* FaultInjector::PickDecodeVictim(Batch& batch, int64_t min_prefix, size_t* row_index) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const BatchRow& row = batch.rows[i];
    const Request& req = *row.req;
    const int64_t remaining = req.spec.max_new_tokens - static_cast<int64_t>(req.output.size());
    if (batch.kind != Batch::kDecode || !row.produces_token || row.prefix_len < min_prefix ||
        remaining < kVictimMargin ||
        req.seq_len() + kVictimMargin >= options_.max_context_len) {
      continue;
    }
    candidates.push_back(i);
  }
  if (candidates.empty()) return nullptr;
  const size_t pick = candidates[Uniform(0, static_cast<int64_t>(candidates.size()) - 1)];
  if (row_index != nullptr) *row_index = pick;
  return batch.rows[pick].req;
}

void FaultInjector::BeforeForward(Engine& engine, Batch& batch, ForwardView& view) {
  if (queue_.empty()) return;
  switch (queue_.front()) {
    case FaultKind::kReqToToken:
      if (Due(FaultKind::kReqToToken)) InjectReqToToken(engine, batch);
      break;
    case FaultKind::kStrideView:
      if (Due(FaultKind::kStrideView)) InjectStrideView(view, engine);
      break;
    case FaultKind::kWrongStrideRead:
      if (Due(FaultKind::kWrongStrideRead)) InjectWrongStrideRead(engine, batch, view);
      break;
    case FaultKind::kRealKvUsed:
      if (Due(FaultKind::kRealKvUsed)) InjectRealKvUsed(engine, batch);
      break;
    case FaultKind::kRealKvUnusedCache:
      if (Due(FaultKind::kRealKvUnusedCache)) InjectRealKvUnusedCache(engine);
      break;
    case FaultKind::kStaleSlotReuse:
      if (Due(FaultKind::kStaleSlotReuse)) InjectStaleSlotReuse(engine, batch);
      break;
    case FaultKind::kPositionSkip:
      if (Due(FaultKind::kPositionSkip)) InjectPositionSkip(batch, view);
      break;
    case FaultKind::kSwaLutStale:
      if (Due(FaultKind::kSwaLutStale)) InjectSwaLutStale(engine, batch);
      break;
    default:
      break;  // the others act after the forward or at the sampler
  }
}

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
  pending_free_slot_ = slot;
  std::ostringstream target;
  target << "req " << victim->spec.id << " pos " << pos << " slot " << slot
         << " freed while in use";
  Open& open = Start(FaultKind::kStaleSlotReuse, target.str());
  open.victims = {victim->spec.id};
  open.slots = {slot};
  open.keep_slots = {slot};  // it belongs to whoever was handed it next
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
  // The two users receive a token the model did not produce.
  injections_[open.index].outputs_corrupted = 2;
  injections_[open.index].corrupted_returned_before_detection = 2;
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

void FaultInjector::MarkFlip(Engine& engine, Open& open, int64_t slot) {
  open.slots = {slot};
  open.content = engine.SlotContent(slot);
  open.undo = [content = *open.content](Engine& e) { e.RepairKv(content); };
}

void FaultInjector::BeforeAdmit(TransferPacket& packet) {
  dropped_page_ = -1;
  // Never the first page (nothing before it to chain from) or the last (it seeds the decode
  // side's first write); the page after the dropped one then fails its chain check.
  if (!Due(FaultKind::kPdTransferDrop) || packet.num_pages < 3) return;
  const int64_t remaining = packet.spec.max_new_tokens - 1;
  if (remaining < kVictimMargin ||
      static_cast<int64_t>(packet.tokens.size()) + kVictimMargin >= options_.max_context_len) {
    return;
  }
  dropped_page_ = Uniform(1, packet.num_pages - 2);
  packet.page_dropped[dropped_page_] = true;
}

void FaultInjector::AfterAdmit(Engine& engine, const TransferPacket& packet, Request* req) {
  if (dropped_page_ < 0) return;
  const int64_t page = dropped_page_;
  dropped_page_ = -1;
  if (req == nullptr) return;  // not admitted: the packet is retried, and may be dropped again
  if (engine.SlotContent(req->slots[page]) == std::make_pair(packet.tokens[page], page)) {
    // The reused slot already held this token at this position (a shared prompt): the drop
    // would change nothing the model reads. Deliver the page and try another transfer.
    engine.CopyTransferPage(packet, *req, page);
    return;
  }
  std::ostringstream target;
  target << "req " << packet.spec.id << " transfer skipped page " << page << " (decode slot "
         << req->slots[page] << ")";
  Open& open = Start(FaultKind::kPdTransferDrop, target.str());
  open.victims = {req->spec.id};
  open.slots = {req->slots[page], req->slots[page + 1]};
  open.abort_victims = true;
}

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
  if (open.slots.count(slot)) return true;
  if (open.content.has_value() && slot > 0 && slot < options_.num_slots &&
      engine.SlotContent(slot) == *open.content) {
    return true;
  }
  for (int64_t id : open.victims) {
    const Request* req = engine.FindRunning(id);
    if (req != nullptr && RowHolds(engine, *req, slot)) return true;
  }
  return false;
}

void FaultInjector::AfterStep(Engine& engine, const std::vector<ReportedViolation>& violations,
                              std::vector<ObservedViolation>& false_positives) {
  // SWA rows name SWA-pool slots, reported a step after the table mapped them: remember what the
  // touched full slots map to while the injection is open.
  if (SwaState* swa = engine.swa()) {
    auto remember = [&](Open& open, int64_t full) {
      if (full > 0 && full < options_.num_slots && swa->LastSwaSlotOf(full) > 0) {
        open.swa_slots.insert(swa->LastSwaSlotOf(full));
      }
    };
    for (Open& open : opens_) {
      if (open.closed_step >= 0) continue;
      for (int64_t full : open.slots) remember(open, full);
      for (int64_t id : open.victims) {
        const Request* req = engine.FindRunning(id);
        if (req == nullptr) continue;
        const int32_t* row = engine.table().HostRow(req->row);
        const int64_t len = std::min<int64_t>(req->seq_len(), options_.max_context_len);
        for (int64_t pos = 0; pos < len; ++pos) remember(open, row[pos]);
      }
    }
  }
  for (const ReportedViolation& violation : violations) {
    bool explained = false;
    for (Open& open : opens_) {
      if (open.closed_step >= 0 && step_ - open.closed_step > kGraceSteps) continue;
      const bool swa_tag = violation.row.kernel_kind >= 6 && violation.row.kernel_kind < 12;
      if (!Explains(engine, open, violation.row.slot_idx, swa_tag)) continue;
      explained = true;
      Injection& injection = injections_[open.index];
      if (!injection.detected && open.closed_step < 0) {
        injection.detected = true;
        injection.detected_step = step_;
        injection.detected_by = Describe(violation.row);
      }
    }
    if (!explained) {
      false_positives.push_back(ObservedViolation{step_, violation.row.kernel_kind,
                                                  violation.row.slot_idx, violation.row.position,
                                                  violation.row.fail_reason_bits,
                                                  violation.first_line});
    }
  }
  // Oracle mismatches: outputs the faults corrupted.
  for (const SampledToken& token : engine.last_sampled()) {
    if (token.actual == token.expected) continue;
    bool attributed = false;
    for (Open& open : opens_) {
      if (open.closed_step >= 0 && step_ - open.closed_step > kGraceSteps) continue;
      bool hit = open.victims.count(token.req->spec.id) > 0;
      for (int64_t slot : open.slots) hit = hit || RowHolds(engine, *token.req, slot);
      if (!hit) continue;
      attributed = true;
      Injection& injection = injections_[open.index];
      injection.outputs_corrupted += 1;
      if (!injection.detected) injection.corrupted_returned_before_detection += 1;
      break;
    }
    if (!attributed) unexplained_mismatches_ += 1;
  }
  for (Open& open : opens_) {
    if (open.closed_step >= 0) continue;
    if (injections_[open.index].detected || step_ >= open.horizon_end) {
      Close(engine, open);
    } else {
      KeepVictimsRunning(engine, open);
    }
  }
  if (pending_free_slot_ > 0) {
    engine.allocator().Free({pending_free_slot_});
    pending_free_slot_ = -1;
  }
  // A fault that finds no target for too long goes to the back of the queue.
  if (!queue_.empty() && step_ >= next_due_step_) {
    bool any_open = false;
    for (const Open& open : opens_) any_open = any_open || open.closed_step < 0;
    if (!any_open && ++stuck_steps_ > kMaxStuckSteps) {
      std::rotate(queue_.begin(), queue_.begin() + 1, queue_.end());
      stuck_steps_ = 0;
    }
  }
}

void FaultInjector::KeepVictimsRunning(Engine& engine, const Open& open) {
  // A victim that finished before its quarantine would hand damaged records to the radix cache,
  // where they would show up later as violations no open injection explains.
  for (int64_t id : open.victims) {
    Request* req = engine.FindRunning(id);
    if (req == nullptr) continue;
    const int64_t floor = static_cast<int64_t>(req->output.size()) + 3;
    req->spec.max_new_tokens = std::max(req->spec.max_new_tokens, floor);
  }
}

void FaultInjector::Close(Engine& engine, Open& open) {
  open.closed_step = step_;
  // The report lists what the injection touched (full-pool slots).
  injections_[open.index].slots.assign(open.slots.begin(), open.slots.end());
  if (open.undo) open.undo(engine);
  if (!open.abort_victims) return;
  for (int64_t id : open.victims) {
    if (Request* req = engine.FindRunning(id)) engine.Abort(req, open.keep_slots);
  }
}

void FaultInjector::Finish(Engine& engine) {
  for (Open& open : opens_) {
    if (open.closed_step < 0) Close(engine, open);
  }
}

}  // namespace kvcanary::sim
