// The configuration of one simulator run: every knob of the engine, the workload, the
// canary and the fault injector in one struct, the fault classes, the scenario presets,
// and the one validation that rejects bad combinations before anything is allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvcanary::sim {

// Bad options: an unknown name, a value out of range, a combination the engine cannot run. The
// message is one line naming the flag, fit to print after "kvcanary sim: " (exit status 2).
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

// The fault classes, in the order of docs/sim.md's fault table (the report's row order).
enum class FaultKind {
  kReqToToken,
  kStrideView,
  kWrongStrideRead,
  kRealKvUsed,
  kRealKvUnusedCache,
  kRealKvPostForward,
  kStaleSlotReuse,
  kOffloadDrop,
  kPdTransferDrop,
  kSwaLutStale,
  kNextTokenSwap,
  kPositionSkip,
  // The paged layout's classes (--block-size > 0).
  kBlockTableSwap,
  kFreedBlockReuse,
  kRealKvPage,
  kStaleOutCacheLoc,
  // A pool deeper than four layers (--layers > 4).
  kRealKvDeepLayer,
  // The L3 tier below the host tier (--host-tier --l3-slots > 0).
  kL3Corrupt,
  kL3Stale,
  // Speculative decoding (--draft-forwards > 1).
  kEaglePositionPlusOne,
  // An MLA pool (--pool-layout mla) and a compressed pool (--compress-ratio > 1).
  kMlaLatentPage,
  kCompressedSlotStale,
};

// The report's name: "req_to_token", "stride_view", ..., "position_skip".
const char* FaultName(FaultKind fault);
// The inverse of FaultName (exact, case-sensitive); nullopt for any other string.
std::optional<FaultKind> ParseFault(std::string_view name);
// Every fault class, in FaultKind order.
std::vector<FaultKind> AllFaults();

struct SimOptions {
  // --- the run ---
  std::string scenario = "default";  // the preset these options came from (a label only)
  std::string device = "cpu";        // "cpu" or "cuda": where the KV pool and the canary live
  uint64_t seed = 1;                 // seeds the workload, the fault steps and the fault targets
  int64_t steps = 3000;               // stop after this many outer steps; 0 = no step limit
  int64_t num_requests = 0;          // stop once this many requests finished; 0 = no limit
  // REQUIRES: steps > 0 or num_requests > 0, so that the run ends.

  // --- the KV pool and the scheduler ---
  int64_t num_slots = 16384;            // token slots of the (device) pool, slot 0 = padding
  int64_t num_layers = 4;              // layers, each with a K and a V tensor
  int64_t bytes_per_token = 128;        // K (and V) bytes of one token in one layer; multiple of 16
  int64_t max_running_reqs = 32;       // running requests at once; req_to_token has one more row
  int64_t max_context_len = 1024;       // req_to_token columns: prompt + output of one request
  int64_t chunk_size = 256;            // chunked prefill: most tokens of one request per step
  int64_t prefill_token_budget = 1024;  // most prefill tokens of all requests in one step
  int64_t vocab_size = 32000;          // the oracle model's vocabulary
  // The KV layout: 0 = SGLang's per-token req_to_token; N > 0 = a paged block table of N-token
  // blocks (slot = block * N + offset, block 0 holds the padding slot). Must divide num_slots.
  int64_t block_size = 0;
  // Speculative decoding, EAGLE-style: inner forwards of a decode step. 0 or 1 = a plain decode;
  // D > 1: the first forward writes the accepted token as a plain decode does, each of the other
  // D - 1 writes one draft token per request at the next position; the oracle model decides how
  // many drafts are accepted, and the rejected drafts' slots are freed.
  int64_t draft_forwards = 0;
  // How the canary sees the pool: "mha" (K and V halves) or "mla" (the K layers are the latent
  // buffer, one canary half; the V bytes go unread).
  std::string pool_layout = "mha";
  // > 1: a compressed pool beside the full pool (DeepSeek-V4 style), one compressed slot per
  // `compress_ratio` full slots: full slot s with (s + 1) % ratio == 0 maps to slot s / ratio.
  // The canary's FULL group is the compressed pool. 0 = none.
  int64_t compress_ratio = 0;

  // --- the workload (seeded; shared system prompts and follow-ups make prefix sharing heavy) ---
  int64_t num_system_prompts = 4;      // distinct shared system prompts (at least 1 is used)
  int64_t system_prompt_len_min = 32;  // tokens of a system prompt, [min, max]
  int64_t system_prompt_len_max = 96;
  int64_t user_turn_len_min = 8;  // tokens of one user turn, [min, max]
  int64_t user_turn_len_max = 48;
  int64_t max_new_tokens_min = 8;  // a request finishes after this many outputs, [min, max]
  int64_t max_new_tokens_max = 48;
  double follow_up_prob = 0.5;     // chance a finished turn is followed up in its conversation
  double arrivals_per_step = 0.5;  // mean new conversations arriving per step

  // --- hybrid sliding-window attention ---
  int64_t swa_window = 0;        // window W of the SWA layers; 0 = no SWA layers
  int64_t swa_num_slots = 4096;  // slots of the SWA pool (slot 0 = padding); used when W > 0

  // --- host tier and prefill/decode disaggregation ---
  bool host_tier = false;     // back evicted radix nodes up to host memory, restore on a hit
  int64_t host_slots = 8192;  // token slots of the host tier; used when host_tier
  // L3 below the host tier (a page store): a full host tier moves its oldest pages down instead
  // of dropping nodes, up to this many tokens; 0 = no L3. Used when host_tier.
  int64_t l3_slots = 0;
  bool pd = false;            // a prefill engine and a decode engine with a KV transfer between

  // --- the canary ---
  std::string mode = "log";           // "none", "log" (violations go to the report) or "raise"
  std::string real_data = "partial";  // real-KV hashing: "none", "partial" (16 bytes) or "all"
  // What a violation does to the engine (Config::on_violation): "log", or "quarantine" (the
  // runtime also names the requests the violations touched; needs mode "log").
  std::string on_violation = "log";
  // With quarantine: the request's forwards a sampled token waits for after its own step before
  // it is delivered (0: its own step's verdict only; 1 also checks it was fed back unchanged).
  int64_t hold_back = 1;
  // Layers fingerprinted: "layer0" (layer 0) or "all" (every layer; the paged preset's).
  std::string fingerprint_layers = "layer0";
  int64_t sweep_interval = 8;         // steps between SWEEP verifies of cached slots; 0 = off
  int64_t verify_sample = 1;  // HEAD/TAIL verify a rotating 1/K of every prefix (Config); 1 = all
  int64_t ring_capacity = 65536;  // violation ring rows: fill-once, so sized for a whole run
  // The timing-jitter fuzzer (Config::jitter_*; needs mode log or raise): spin-waits at four
  // points of every forward, each firing with probability 0.5 for log-uniform [1, max] ticks,
  // seeded by --seed. A no-op on the CPU, so a CPU run's results are those without it.
  bool jitter = false;
  int64_t jitter_max_cycles = 100000;

  // --- fault injection ---
  // "all" (every class that applies, see FaultApplies), "none", or a comma-separated list of
  // FaultName()s, each of which must apply.
  std::string faults = "all";
  int64_t fault_rate = 5;  // injections per enabled fault class per run, at seeded steps

  // --- output ---
  std::string json_path;          // also write the report as JSON here; empty = no JSON
  std::string progress = "auto";  // progress bar on stderr: "auto" (when a terminal), "on", "off"
};

// Whether the engine configured by `options` has the part the fault breaks: swa_lut_stale needs
// swa_window > 0, offload_drop host_tier, l3_corrupt and l3_stale host_tier with l3_slots > 0, pd_transfer_drop pd, real_kv_unused_cache a sweep
// (sweep_interval > 0, the only verify that reads cache-only slots); the paged classes need
// block_size > 0, and the classes that break req_to_token itself (req_to_token, stride_view,
// wrong_stride_read, stale_slot_reuse) need block_size 0; real_kv_deep_layer needs a pool of more
// than four layers (num_layers > kMaxRealKvSources), so no preset (four layers) injects it and a
// run asks for it with --layers; eagle_position_plus_one needs draft forwards (draft_forwards >
// 1); mla_latent_page needs pool_layout "mla" with a per-token table; with compress_ratio > 1
// only compressed_slot_stale applies (the canary sees the compressed pool alone). Everything
// else applies to every
// engine. The canary's own settings (mode, real_data) do not count: a fault the canary is
// configured too weakly to see is still injected and must show up as undetected.
bool FaultApplies(FaultKind fault, const SimOptions& options);

// The fault classes the run injects, in FaultKind order: options.faults resolved ("all" keeps those
// that apply). REQUIRES: ValidateOptions(options) passed.
std::vector<FaultKind> EnabledFaults(const SimOptions& options);

// The built-in scenarios, in the order `all` runs them: default, swa, offload, pd, paged, eagle,
// mla, compressed, soak.
std::vector<std::string> PresetNames();
// The options of one preset (`scenario` set to its name). Throws UsageError for any other name,
// "all" included (see ScenariosToRun).
SimOptions ScenarioPreset(std::string_view name);
// The presets `--scenario name` runs: all of them for "all", else just `name`. Throws UsageError
// naming the valid scenarios when `name` is neither.
std::vector<std::string> ScenariosToRun(std::string_view name);

// Throws UsageError with the first problem found: an unknown value of device, mode, real_data,
// progress or faults; a number out of range (above its flag's maximum in sim_flags.h, or below
// what the engine needs); a workload that cannot fit the pool; a fault named
// explicitly that does not apply; device "cuda" without a usable CUDA device.
void ValidateOptions(const SimOptions& options);

// The hold-back the quarantine uses: --hold-back, raised to K - 1 with sampled verify K (a
// request's K consecutive forwards verify every position of its prefix, so a token that waits
// for K - 1 more forwards has every record its own forward read checked).
int64_t QuarantineHoldBack(const SimOptions& options);

}  // namespace kvcanary::sim
