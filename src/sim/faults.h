// FaultInjector: breaks the engine the way real engines have broken, one fault at a time, and
// keeps the books the report needs: what each injection touched, which violations it explains,
// which outputs it corrupted, and when it was detected.
//
// Life of an injection: it is opened at a seeded step on a seeded live target (the engine hooks
// below are where each fault class acts), explains every violation on the slots it touched or on
// its victims' rows, is closed at its first detection or when its horizon passes undetected, and
// is then quarantined: the fault is undone and victims whose records it left inconsistent are
// aborted, as an operator would, so one fault's lasting damage does not mask the next.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/report.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {

// Whether `req` reads `slot`: among its slots, or in its req_to_token row up to its length.
bool RowHolds(const Engine& engine, const Request& req, int64_t slot);

class FaultInjector : public EngineHooks {
 public:
  // Spreads `fault_rate` injections of each enabled class over steps [warmup, total_steps).
  FaultInjector(const SimOptions& options, int64_t total_steps);

  void BeginStep(int64_t step) { step_ = step; }
  void BeforeForward(Engine& engine, Batch& batch, ForwardView& view) override;
  bool OnApiError(Engine& engine, const std::string& message) override;
  void AfterForward(Engine& engine, const Batch& batch) override;
  void OnSampled(Engine& engine, const Batch& batch, std::vector<int64_t>& sampled) override;
  void OnRestore(Engine& engine, std::vector<int64_t>& record_host_slots,
                 const std::vector<int64_t>& device_slots) override;
  // A victim leaves its slots: violations on them stay explained.
  void BeforeRecompute(Engine& engine, const Request& req) override;
  // L3 (faults_l3.cpp): l3_corrupt flips a byte of the blob about to be loaded, l3_stale answers
  // with the key's previous blob; the canary's refusal of a corrupt blob is l3_corrupt's detection.
  void OnL3Load(Engine& engine, const std::string& key,
                const std::vector<int64_t>& device_slots) override;
  bool OnL3Corruption(Engine& engine, const std::string& message) override;
  // Speculative decoding (faults_eagle.cpp): an open injection's victims' drafts join what it
  // touched; eagle_position_plus_one bends one draft's position.
  void OnDrafts(Engine& engine, std::vector<DraftRow>& drafts) override;

  // PD: called with each transferred request right before the decode engine admits it (may
  // drop a page), and after it was admitted (`req` null when the pool had no room yet).
  void BeforeAdmit(TransferPacket& packet);
  void AfterAdmit(Engine& engine, const TransferPacket& packet, Request* req);

  // After each engine step: matches the step's violations and oracle mismatches to injections,
  // closes and quarantines detected or expired injections. Unexplained violations go to
  // `false_positives`.
  void AfterStep(Engine& engine, const std::vector<ReportedViolation>& violations,
                 std::vector<ObservedViolation>& false_positives);
  // Closes whatever is still open (end of run).
  void Finish(Engine& engine);

  const std::vector<Injection>& injections() const { return injections_; }
  // With quarantine: corrupted tokens delivered that no injection explains (0 when it works).
  int64_t unexplained_delivered() const { return unexplained_delivered_; }
  int64_t unexplained_mismatches() const { return unexplained_mismatches_; }

 private:
  // Tokens a victim must still have to generate: it must outlive its detection (a victim only
  // advances when it is in a batch, so this counts its own forwards, not wall steps).
  static constexpr int64_t kVictimMargin = 12;

  struct Open {
    size_t index = 0;                 // into injections_
    std::set<int64_t> victims;        // request ids whose rows it affects
    std::set<int64_t> slots;          // slots it touched (full pool)
    std::set<int64_t> swa_slots;      // SWA-pool slots it touched
    std::set<int64_t> compressed_slots;  // compressed-pool slots it touched
    // Byte flips: the (token, position) whose KV bytes were flipped. The bytes travel through
    // the host tier, so any slot holding this content is explained (and repaired).
    std::optional<std::pair<int64_t, int64_t>> content;
    std::function<void(Engine&)> undo;
    bool abort_victims = false;
    int64_t horizon_end = 0;
    int64_t closed_step = -1;  // -1 while open
    // Steps whose forward ran with the fault in place and a victim in its batch (every forward
    // when there is no victim): what the report's forwards latency counts.
    std::vector<int64_t> forward_steps;
    // Slot-reuse faults: a freed slot changes no record until its new owner writes it. What
    // each freed slot held (token, position) when it was freed, and whether a forward has
    // written one of them since: the fault is in place from that forward on.
    std::map<int64_t, std::pair<int64_t, int64_t>> freed_contents;
    bool overwritten = false;
  };

  // The fault due now, if any, and whether a new injection may open this step.
  bool Due(FaultKind fault) const;
  Open& Start(FaultKind fault, std::string target);
  // Whether a violation on `slot` (in the SWA pool's slot space for *_SWA tags) is explained.
  bool Explains(Engine& engine, const Open& open, int64_t slot, bool swa_tag) const;
  // Records a byte flip of `slot`: its content explains violations, its repair is the undo.
  void MarkFlip(Engine& engine, Open& open, int64_t slot);
  void Close(Engine& engine, Open& open);
  // Forwards latency (faults_latency.cpp): notes this step's forward on every open injection
  // that is in place and whose victims it holds; at a detection, the forwards through the one
  // that detected it.
  void CountForward(const Engine& engine, const Batch& batch);
  bool InPlace(const Engine& engine, Open& open) const;
  static int64_t ForwardsThrough(const Open& open, int64_t detecting_step);
  void KeepVictimsRunning(Engine& engine, const Open& open);
  Request* PickDecodeVictim(Batch& batch, int64_t min_prefix, size_t* row_index = nullptr);
  int64_t Uniform(int64_t lo, int64_t hi);  // [lo, hi]

  void InjectReqToToken(Engine& engine, Batch& batch);
  void InjectStrideView(ForwardView& view, Engine& engine);
  void InjectWrongStrideRead(Engine& engine, Batch& batch, ForwardView& view);
  void InjectRealKvUsed(Engine& engine, Batch& batch);
  void InjectRealKvUnusedCache(Engine& engine);
  void InjectRealKvDeepLayer(Engine& engine, Batch& batch);
  void InjectStaleSlotReuse(Engine& engine, Batch& batch);
  void InjectPositionSkip(Batch& batch, ForwardView& view);
  void InjectSwaLutStale(Engine& engine, Batch& batch);
  // The paged layout's classes (faults_paged.cpp).
  void InjectBlockTableSwap(Engine& engine, Batch& batch);
  void InjectFreedBlockReuse(Engine& engine, Batch& batch);
  void InjectRealKvPage(Engine& engine, Batch& batch);
  void InjectStaleOutCacheLoc(Engine& engine, Batch& batch, ForwardView& view);
  // The pool kinds' classes (faults_pool_kinds.cpp): mla_latent_page, compressed_slot_stale.
  void InjectPoolKindFault(FaultKind kind, Engine& engine, Batch& batch);
  void InjectMlaLatentPage(Engine& engine, Batch& batch);
  void InjectCompressedSlotStale(Engine& engine, Batch& batch);
  // l3_stale: the requests that read the stale records become its victims.
  void AdoptL3Victims(Engine& engine, const Batch& batch);

  SimOptions options_;
  std::mt19937_64 rng_;
  int64_t total_steps_ = 0;
  int64_t horizon_ = 0;
  int64_t spacing_ = 0;
  int64_t step_ = 0;
  int64_t next_due_step_ = 0;
  std::vector<FaultKind> queue_;  // faults still to inject, in order
  int64_t stuck_steps_ = 0;       // steps the head of the queue found no target
  std::vector<Injection> injections_;
  std::vector<Open> opens_;
  int64_t unexplained_mismatches_ = 0;
  int64_t unexplained_delivered_ = 0;
  // With quarantine a corrupted token is delivered (or discarded) steps after it was sampled:
  // the injection it was counted against at sampling, by (request id, position).
  std::map<std::pair<int64_t, int64_t>, size_t> corrupted_by_;
  bool quarantine() const { return options_.on_violation == "quarantine"; }
  // Counts a corrupted token against its injection when sampled: delivered at once with log,
  // later (CountOutcomes) with quarantine.
  void CountCorrupted(Injection& injection, size_t index, int64_t request, int64_t position);
  void CountOutcomes(Engine& engine);
  int64_t dropped_page_ = -1;       // the page BeforeAdmit dropped, until AfterAdmit
  // stale_slot_reuse, freed_block_reuse: the allocation unit (slot or block) freed at the end of
  // the step while its request still reads it.
  int64_t pending_free_unit_ = -1;
  // l3_corrupt: the blob as it was stored, put back when the canary refuses the flipped one.
  std::string l3_corrupt_key_;
  std::vector<uint8_t> l3_corrupt_original_;
};

}  // namespace kvcanary::sim
