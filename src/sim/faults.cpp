#include "sim/faults.h"

#include <algorithm>
#include <sstream>
#include <tuple>

#include "kvcanary/runtime/radix_view.h"
#include "kvcanary/runtime/violation_format.h"

namespace kvcanary::sim {
namespace {

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

// The faults that act on the batch or the view before the forward; the others act after the
// forward or at the sampler.
bool ActsBeforeForward(FaultKind kind) {
  switch (kind) {
    case FaultKind::kReqToToken:
    case FaultKind::kStrideView:
    case FaultKind::kWrongStrideRead:
    case FaultKind::kRealKvUsed:
    case FaultKind::kRealKvUnusedCache:
    case FaultKind::kStaleSlotReuse:
    case FaultKind::kPositionSkip:
    case FaultKind::kSwaLutStale:
    case FaultKind::kBlockTableSwap:
    case FaultKind::kFreedBlockReuse:
    case FaultKind::kRealKvPage:
    case FaultKind::kStaleOutCacheLoc:
    case FaultKind::kRealKvDeepLayer:
    case FaultKind::kMlaLatentPage:
    case FaultKind::kCompressedSlotStale:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool RowHolds(const Engine& engine, const Request& req, int64_t slot) {
  if (std::find(req.slots.begin(), req.slots.end(), slot) != req.slots.end()) return true;
  if (req.row <= 0) return false;
  const int32_t* row = const_cast<Engine&>(engine).table().HostRow(req.row);
  const int64_t len = std::min<int64_t>(req.seq_len(), engine.options().max_context_len);
  return std::find(row, row + len, static_cast<int32_t>(slot)) != row + len;
}

FaultInjector::FaultInjector(const SimOptions& options, int64_t total_steps)
    : options_(options), rng_(options.seed * 0x9E3779B97F4A7C15ull + 17), total_steps_(total_steps) {
  // Wall steps an injection waits for its detection: a victim is only verified when it is in a
  // batch, and long prefill phases can hold decodes back for dozens of steps.
  // A sampled verify sees a record within verify_sample forwards: the horizon covers twice that.
  horizon_ = std::max<int64_t>(
      {64, 2 * options.sweep_interval + 8, 2 * options.verify_sample + 8});
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
  AdoptL3Victims(engine, batch);
  if (queue_.empty()) return;
  const FaultKind kind = queue_.front();
  if (!ActsBeforeForward(kind) || !Due(kind)) return;
  switch (kind) {
    case FaultKind::kReqToToken: return InjectReqToToken(engine, batch);
    case FaultKind::kStrideView: return InjectStrideView(view, engine);
    case FaultKind::kWrongStrideRead: return InjectWrongStrideRead(engine, batch, view);
    case FaultKind::kRealKvUsed: return InjectRealKvUsed(engine, batch);
    case FaultKind::kRealKvUnusedCache: return InjectRealKvUnusedCache(engine);
    case FaultKind::kStaleSlotReuse: return InjectStaleSlotReuse(engine, batch);
    case FaultKind::kPositionSkip: return InjectPositionSkip(batch, view);
    case FaultKind::kSwaLutStale: return InjectSwaLutStale(engine, batch);
    case FaultKind::kBlockTableSwap: return InjectBlockTableSwap(engine, batch);
    case FaultKind::kFreedBlockReuse: return InjectFreedBlockReuse(engine, batch);
    case FaultKind::kRealKvPage: return InjectRealKvPage(engine, batch);
    case FaultKind::kStaleOutCacheLoc: return InjectStaleOutCacheLoc(engine, batch, view);
    case FaultKind::kRealKvDeepLayer: return InjectRealKvDeepLayer(engine, batch);
    default: return InjectPoolKindFault(kind, engine, batch);
  }
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
  // Rows of one step in a canonical order: the CUDA backend records concurrently (K and V halves,
  // many threads), so ring order differs between devices while the set of rows does not. The
  // report (which row detected an injection, the false-positive list) must not.
  std::vector<const ReportedViolation*> ordered;
  for (const ReportedViolation& violation : violations) ordered.push_back(&violation);
  std::sort(ordered.begin(), ordered.end(), [](const ReportedViolation* a, const ReportedViolation* b) {
    const runtime::ViolationRow& x = a->row;
    const runtime::ViolationRow& y = b->row;
    return std::tie(x.kernel_kind, x.slot_idx, x.position, x.fail_reason_bits, x.stored_token,
                    x.expected_token, x.stored_chain_hash, x.expected_aux) <
           std::tie(y.kernel_kind, y.slot_idx, y.position, y.fail_reason_bits, y.stored_token,
                    y.expected_token, y.stored_chain_hash, y.expected_aux);
  });
  for (const ReportedViolation* entry : ordered) {
    const ReportedViolation& violation = *entry;
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
        // Rows are reported one step after the forward that found them.
        injection.detected_forwards = ForwardsThrough(open, step_ - 1);
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
      CountCorrupted(injection, open.index, token.req->spec.id, token.position);
      break;
    }
    if (!attributed) unexplained_mismatches_ += 1;
  }
  CountOutcomes(engine);
  for (Open& open : opens_) {
    if (open.closed_step >= 0) continue;
    if (injections_[open.index].detected || step_ >= open.horizon_end) {
      Close(engine, open);
    } else {
      KeepVictimsRunning(engine, open);
    }
  }
  if (pending_free_unit_ > 0) {
    engine.allocator().Free({pending_free_unit_});
    pending_free_unit_ = -1;
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

void FaultInjector::BeforeRecompute(Engine& engine, const Request& req) {
  for (Open& open : opens_) {
    if (open.closed_step >= 0 && step_ - open.closed_step > kGraceSteps) continue;
    if (!open.victims.count(req.spec.id)) {
      // A request that read what the injection touched is one of its victims: its corrupted
      // tokens are the injection's, though it no longer holds the slot when they are counted.
      bool reads = false;
      for (int64_t slot : open.slots) reads = reads || RowHolds(engine, req, slot);
      if (!reads) continue;
      open.victims.insert(req.spec.id);
    }
    // What RowHolds would find while it runs: its slots and its table row.
    open.slots.insert(req.slots.begin(), req.slots.end());
    if (req.row > 0) {
      const int32_t* row = engine.table().HostRow(req.row);
      open.slots.insert(row, row + std::min<int64_t>(req.seq_len(), options_.max_context_len));
    }
  }
}

void FaultInjector::CountCorrupted(Injection& injection, size_t index, int64_t request,
                                   int64_t position) {
  if (quarantine()) {
    corrupted_by_[{request, position}] = index;
  } else {
    injection.delivered_corrupted += 1;
  }
}

void FaultInjector::CountOutcomes(Engine& engine) {
  for (const TokenOutcome& outcome : engine.TakeTokenOutcomes()) {
    if (!outcome.corrupted) continue;
    const auto it = corrupted_by_.find({outcome.request, outcome.position});
    if (it == corrupted_by_.end()) {
      if (outcome.delivered) unexplained_delivered_ += 1;
      continue;
    }
    Injection& injection = injections_[it->second];
    (outcome.delivered ? injection.delivered_corrupted : injection.discarded_corrupted) += 1;
    corrupted_by_.erase(it);
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
  injections_[open.index].slots.insert(injections_[open.index].slots.end(),
                                       open.compressed_slots.begin(), open.compressed_slots.end());
  if (open.undo) open.undo(engine);
  // With quarantine the engine has already sent the requests the violations named back to be
  // computed again: that is the recovery under test, so no operator steps in.
  if (!open.abort_victims || quarantine()) return;
  for (int64_t id : open.victims) {
    if (Request* req = engine.FindRunning(id)) engine.Abort(req);
  }
}

void FaultInjector::Finish(Engine& engine) {
  for (Open& open : opens_) {
    if (open.closed_step < 0) Close(engine, open);
  }
}

}  // namespace kvcanary::sim
