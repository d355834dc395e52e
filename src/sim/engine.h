// Engine: the simulator's serving engine, wired to the kvcanary runtime exactly as a real engine
// would be (docs/integration.md points here). One Step() is one scheduling step: schedule a batch,
// describe it to the canary (phase 1), run the canary's pre-forward hook, write the new tokens'
// KV, run the oracle model's attention for the rows that produce a token, the post-forward hook,
// phase 4, then sample and retire finished requests.
//
// Fault injection plugs in through EngineHooks: the injector edits the engine's state between the
// stages of a step, exactly where a buggy engine would go wrong.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "sim/block_table.h"
#include "sim/compressed_state.h"
#include "sim/held_tokens.h"
#include "sim/kv_pool.h"
#include "sim/l3_tier.h"
#include "sim/oracle_model.h"
#include "sim/radix_cache.h"
#include "sim/req_to_token_table.h"
#include "sim/scheduler.h"
#include "sim/sim_options.h"
#include "sim/slot_allocator.h"
#include "sim/swa_state.h"

namespace kvcanary::sim {

class Engine;

// A unified engine serves whole requests; a PD pair splits them: the prefill engine computes the
// prompt's KV and hands it over, the decode engine generates the rest.
enum class EngineRole { kUnified, kPrefill, kDecode };

// A prefilled request in flight from the prefill engine to the decode engine: its KV pages and
// canary records, as the transfer engine moves them (one item per page of every spliced buffer).
struct TransferPacket {
  RequestSpec spec;
  std::vector<int64_t> tokens;                // the prompt, then the first output token
  int64_t num_pages = 0;                      // prompt positions (page size 1)
  std::vector<std::vector<uint8_t>> items;    // [entry of the spliced list][page * item bytes]
  std::vector<bool> page_dropped;             // pages the transfer skipped (a fault)
};

// What the forward of one step reads, as the injector may bend it.
struct ForwardView {
  std::vector<int64_t> positions;    // per token; position_skip bends one
  std::vector<int64_t> out_cache_loc;  // per token, the slot it is written to; stale_out_cache_loc
                                       // bends one
  int64_t table_stride = 0;          // the row stride attention and the plan read req_to_token with
  std::optional<int64_t> stride0;    // the pitch the engine passes to the plan op
};

// One violation row the runtime reported, with the engine step it was reported in.
struct ReportedViolation {
  runtime::ViolationRow row;
  int64_t step = 0;
  std::string first_line;
};

// One sampled token and what the oracle says it should have been.
struct SampledToken {
  Request* req = nullptr;
  int64_t position = 0;  // position of the sampled token in the request's sequence
  int64_t actual = 0;
  int64_t expected = 0;
};

// One request's drafts of a decode step (--draft-forwards D > 1): draft j (from 0) is written by
// inner forward j + 1 at position start + j, in slots[j]; the injector may bend `positions`.
struct DraftRow {
  Request* req = nullptr;
  int64_t start = 0;  // the request's length when scheduled: the first draft's position
  std::vector<int64_t> slots;
  std::vector<int64_t> tokens;
  std::vector<int64_t> positions;  // what the forward writes (start + j unless a fault bent it)
};

class EngineHooks {
 public:
  virtual ~EngineHooks() = default;
  // After scheduling, before the batch is described to the canary.
  virtual void BeforeForward(Engine& engine, Batch& batch, ForwardView& view) = 0;
  // The plan op refused the forward (kv-canary: ... error): returns true when the engine should
  // retry with the stride derived from the table (the stride_view fault's fallback).
  virtual bool OnApiError(Engine& engine, const std::string& message) = 0;
  // After the post-forward canary hook, before phase 4.
  virtual void AfterForward(Engine& engine, const Batch& batch) = 0;
  // At sampler exit: may change what is fed back.
  virtual void OnSampled(Engine& engine, const Batch& batch, std::vector<int64_t>& sampled) = 0;
  // A host-tier restore is about to copy the canary records of `host_slots` into
  // `device_slots`: may change which host record goes where.
  virtual void OnRestore(Engine& engine, std::vector<int64_t>& record_host_slots,
                         const std::vector<int64_t>& device_slots) = 0;
  // Speculative decoding: the step's drafts are proposed and their slots entered in req_to_token,
  // before the step is described to the canary.
  virtual void OnDrafts(Engine& engine, std::vector<DraftRow>& drafts) {
    (void)engine;
    (void)drafts;
  }
  // Quarantine: the engine is about to send `req` back to be computed again (its slots and row
  // are still as the violations saw them).
  virtual void BeforeRecompute(Engine& engine, const Request& req) {
    (void)engine;
    (void)req;
  }
  // L3: a page stored under `key` is about to be loaded back (its records read from the store).
  // `device_slots`: where the restore puts the whole page, or empty when the restore takes part
  // of it.
  virtual void OnL3Load(Engine& engine, const std::string& key,
                        const std::vector<int64_t>& device_slots) {
    (void)engine;
    (void)key;
    (void)device_slots;
  }
  // L3: the canary refused a stored page as corrupt (`message`). Returns true when a good copy
  // was put back in the store and the load should be tried once more; false ends the step with
  // the error.
  virtual bool OnL3Corruption(Engine& engine, const std::string& message) {
    (void)engine;
    (void)message;
    return false;
  }
};

// A sampled token leaving the quarantine's hold-back: delivered to the user, or discarded with
// its request's other held tokens when a violation named the request.
struct TokenOutcome {
  int64_t request = 0;
  int64_t position = 0;  // index in the request's tokens
  bool corrupted = false;
  bool delivered = false;
};

struct QuarantineStats {
  int64_t requests_recomputed = 0;
  int64_t tokens_delivered = 0;
  int64_t tokens_discarded = 0;
  int64_t nodes_removed = 0;   // prefix-cache nodes dropped for holding a failing slot
};

struct EngineStats {
  int64_t steps = 0;
  int64_t tokens_generated = 0;
  int64_t oracle_mismatches = 0;
  // Finished requests whose whole output was compared with the oracle's, and those that differ.
  int64_t outputs_checked = 0;
  int64_t outputs_wrong = 0;
  double canary_seconds = 0;
  double step_seconds = 0;
};

class Engine {
 public:
  // `name` prefixes errors ("prefill", "decode" or "engine").
  Engine(const SimOptions& options, std::string name, runtime::LogSink* log,
         EngineRole role = EngineRole::kUnified);
  ~Engine();

  // One scheduling step. Returns false when there was nothing to do.
  bool Step(int64_t step, EngineHooks& hooks);
  // Runs empty canary steps so violations staged in the last real steps are read and reported.
  void Drain(int steps);

  // PD prefill side: requests whose prompt was prefilled since the last call, ready to move.
  std::vector<TransferPacket> TakeTransfers();
  // PD decode side: admits a transferred request into slots of this pool, copying its KV and
  // records through the same spliced buffer list. Returns the request, or null when the pool
  // has no room yet (try again next step).
  Request* AdmitTransfer(const TransferPacket& packet, int64_t step);
  // Copies one page of a transferred request into its decode slot (every spliced buffer).
  void CopyTransferPage(const TransferPacket& packet, const Request& req, int64_t page);

  // Finished requests since the last call (the caller makes follow-ups and counts them).
  std::vector<std::unique_ptr<Request>> TakeFinished();
  // Violations reported since the last call.
  std::vector<ReportedViolation> TakeViolations();
  // Quarantine: tokens delivered or discarded since the last call.
  std::vector<TokenOutcome> TakeTokenOutcomes();
  const QuarantineStats& quarantine_stats() const { return quarantine_stats_; }
  // Tokens sampled and not yet delivered (always 0 without quarantine).
  int64_t tokens_held() const { return held_ ? held_->size() : 0; }

  // The allocator and the holders agree: every allocated unit is held by a running request (its
  // own positions) or a resident cached prefix, and none of those is free. Throws
  // std::logic_error naming the first unit that breaks it (a simulator bug: a leak, or a unit
  // handed out twice). Call between steps.
  void CheckUnitOwnership() const;

  // Tokens sampled in the last step, with the oracle's expectation.
  const std::vector<SampledToken>& last_sampled() const { return last_sampled_; }

  // Abandons a running request (a fault's victim, with --on-violation log): frees its row and the
  // allocation units (slots, or blocks when paged) it owns, except those another request or the
  // cache also holds (a fault handed them out again; UnitsOwnedElsewhere), and unlocks its cached
  // prefix.
  void Abort(Request* req);
  // Rewrites a slot's KV bytes from what the forward last wrote there (undoes a byte flip).
  void RestoreSlotKv(int64_t slot);
  // Rewrites the KV bytes of every device and host-tier slot holding `content` (a byte flip
  // travels with its data through offload and restore; so does its repair).
  void RepairKv(std::pair<int64_t, int64_t> content);
  // Swaps the canary records of two slots in every buffer (undoes a misindexed restore).
  void SwapCanaryRecords(int64_t a, int64_t b);
  // The four canary records of a slot (k_head, v_head, k_tail, v_tail: a record blob's buffer
  // order), and their rewrite (undoes a stale L3 load).
  std::vector<uint8_t> ReadCanaryRecords(int64_t slot);
  void WriteCanaryRecords(int64_t slot, const std::vector<uint8_t>& records);
  // The L3 tier below the host tier; null without --l3-slots.
  L3Tier* l3() { return l3_.get(); }
  // (token, position) the forward last wrote into a slot.
  std::pair<int64_t, int64_t> SlotContent(int64_t slot) const { return slot_contents_.at(slot); }
  // The running request with this id, or null.
  Request* FindRunning(int64_t id) const;

  const SimOptions& options() const { return options_; }
  KvPool& pool() { return *pool_; }
  ReqToTokenTable& table() { return *table_; }
  // The paged layout's block table; null with --block-size 0.
  BlockTable* block_table() { return blocks_.get(); }
  // Layers whose KV bytes the canary fingerprints: every layer with --fingerprint-layers all
  // (the paged preset's setting), else layer 0.
  int FingerprintedLayers() const;
  // Hands out slots, or blocks with a block table.
  SlotAllocator& allocator() { return *allocator_; }
  RadixCache& radix() { return *radix_; }
  Scheduler& scheduler() { return *scheduler_; }
  runtime::CanaryManager* canary() { return canary_.get(); }
  SwaState* swa() { return swa_.get(); }
  // The compressed pool beside the full pool; null without --compress-ratio.
  CompressedState* compressed() { return compressed_.get(); }
  // The mla_latent_page bug: the next forward writes the latent (K) bytes meant for slot `from`
  // into slot `to` instead, once (engine_pool_kinds.cpp).
  void MisdirectLatentWrite(int64_t from, int64_t to) { misdirected_ = {from, to}; }
  const EngineStats& stats() const { return stats_; }
  const OracleModel& oracle() const { return oracle_; }

 private:
  struct ForwardBuffers;
  // The canary's install: the FULL group over layer 0 (and the SWA group with SWA); creates the
  // SWA state on the way.
  runtime::InstallArgs InstallArgsFor(runtime::LogSink* log);
  void DescribeForward(const Batch& batch, const ForwardView& view,
                       runtime::StepInput& input);
  void RunModel(const Batch& batch, const ForwardView& view);
  // The sliding-window layers' share of a row's next token: attention over the last W positions
  // through the full->SWA table (actual), or over the true tokens (expected).
  uint64_t SwaHash(const int32_t* slot_row, int64_t seq_len, int64_t query) const;
  uint64_t ExpectedSwaHash(const Request& req, int64_t seq_len, int64_t query) const;
  ExpectedState& ExpectedFor(const Request& req);
  // Drops what the engine keeps per request (its oracle state, its last sampled token, its SWA
  // slots): it finished, was aborted, or goes back to be recomputed.
  void ForgetRequest(int64_t id);
  // The oracle's next token after the request's first seq_len tokens (appended to `state` up to
  // there): what an uncorrupted engine samples.
  int64_t OracleToken(const Request& req, ExpectedState& state, int64_t seq_len) const;
  // Speculative decoding (engine_eagle.cpp): each decode row proposes drafts in new slots, the
  // draft forwards write them after the decode's forward, and after sampling the oracle model
  // run on the pool accepts a prefix of them; the rejected drafts' slots are freed.
  // The install's inner forwards: D with --draft-forwards D > 1, else 1.
  void DescribeDraftForwards(runtime::InstallArgs& args) const;
  // A decode batch's drafts, handed to hooks.OnDrafts (none for other batches).
  void ProposeDrafts(const Batch& batch, EngineHooks& hooks);
  void DescribeDrafts(runtime::StepInput& input);
  // Inner forwards 1..D-1 around the draft model's KV writes; returns the canary's seconds.
  double RunDraftForwards();
  void AcceptDrafts();
  // Checks a finished request's whole output against the oracle, then hands it to TakeFinished,
  // or keeps it while quarantine still holds its tokens.
  void Finish(std::unique_ptr<Request> done);

  // Quarantine (engine_quarantine.cpp): tokens wait in held_ for the canary's verdict; a
  // violation's requests are recomputed and the cached prefixes holding its slots dropped.
  void RecordRowOwners(const Batch& batch, int64_t outer);
  void HoldSampled(const Batch& batch, const std::vector<int64_t>& sampled, int64_t outer,
                   const std::vector<std::unique_ptr<Request>>& done);
  // With sampled verify: every record a finished request's forwards read, verified unsampled now
  // (before its slots are freed for reuse); its held tokens wait for that report.
  void VerifyFinishedSlots(const std::vector<std::unique_ptr<Request>>& done);
  // After EndStep of outer step `outer`: every violation of the steps before it is reported.
  void AfterVerdict(int64_t outer);
  // Adds the full-pool slots a shown row names to `slots`: its own; a compressed pool's rows name
  // compressed slots, reached from every full slot whose table entry names it; an SWA row none.
  void AddFullPoolSlotsOf(const runtime::ViolationRow& row, std::set<int64_t>& slots) const;
  void Recompute(int64_t id);
  // The allocation units of `req`'s own slots that another running request or the cache also
  // holds (a slot freed while in use and handed out again): freeing them would hand them out a
  // third time.
  std::vector<int64_t> UnitsOwnedElsewhere(const Request& req) const;
  // The allocation units of `req`'s own positions (those after its cached prefix).
  std::set<int64_t> OwnUnits(const Request& req) const;
  // Whether a running request other than `except` (may be null) owns `unit` (not via the cache).
  bool OwnedByRunning(int64_t unit, const Request* except) const;
  // Slots per allocation unit: 1, or the block size when paged.
  int64_t Unit() const { return std::max<int64_t>(options_.block_size, 1); }
  void RemoveCachedBadSlots();
  void Deliver(const std::vector<HeldToken>& tokens);
  Request* FindHeldRequest(int64_t id);
  // The paged layout (engine_paged.cpp). Rewrites the batch rows' req_to_token entries, the
  // host view attention reads, from the block table.
  void DeriveReqToToken(const Batch& batch);
  // The FULL group over the pool as pages of a block: each fingerprinted layer's K and V.
  void DescribePagedPool(runtime::GroupSpec& full) const;
  // Layer 0, or every layer with --fingerprint-layers all, for a per-token pool.
  void DescribePerTokenPool(runtime::GroupSpec& full) const;
  // --pool-layout mla: the K layers as the latent buffer; --compress-ratio: the FULL group is the
  // compressed pool, created here (engine_pool_kinds.cpp).
  void DescribePoolKind(runtime::GroupSpec& full);
  // The model's KV write of one token: the pool (through a misdirected latent write), and the
  // compressed pool.
  void WriteTokenKv(int64_t slot, int64_t token, int64_t position);
  bool FingerprintsAllLayers() const;
  // The forward's block table and, on the host, each batch row's block ids.
  void DescribeBlocks(const Batch& batch, runtime::ForwardBatch& forward,
                      runtime::ForwardHostInput& host) const;
  // The buffers a PD transfer moves, in splice order: [k_head, K layers..., k_tail, v_head,
  // V layers..., v_tail]; both engines build it the same way.
  std::vector<runtime::CanaryManager::BufferInfo> TransferList() const;
  TransferPacket BuildTransfer(const Request& req, int64_t first_token) const;
  // Host tier (--host-tier): radix nodes evicted from the device keep their KV bytes and canary
  // records here, under the same index mapping, and come back on a prefix hit.
  std::vector<int64_t> BackupToHost(const std::vector<int64_t>& device_slots);
  void RestoreFromHost(const std::vector<int64_t>& host_slots,
                       const std::vector<int64_t>& device_slots);
  // The copies themselves, between device slots and physical host slots.
  std::vector<int64_t> CopyToHost(const std::vector<int64_t>& device_slots);
  void CopyFromHost(const std::vector<int64_t>& host_slots,
                    const std::vector<int64_t>& device_slots);
  // L3 (engine_l3.cpp): the host tier's slots become tier ids (l3_tier.h).
  std::vector<int64_t> BackupToTier(const std::vector<int64_t>& device_slots);
  void RestoreFromTier(const std::vector<int64_t>& ids, const std::vector<int64_t>& device_slots);
  void ReleaseTierIds(const std::vector<int64_t>& ids);
  // Frees physical host slots by moving the oldest pages in host (never `keep`) down to L3.
  void MakeHostRoom(int64_t slots, int64_t keep);
  void MovePageDown(int64_t page);
  void LoadPageUp(int64_t page, const std::vector<int64_t>& requested,
                  const std::vector<int64_t>& device_slots);
  void LoadRecordsFromL3(const std::string& key, const std::vector<int64_t>& host_slots);
  runtime::StoreLoadResult LoadFromL3Store(const std::string& key,
                                           const std::vector<int64_t>& host_slots);
  // A page left L3 (loaded or dropped): its blob becomes the key's previous one, its key free.
  void RetireKey(const std::string& key);

  SimOptions options_;
  std::string name_;
  Device device_;
  std::unique_ptr<runtime::OwnedStream> stream_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<ReqToTokenTable> table_;
  std::unique_ptr<BlockTable> blocks_;  // --block-size > 0
  std::unique_ptr<SlotAllocator> allocator_;
  std::unique_ptr<RadixCache> radix_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<runtime::CanaryManager> canary_;
  std::unique_ptr<SwaState> swa_;  // --swa-window: the sliding-window layers
  std::unique_ptr<CompressedState> compressed_;  // --compress-ratio
  std::pair<int64_t, int64_t> misdirected_{-1, -1};  // MisdirectLatentWrite, until the write
  OracleModel oracle_;
  runtime::DeviceBuffer batch_buffer_;  // [6, token capacity] int64 forward inputs
  runtime::DeviceBuffer draft_buffer_;  // [D - 1, 6, rows] int64, allocated at the first drafts
  std::vector<DraftRow> drafts_;        // the step's drafts
  std::mt19937_64 draft_rng_;           // whether the draft model guesses the oracle's token
  int64_t token_capacity_ = 0;
  std::map<int64_t, ExpectedState> expected_;  // by request id
  std::map<int64_t, int64_t> last_true_sample_;  // by request id: the sampler's own output
  std::vector<std::pair<int64_t, int64_t>> slot_contents_;  // (token, position) last written
  std::vector<std::unique_ptr<Request>> finished_;
  std::vector<ReportedViolation> violations_;
  std::vector<SampledToken> last_sampled_;
  EngineStats stats_;
  EngineHooks* hooks_ = nullptr;  // the hooks of the step in progress
  EngineRole role_ = EngineRole::kUnified;
  std::vector<TransferPacket> transfers_;
  std::vector<std::vector<uint8_t>> host_kv_;                // per host slot: all layers' K and V
  std::vector<std::pair<int64_t, int64_t>> host_contents_;   // per host slot: (token, position)
  std::vector<int64_t> host_free_;                            // LIFO
  std::unique_ptr<L3Tier> l3_;                                // --l3-slots > 0
  // Quarantine state (on_violation quarantine only; held_ null otherwise).
  std::unique_ptr<HeldTokens> held_;
  std::vector<std::unique_ptr<Request>> finishing_;  // finished, some tokens still held
  std::map<int64_t, std::map<int64_t, int64_t>> row_owners_;  // outer step -> row -> request id
  std::set<int64_t> bad_slots_;   // failing slots a cached prefix may still hold
  size_t violations_seen_ = 0;    // of violations_, rows AfterVerdict already took slots from
  std::vector<TokenOutcome> outcomes_;
  QuarantineStats quarantine_stats_;
};

}  // namespace kvcanary::sim
