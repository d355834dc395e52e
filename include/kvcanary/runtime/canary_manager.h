// CanaryManager: the host runtime an engine installs once and calls around every forward.
// It owns the canary buffers and the per-forward workspace, runs the
// four-phase step protocol through ops/, reads violations back one step late without
// synchronising the hot path, and reports them (log lines, a listener, metrics).
//
//   auto canary = CanaryManager::Install(config, install_args);   // null when mode is none
//   canary->MarkInitFinished();                                   // after graph capture
//   each step:  canary->BeginStep(step_input);                     // phase 1, outside graphs
//               canary->PreForward(0);                            // phase 2, capturable
//               ... the model writes the KV of the new tokens ...
//               canary->PostForward(0);                           // phase 3, capturable
//               canary->EndStep();                                // phase 4: may log or raise
// A replayed CUDA graph that captured phases 2-3 is reported with ReplayedForward(0) instead.
// docs/integration.md walks through an integration.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvcanary/format.h"
#include "kvcanary/runtime/capacities.h"
#include "kvcanary/runtime/config.h"
#include "kvcanary/runtime/log.h"
#include "kvcanary/runtime/metrics.h"
#include "kvcanary/runtime/page_store.h"
#include "kvcanary/runtime/pool_layout.h"
#include "kvcanary/runtime/radix_view.h"
#include "kvcanary/runtime/rank_signal.h"
#include "kvcanary/runtime/violation_format.h"
#include "kvcanary/tensor.h"

namespace kvcanary::runtime {

// One buffer group of the KV pool: FULL, or SWA with its full->SWA table.
struct GroupSpec {
  GroupKind kind = GroupKind::kFull;
  // What a slot holds (pool_layout.h). mla and nsa give their latent layer(s) as k_layer0 or
  // k_layers and no V layer; the group then has the K canary half alone.
  PoolLayout layout = PoolLayout::kMha;
  int64_t num_slots = 0;  // slots of the group's own slot space (its canary buffers' rows)
  // Layer-0 K and V as [num_slots / page_size, page_size * bytes_per_token] uint8 (row layout:
  // page_size 1). Absent V = a K-only pool (no V canary half). The real-KV sources are live views.
  TensorView k_layer0;
  TensorView v_layer0;
  // Instead of k_layer0 / v_layer0: up to kMaxRealKvLayers layers per half, each shaped like
  // k_layer0. Config::fingerprint_layers chooses which are folded: all of them ("all"; a byte
  // flipped in any is caught), or layer 0 ("layer0"; a list of at most kMaxRealKvSources keeps
  // folding every listed layer). verify_backup re-hashes one host layer, so it refuses more than
  // one fingerprinted layer.
  std::vector<TensorView> k_layers;
  std::vector<TensorView> v_layers;
  int64_t page_size = 1;
  int64_t bytes_per_token = 0;
  // nsa only: the indexer's key buffer of up to kMaxRealKvLayers layers, each uint8
  // [num_slots / page_size, page_size * indexer_bytes_per_token] (page_size as above); its
  // bytes per token a positive multiple of 16. Folded into the K half's fingerprint after the
  // latent layers, chosen by Config::fingerprint_layers like them.
  std::vector<TensorView> indexer_layers;
  int64_t indexer_bytes_per_token = 0;
  // SWA only: int64 [full_pool_size + 1] full slot -> SWA slot (0 = not resident), on the device.
  TensorView full_to_swa;
  // A compressed pool (DeepSeek-V4 style, FULL group only): one compressed slot holds what
  // `compress_ratio` consecutive full-pool tokens compress to, written when the last of them is.
  // The group's slots (num_slots, its layers, host mirrors) are the compressed pool's;
  // full_to_compressed, int64 [pool_slot_count + 1] on the device, maps each full slot to the
  // compressed slot it closes, 0 for a slot that closes none. Records are written and verified
  // through it as an SWA group's are through full_to_swa: a compressed slot's record holds the
  // closing token and position, and a stale or wrong entry reads another slot's record. The
  // chain link is checked only where the predecessor's full slot closes a compressed slot too;
  // the write's chain-position assert is off for this group. 1 = an ordinary pool (no table).
  int64_t compress_ratio = 1;
  TensorView full_to_compressed;
  int64_t host_slots = 0;  // > 0: host-offload sidecar mirrors of this many slots
};

struct InstallArgs {
  Device device = Device::CPU();
  StreamHandle stream = nullptr;  // the compute stream every launch is enqueued on
  // The table that locates each request's tokens, on `device`: SGLang's per-token
  // req_to_token (int32 [rows, width]) or a paged block table (int32 or int64 [rows, max_blocks]
  // block ids, slot = block * block_size + position % block_size). Exactly one is given.
  TensorView req_to_token;
  TensorView block_table;
  int64_t block_size = 1;  // tokens per block; divides pool_slot_count; 1 with req_to_token
  std::vector<GroupSpec> groups;  // at most one per kind
  int64_t swa_window_size = 0;
  int64_t pool_slot_count = 0;
  int64_t cuda_graph_max_bs = 0;  // 0 without graphs
  int64_t speculative_num_draft_tokens = 0;
  int64_t max_prefill_tokens = 0;
  std::optional<int64_t> chunked_prefill_size;
  bool draft_worker = false;
  int64_t kv_token_id_vs_position_offset = 0;  // 1 for an EAGLE draft pool
  bool graph_capture = false;                  // the engine captures forwards in CUDA graphs
  bool piecewise_capture = false;
  int num_inner_forwards = 1;  // > 1 for a multi-step draft worker
  // Replaces the default capacities (capacities.h) (tests force small plans to exercise split verification).
  std::optional<Capacities> capacities;
  LogSink* log = nullptr;  // defaults to StderrLogSink()
  // Config::allreduce_violation_signal: how ranks share the error flag. Null = one rank.
  // Must outlive the runtime.
  ViolationSignalReducer* signal_reducer = nullptr;
  // Fault injection, testing only: any probability > 0 installs the perturber.
  PerturbConfig perturb;
};

// The forward as the (possibly captured) launches read it: device tensors at addresses that stay
// fixed across graph replays. Rows past the live batch are padding (req_pool_indices 0).
struct ForwardBatch {
  int64_t batch_size = 0;        // rows, padded
  int64_t num_tokens = 0;        // tokens, padded
  TensorView req_pool_indices;   // [>= batch_size] int64
  TensorView prefix_lens;        // [>= batch_size] int64 tokens already in KV
  TensorView extend_seq_lens;    // [>= batch_size] int64 tokens this forward writes
  TensorView input_ids;          // [>= num_tokens] int64
  TensorView positions;          // [>= num_tokens] int64
  TensorView out_cache_loc;      // [>= num_tokens] int64 full-pool slot per token, 0 = padding
  // The table the plan reads, when it is not the one given at install (absent = that one).
  TensorView req_to_token;
  TensorView block_table;  // the same for an install with block_table (never both kinds)
  // An engine that keeps req_to_token as pointer + pitch passes its pitch: the plan op checks it
  // against the tensor's real row stride (a stale hard-coded pitch raises there).
  std::optional<int64_t> req_to_token_stride0;
};

// The forward as the engine sees it on the host in phase 1 (unpadded).
struct ForwardHostInput {
  std::vector<int64_t> req_pool_indices;
  std::vector<int64_t> prefix_lens;
  std::vector<int64_t> extend_seq_lens;
  // enable_verify_token_assert: each row's prompt then output ids.
  std::vector<int64_t> req_all_ids_flat;
  std::vector<int64_t> req_all_ids_lens;
  // enable_write_input_assert: what each written token should be (the token oracle).
  std::vector<int64_t> expected_input_tokens;
  std::vector<int64_t> expected_input_positions;
  // Block-table installs, optional: the host copy of the block ids each batch row's positions
  // [0, prefix_len + extend_len) use (ceil(that / block_size) per row), rows concatenated.
  // When given, BeginStep refuses an id outside the pool's blocks before anything runs.
  std::vector<int64_t> block_ids;
};

struct StepInput {
  std::vector<ForwardBatch> forwards;        // one per inner forward
  std::vector<ForwardHostInput> host;        // one per inner forward
};

// What raise mode throws: the text of every new violation message, joined by newlines.
class ViolationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A request a reported violation touched (Config::on_violation quarantine): the engine should
// discard the tokens it produced since the step, drop cached prefixes holding the slots and
// recompute it. Rows of a batch are matched to violations as docs/quarantine.md describes.
struct AffectedRequest {
  int64_t req_pool_idx = 0;
  // The latest outer step (BeginStep's step count, from 0) whose batch held the request when a
  // violation touched it.
  int64_t step = 0;
  int64_t fail_reason_bits = 0;  // the OR of its violation rows' bits (FailReason)
  // The failing (slot, position) pairs the request reads or wrote, in report order, no repeats:
  // the table's full-pool slot at the position (for a compressed group, the full slot whose
  // full_to_compressed entry names the failing compressed slot). Empty when the ring overflowed:
  // every live row of the reported steps is then affected.
  std::vector<int64_t> slots;
  std::vector<int64_t> positions;
  bool ring_overflow = false;
};

// Called for every violation row the reporter shows (after the untouched-row filter).
using ViolationListener = std::function<void(const ViolationRow& row, int64_t step)>;

// One fired perturbation, so a test or engine learns what it has to detect. Fields by kind:
//   req_to_token:   row = req_pool_idx, position, original/replacement = old/new slot, slot = new
//   real_kv_*, real_perturb_bytes:
//                   slot = flipped slot in the group's slot space, original/replacement = old/new
//                   byte; row = req_pool_idx (real_kv_used, and real_perturb_bytes on a live
//                   slot) and position where known, else -1; layer = the fingerprinted layer
//                   flipped, byte = the byte's offset in the slot's strip (0 but for
//                   real_perturb_bytes, which picks a folded byte at random)
//   next_token_swap: row = i, position = j (the swapped batch rows), original/replacement =
//                   sampled[i]/sampled[j] before the swap
// `step` is the outer step (next_token_swap: the sampler's own call counter).
struct PerturbationEvent {
  std::string kind;
  int64_t step = 0;
  int64_t slot = -1;
  int64_t row = -1;
  int64_t position = -1;
  int64_t original = 0;
  int64_t replacement = 0;
  int64_t layer = -1;
  int64_t byte = -1;
};
using PerturbationListener = std::function<void(const PerturbationEvent& event)>;

// The host pool's copy of layer 0, for verify_backup: CPU uint8 tensors laid out like the
// group's device layer 0 ([host_slots / page_size, page_size * bytes_per_token], same page size
// and bytes per token). V absent for a K-only group.
struct HostLayer0 {
  TensorView k;
  TensorView v;
};

// What LoadFromStore found under a key.
enum class StoreLoadStatus {
  kLoaded,   // the page's records are in the host mirrors
  kMiss,     // the store holds no entry under the key (never stored, or erased)
  kCorrupt,  // the entry is corrupt or stale, and was reported: the page must not be used
};

struct StoreLoadResult {
  StoreLoadStatus status = StoreLoadStatus::kMiss;
  // kCorrupt: the report, as a runtime that raises throws it ("kv-canary: CANARY_L3_LOAD: ..." or
  // "kv-canary: CANARY_VERIFY_BACKUP: ..."); empty otherwise.
  std::string message;
};

// Thread safety: none. One thread (the engine's scheduler thread) makes every call, in the order
// of the protocol above; the runtime starts no thread of its own. Work goes to the install's
// stream, so other host threads may run the model meanwhile.
//
// Invariants:
// - Every device buffer is allocated at install, sized by the capacities; a step allocates none.
// - Each inner forward moves idle -> BeginStep -> PreForward -> PostForward -> EndStep -> idle;
//   a call out of order, or one whose ops refuse the batch, throws and leaves the phase as it was.
//   AbandonStep returns every forward to idle.
// - Violation rows are read one step late through pinned staging (never a synchronisation on the
//   hot path); rows beyond the ring's capacity are counted, not stored.
// - Only the perturber (testing only) changes KV bytes or req_to_token; the runtime otherwise
//   reads the engine's tensors and writes its own records, rows and counters.
class CanaryManager {
 public:
  // Builds the runtime. Returns null when config.mode is kNone. Throws kvcanary::Error on
  // a refused configuration.
  static std::unique_ptr<CanaryManager> Install(const Config& config, const InstallArgs& args);
  ~CanaryManager();

  void MarkInitFinished();
  void AttachRadixCache(const RadixView* view);
  void SetViolationListener(ViolationListener listener);
  // Called synchronously whenever a perturbation fires (testing only).
  void SetPerturbationListener(PerturbationListener listener);

  void BeginStep(const StepInput& input);
  void PreForward(int inner);
  void PostForward(int inner);
  // Instead of PreForward(inner) + PostForward(inner) when the engine replays a CUDA graph that
  // captured them: the launches replay inside the graph, this only advances the host phase
  // checker the way the two hooks would.
  void ReplayedForward(int inner);
  void EndStep();
  // The engine gave up on the step before its model ran (an op refused the forward): every
  // inner forward returns to IDLE so the step can be described again from BeginStep.
  void AbandonStep();

  // Quarantine: the requests the violations reported since the last call touched, ascending by
  // req_pool_idx, and forgets them. After EndStep of step N every violation of steps up to N - 1
  // has been reported, so tokens held back one step are safe to deliver once this list says
  // nothing of their request. Always empty unless Config::on_violation is quarantine.
  std::vector<AffectedRequest> TakeAffectedRequests();
  // Verifies now, unsampled, the TAIL records of `records` (full-pool slots, each with its
  // position and its predecessor: -1 for a chain's head, 0 to skip the chain check), every
  // group, on the runtime's stream, as a sweep pass does; the rows are reported as a sweep's, by
  // the second EndStep after the call. With sampled verify (Config::verify_sample K > 1) a
  // request's forward checks only 1/K of its prefix, so its last tokens' verdict needs this:
  // call it with a finished request's slots (WalkOfSequence) before any of them is freed or
  // reused, and hold those tokens until that report (docs/quarantine.md). Call between steps
  // (after EndStep, before BeginStep). Throws kvcanary::Error, changing nothing, inside a step,
  // on vectors of different lengths, a slot outside [0, pool_slot_count), a predecessor outside
  // [-1, pool_slot_count) or a negative position.
  void VerifyRecordsNow(const RadixWalk& records);

  // next_token_swap: the engine passes the sampled tokens of a step at sampler exit; with
  // the perturbation enabled, past warm-up (counted in calls of this method) and at least two
  // rows, it may swap two of them. A no-op without a perturber.
  void PerturbNextTokens(std::vector<int64_t>& sampled);

  // Host offload sidecar: copies records of every canary buffer of the group, device ->
  // host mirror, on the compute stream. With config.verify_backup (and real-KV sources) it then
  // synchronises and re-hashes each backed-up host slot from `host_layer0`, comparing with field
  // 3 of the mirrored k_tail (and v_tail) record; each mismatch logs an ERROR and the call throws
  // ViolationError "kv-canary: CANARY_VERIFY_BACKUP: <n> hash mismatch(es) across <m> backed-up
  // slots". REQUIRES with verify_backup: the host KV copy of these slots is complete, or enqueued
  // on the runtime's stream, before the call; host_layer0.k defined (and .v for a group with V
  // sources), else kvcanary::Error.
  void BackupRecords(GroupKind kind, const std::vector<int64_t>& host_indices,
                     const std::vector<int64_t>& device_indices,
                     const HostLayer0& host_layer0 = {});
  void RestoreRecords(GroupKind kind, const std::vector<int64_t>& host_indices,
                      const std::vector<int64_t>& device_indices);

  // L3 tier below the host pool (page_store.h). OffloadToStore synchronises the stream and
  // stores the host-mirror records of `host_indices` (every buffer of the group) as one record
  // blob under `key`: call it after BackupRecords of those slots, when the engine writes the
  // page's KV to the same store. LoadFromStore puts a stored page's records back into the host
  // mirrors of `host_indices` (same count; RestoreRecords then moves them to the device): kLoaded.
  // kMiss, changing nothing, when `key` holds no entry. A corrupt page is never a miss: a blob of
  // the wrong size, header, key or checksum, or (with config.verify_backup) records that do not
  // re-hash to `host_layer0` (the page's KV, already loaded into the host pool; each mismatch
  // logs its CANARY_VERIFY_BACKUP MISMATCH line) logs one ERROR
  // "CANARY_L3_LOAD CORRUPT [<KIND>]: key=<key>: <reason>", counts in
  // MetricsSnapshot::l3_corrupt_loads and appends an incident line; then a runtime that raises
  // (RaisesOnViolation) throws ViolationError "kv-canary: CANARY_L3_LOAD: stored page '<key>' is
  // corrupt: <reason>" (or the CANARY_VERIFY_BACKUP one), and any other returns kCorrupt with that
  // message. Either way the mirrors are left as they were, no request is named (no forward read
  // the page): the engine must drop the page and compute its tokens again.
  void OffloadToStore(GroupKind kind, const std::vector<int64_t>& host_indices, PageStore& store,
                      const std::string& key);
  StoreLoadResult LoadFromStore(GroupKind kind, const std::vector<int64_t>& host_indices,
                                PageStore& store, const std::string& key,
                                const HostLayer0& host_layer0 = {});

  // PD transfer: the canary buffers of a group as (pointer, bytes, item bytes) entries, in
  // splice order [k_head, k_tail, v_head, v_tail] (V omitted for a K-only group).
  struct BufferInfo {
    void* data = nullptr;
    int64_t bytes = 0;
    int64_t item_bytes = 0;
  };
  std::vector<BufferInfo> TransferBuffers(GroupKind kind, int64_t page_size = 1) const;
  // Splices the canary buffers into a K/V split buf-info list (first half K, second half V):
  // [k_head, K..., k_tail, v_head, V..., v_tail], or [k_head, entries..., k_tail] when K-only.
  void SpliceBufInfo(GroupKind kind, std::vector<BufferInfo>& kv_list, int64_t page_size) const;

  // The canary record buffer of an endpoint, for tests and tools: uint8 [num_slots, 32].
  TensorView CanaryBuffer(GroupKind kind, bool tail, bool v_half) const;

  // Every device byte the runtime allocated, stated in the install log line.
  int64_t device_bytes() const;
  // Of those, the canary records; the rest (plans, staging, ring, counters) is workspace, kept
  // below 10% of the records by shrinking the verify capacity (split verification keeps every
  // entry checked).
  int64_t record_bytes() const;
  const Capacities& capacities() const;
  int64_t outer_step() const;
  int64_t sweep_passes() const;
  int64_t split_steps() const;
  std::vector<int> active_tags() const;
  // Counters as of the last drained read (one step behind), plus host-side counts.
  MetricsSnapshot Metrics() const;
  std::string PrometheusText() const;

  class Impl;

 private:
  explicit CanaryManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvcanary::runtime
