// The simulator's scheduler: continuous batching over the slot allocator, the req_to_token table
// and the radix cache, shaped like SGLang's (a waiting queue, a running set, and per step either
// a chunked-prefill batch or a decode batch).
//
// DESIGN: the life cycle of one engine step.
//   1. Schedule(step) picks the batch and does all the bookkeeping a forward needs before it
//      runs: admission (radix match of the prompt minus its last token, lock of the matched path,
//      host-tier restore of a host-only tail through the restore callback, a req_to_token row
//      filled with the prefix slots), slot allocation for the new tokens (evicting unlocked radix
//      leaves, LRU first, when the allocator is dry), and the req_to_token entries of the new
//      slots. Only the host copy of the table is edited.
//   2. The engine runs the forward: ReqToTokenTable::Upload(); canary plan and write for the
//      rows; KvPool::WriteToken(new_slots[i], tokens[prefix_len + i], prefix_len + i); the oracle
//      model for each row that produces a token (attention over positions [0, prefix_len +
//      extend_len) through the row, query token tokens[prefix_len + extend_len - 1]); canary
//      verify.
//   3. Complete(batch, sampled) advances kv_len, appends the sampled tokens, and retires finished
//      requests: their sequence minus the last token (whose KV is never written) goes into the
//      radix cache, duplicate slots are freed, the lock is dropped and the row freed. The finished
//      requests are handed back so the engine can check them and make follow-ups.
//
// Positions. A request with L tokens (prompt + output so far) has KV for positions [0, kv_len).
// A row with prefix_len p and extend_len n writes the KV of tokens p..p+n-1 at positions
// p..p+n-1 into new_slots and req_to_token[row][p..p+n). Prefill rows extend the prompt in chunks;
// the last chunk (p + n == L) produces a token. A decode row has p = L - 1, n = 1: it writes the
// KV of the last token (the one sampled by the previous step) and produces the next one. So after
// Complete a running request always has kv_len == L - 1 once its prefill is done.
//
// Slot ownership. Slots in req->slots[0, cached_len) belong to the radix cache and are pinned by
// the request's lock; slots in [cached_len, kv_len + pending) belong to the request. On finish the
// cache takes the request's slots, except duplicates of what it already holds, which the
// scheduler frees. Slots the cache evicts are freed by the scheduler. Host slots belong to the
// engine: the backup callback hands them to the cache, the restore callback gets them back, and
// RadixCache::TakeReleasedHostSlots returns the ones the cache dropped.
//
// Paged layout (block_size N > 1, with a BlockTable): the allocator hands out blocks instead of
// slots. A request grows into the rest of its last block before it takes a new one; the block
// table row lists its blocks and req_to_token its slots (block * N + offset). The radix cache
// shares whole pages, so a matched prefix is whole blocks; at finish only the whole blocks go to
// the cache and the partly filled last block is freed. Everything below counts in allocation
// units: slots, or blocks when paged.
//
// Admission control. A request is admitted only when the free and evictable slots cover, beyond
// what running requests may still need, every KV slot it can ever use
// (min(prompt + max_new_tokens, max_context_len) - 1 minus its cached prefix). Running requests
// therefore never run out of slots and nothing is ever retracted; a request the empty pool cannot
// hold makes Schedule report kPoolTooSmall instead of waiting forever.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/block_table.h"
#include "sim/radix_cache.h"
#include "sim/req_to_token_table.h"
#include "sim/slot_allocator.h"
#include "sim/workload.h"

namespace kvcanary::sim {

struct SchedulerOptions {
  int64_t max_running_reqs = 32;        // admitted requests at once (= req_to_token rows - 1)
  int64_t chunk_size = 256;             // most prompt tokens one request extends per prefill
  int64_t prefill_token_budget = 1024;  // most prompt tokens one prefill batch extends
  int64_t max_context_len = 2048;       // req_to_token width; a request finishes at this length
  // PD prefill side: a request finishes once it produced its first token (the decode side takes
  // it from there), so it only ever needs its prompt's slots.
  bool prefill_only = false;
  // Whether admission reuses cached prefixes. Off with SWA layers: the simulator's radix cache
  // keeps no sliding-window KV for cached tokens (SGLang's SWA radix cache does), so a prompt
  // is recomputed whole.
  bool reuse_prefix = true;
  // Tokens per allocation unit: 1 hands out slots (req_to_token only); N > 1 hands out blocks of
  // N slots and fills a block table (Scheduler::SetBlockTable).
  int64_t block_size = 1;

  // Throws kvcanary::Error naming the first field that is not positive.
  void Validate() const;
};

struct Request {
  RequestSpec spec;
  std::vector<int64_t> tokens;  // the prompt, then the output
  std::vector<int64_t> output;
  int64_t row = 0;  // req_to_token row while admitted, 0 (padding row) otherwise
  // The KV slot of each position with a slot, prefix first; mirrors the request's req_to_token
  // row (the engine's faults may change the row, never this).
  std::vector<int64_t> slots;
  int64_t cached_len = 0;         // leading positions owned by the radix cache (locked)
  int64_t host_restored_len = 0;  // of those, restored from the host tier at admission
  int64_t kv_len = 0;             // positions whose KV is in the pool (cached or forwarded)
  RadixCache::NodeId lock_node = RadixCache::kRoot;
  bool prefill_done = false;  // a forward has produced the first output token
  int64_t recomputed = 0;     // times Requeue sent it back to be computed again
  int64_t delivered = 0;      // output tokens handed to the user (quarantine: verified first)
  bool finished = false;
  int64_t admit_step = -1;
  int64_t first_token_step = -1;
  int64_t finish_step = -1;

  int64_t seq_len() const { return static_cast<int64_t>(tokens.size()); }
};

struct BatchRow {
  Request* req = nullptr;
  int64_t row = 0;         // req->row
  int64_t prefix_len = 0;  // positions before this forward's tokens
  int64_t extend_len = 0;  // tokens this forward writes (new_slots.size())
  std::vector<int64_t> new_slots;
  // Whether this forward computes the logits of the row's last token: the last prefill chunk, or
  // a decode. Exactly these rows get a sampled token in Complete.
  bool produces_token = false;
};

struct Batch {
  enum Kind { kIdle, kPrefill, kDecode, kPoolTooSmall };
  Kind kind = kIdle;
  int64_t step = 0;
  std::vector<BatchRow> rows;
  std::string reason;  // kPoolTooSmall: why, for "kv-canary sim: pool too small: <reason>"
  int64_t NumTokens() const;
  int64_t NumProducing() const;
};

struct SchedulerStats {
  int64_t admitted = 0;
  int64_t finished = 0;
  int64_t looked_up_tokens = 0;   // prompt tokens matched against the cache at admission
  int64_t prefix_hit_tokens = 0;  // of those, found resident
  int64_t host_hit_tokens = 0;    // of those, restored from the host tier
  int64_t prefill_tokens = 0;     // tokens extended by prefill rows
  int64_t decode_tokens = 0;
  int64_t prefill_batches = 0;
  int64_t decode_batches = 0;
  int64_t evicted_tokens = 0;  // device slots released by radix eviction
  int64_t aborted = 0;         // requests dropped by Abort
  int64_t requeued = 0;        // requests sent back to the queue by Requeue
  double PrefixHitRate() const {
    return looked_up_tokens == 0
               ? 0.0
               : static_cast<double>(prefix_hit_tokens + host_hit_tokens) / looked_up_tokens;
  }
};

// Thread safety: none.
//
// Invariants: a waiting request holds no row, slot or lock. A running request holds one row,
// one lock on lock_node, and the slots in `slots`, which its req_to_token row lists (unless a
// fault edited the row). Completed requests hold nothing.
class Scheduler {
 public:
  // Copies the KV and canary records of host-only `node` from `host_slots` into `device_slots`;
  // after it returns the cache no longer references host_slots (the engine frees them).
  using RestoreCallback =
      std::function<void(RadixCache::NodeId node, const std::vector<int64_t>& host_slots,
                         const std::vector<int64_t>& device_slots)>;

  // The components must outlive the scheduler. REQUIRES: table rows == max_running_reqs + 1 and
  // table width == max_context_len (throws kvcanary::Error otherwise).
  Scheduler(const SchedulerOptions& options, SlotAllocator& allocator, ReqToTokenTable& table,
            RadixCache& cache);

  // The radix cache's eviction callback (the host tier's backup; may be null) and the host
  // tier's restore (null: host-only matches are not restored, only the resident part is used).
  void SetEvictCallback(RadixCache::EvictCallback on_evict) { on_evict_ = std::move(on_evict); }
  void SetRestoreCallback(RestoreCallback restore) { restore_ = std::move(restore); }
  // The paged layout's block table (rows shared with req_to_token); must outlive the scheduler.
  // REQUIRES: its block size is options().block_size and it has the table's rows (kvcanary::Error).
  void SetBlockTable(BlockTable* blocks);

  // Queues a request; it is considered from step spec.arrival_step on, in Submit order.
  // REQUIRES: 1 <= prompt length < max_context_len, max_new_tokens >= 1 (kvcanary::Error).
  void Submit(RequestSpec spec);

  // The next batch (see DESIGN). kIdle: nothing to do now (no request has arrived, or all are
  // done). kPoolTooSmall: a request cannot be admitted although nothing else holds slots.
  Batch Schedule(int64_t step);

  // Applies the forward's results: `sampled` has one token per row with produces_token, in row
  // order (std::logic_error otherwise). Returns the requests that finished, in row order; the
  // caller owns them. REQUIRES: `batch` is the last batch Schedule returned.
  std::vector<std::unique_ptr<Request>> Complete(const Batch& batch,
                                                 const std::vector<int64_t>& sampled);

  // PD decode side: admits a request whose prompt was prefilled elsewhere. `tokens` is the prompt
  // then the first output token; slots for the prompt's positions are allocated, entered in a
  // new req_to_token row and returned (the caller copies the transferred KV into them). nullopt
  // (nothing changed) when no row or not enough slots are available yet.
  std::optional<Request*> AdmitPrefilled(const RequestSpec& spec, std::vector<int64_t> tokens,
                                         int64_t step);

  // Drops a running request without caching it (a quarantined fault victim): frees its row and
  // the units it owns except `keep` (units a fault handed to someone else), and unlocks its
  // cached prefix. The request is destroyed.
  void Abort(Request* req, const std::vector<int64_t>& keep);

  // Sends a running request back to the head of the queue to be computed again from its token
  // ids (a quarantined request): its KV is released as Abort releases it, except `keep`, and it
  // keeps its first `keep_outputs` output tokens (the ones delivered). REQUIRES: req running.
  void Requeue(Request* req, const std::vector<int64_t>& keep, int64_t keep_outputs);
  // Queues a finished request again at the head of the queue, truncated to its first
  // `keep_outputs` output tokens (a quarantined request whose KV the cache already took).
  // Both keep at most the outputs it has, and leave at least one output to produce.
  void Resubmit(std::unique_ptr<Request> req, int64_t keep_outputs);

  // Rows of finished, aborted and requeued requests stay allocated, their entries intact, for
  // this many more Schedule calls before they are freed: a report that arrives a step late still
  // reads the table the request had (quarantine). 0 (the default) frees them at once.
  void SetRowReleaseDelay(int64_t schedules) { row_release_delay_ = schedules; }

  // n allocation units (slots, or blocks when paged) from the allocator, evicting from the radix
  // cache when it is dry; nullopt (nothing taken) when even eviction cannot free enough.
  std::optional<std::vector<int64_t>> AllocateSlots(int64_t n);

  bool Done() const { return waiting_.empty() && running_.empty(); }
  const std::deque<std::unique_ptr<Request>>& waiting() const { return waiting_; }
  const std::vector<std::unique_ptr<Request>>& running() const { return running_; }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerOptions& options() const { return options_; }

  // KV slots a request uses by the time it finishes: min(prompt + max_new, max_context_len) - 1.
  int64_t KvTotal(const Request& req) const;

 private:
  // Units running requests may still allocate.
  int64_t Reserved() const;
  // Allocation units spanning `tokens` positions.
  int64_t Units(int64_t tokens) const { return BlocksSpanning(tokens, options_.block_size); }
  // The slots of the request's next n positions: the rest of its last block, then new units.
  // Enters them in its rows and in req.slots; nullopt (nothing changed) when no unit is left.
  std::optional<std::vector<int64_t>> Grow(Request& req, int64_t n);
  // Enters slots of positions [pos, pos + slots.size()) in req_to_token and the block table.
  void Place(const Request& req, int64_t pos, const std::vector<int64_t>& slots);
  // Zeroes and frees the request's rows (after the row release delay).
  void ReleaseRow(Request& req);
  // Frees the rows whose delay ran out (each Schedule call).
  void ReleaseDueRows();
  // Frees the units the request owns except `keep` and units already free, unlocks its cached
  // prefix and releases its row (Abort and Requeue).
  void ReleaseKv(Request& req, const std::vector<int64_t>& keep);
  // Resets a request that holds nothing to be admitted again with its first `keep_outputs`
  // output tokens, and puts it at the head of the queue.
  void RequeueReleased(std::unique_ptr<Request> req, int64_t keep_outputs);
  // Extends `req` by up to `limit` tokens into a new batch row; false when no slot is left.
  bool Extend(Request& req, int64_t limit, Batch& batch);
  // Admits the waiting request (match, lock, restore, row); false (nothing changed) when the
  // slots it may need are not available. Sets `*why` then.
  bool Admit(Request& req, int64_t step, std::string* why);
  void Retire(Request& req);
  // The running_ entry of `req` (std::logic_error when it is not running).
  std::vector<std::unique_ptr<Request>>::iterator FindRunning(const Request* req);
  void SchedulePrefill(int64_t step, Batch& batch);
  void ScheduleDecode(Batch& batch);

  SchedulerOptions options_;
  SlotAllocator& allocator_;
  ReqToTokenTable& table_;
  RadixCache& cache_;
  BlockTable* blocks_ = nullptr;
  RadixCache::EvictCallback on_evict_;
  RestoreCallback restore_;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;  // admission order
  std::string last_refusal_;
  SchedulerStats stats_;
  int64_t row_release_delay_ = 0;
  std::vector<std::pair<int64_t, int64_t>> rows_to_release_;  // (row, Schedule calls left)
};

}  // namespace kvcanary::sim
