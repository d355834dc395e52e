// Option validation for the simulator (the fault names: fault_names.cpp; the presets:
// sim_presets.cpp).
#include "sim/sim_options.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "kvcanary/checked.h"
#include "kvcanary/format.h"
#include "kvcanary/runtime/device_memory.h"
#include "sim/sim_flags.h"

namespace kvcanary::sim {
namespace {

template <typename... Parts>
[[noreturn]] void Throw(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw UsageError(message.str());
}

std::string Join(const std::vector<std::string>& names, const char* separator) {
  std::string joined;
  for (const std::string& name : names) {
    if (!joined.empty()) joined += separator;
    joined += name;
  }
  return joined;
}

std::string ValidFaultNames() {
  std::vector<std::string> names = {"all", "none"};
  for (const FaultKind fault : AllFaults()) names.push_back(FaultName(fault));
  return Join(names, ", ");
}

// What the engine must have for `fault` to apply, in flag terms; nullptr when it always applies.
const char* FaultRequirement(FaultKind fault) {
  switch (fault) {
    case FaultKind::kSwaLutStale:
      return "--swa-window > 0";
    case FaultKind::kOffloadDrop:
      return "--host-tier";
    case FaultKind::kL3Corrupt:
    case FaultKind::kL3Stale:
      return "--host-tier with --l3-slots > 0";
    case FaultKind::kPdTransferDrop:
      return "--pd";
    case FaultKind::kRealKvUnusedCache:
      return "--sweep-interval > 0";
    case FaultKind::kRealKvDeepLayer:
      return "--layers > 4";
    case FaultKind::kEaglePositionPlusOne:
      return "--draft-forwards > 1";
    case FaultKind::kMlaLatentPage:
      return "--pool-layout mla with --block-size 0 and --compress-ratio 0";
    case FaultKind::kCompressedSlotStale:
      return "--compress-ratio > 1";
    case FaultKind::kBlockTableSwap:
    case FaultKind::kFreedBlockReuse:
    case FaultKind::kRealKvPage:
    case FaultKind::kStaleOutCacheLoc:
      return "--block-size > 0";
    case FaultKind::kReqToToken:
    case FaultKind::kStrideView:
    case FaultKind::kWrongStrideRead:
    case FaultKind::kStaleSlotReuse:
      return "--block-size 0 (a per-token req_to_token)";
    default:
      return nullptr;
  }
}

// "a,b,,c" -> {"a", "b", "c"}; empty pieces (a trailing comma) are skipped, not errors.
std::vector<std::string> SplitCommas(std::string_view list) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    if (end > start) pieces.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return pieces;
}

// The explicit list of options.faults (not "all" or "none"), parsed, in FaultKind order, each once.
// Throws for an unknown name.
std::vector<FaultKind> ParseFaultList(std::string_view list) {
  const std::vector<FaultKind> all = AllFaults();
  std::vector<bool> named(all.size(), false);
  for (const std::string& piece : SplitCommas(list)) {
    const std::optional<FaultKind> fault = ParseFault(piece);
    if (!fault) Throw("--faults: unknown fault '", piece, "' (valid: ", ValidFaultNames(), ")");
    named[static_cast<size_t>(*fault)] = true;
  }
  std::vector<FaultKind> faults;
  for (const FaultKind fault : all) {
    if (named[static_cast<size_t>(fault)]) faults.push_back(fault);
  }
  return faults;
}

void RequireOneOf(const char* flag, const std::string& value,
                  const std::vector<std::string>& allowed) {
  for (const std::string& candidate : allowed) {
    if (value == candidate) return;
  }
  Throw(flag, " must be one of ", Join(allowed, ", "), ", got '", value, "'");
}

void RequireAtLeast(const char* flag, int64_t value, int64_t least) {
  if (value < least) Throw(flag, " must be at least ", least, ", got ", value);
}

void RequireProbability(const char* what, double value) {
  // Written so that NaN fails too.
  if (!(value >= 0 && value <= 1)) Throw(what, " must be in [0, 1], got ", value);
}

void RequireRange(const char* what, int64_t min, int64_t max) {
  RequireAtLeast(what, min, 1);
  if (max < min) Throw(what, ": the range is empty (min ", min, " > max ", max, ")");
}

void ValidatePool(const SimOptions& o) {
  RequireAtLeast("--layers", o.num_layers, 1);
  if (o.bytes_per_token <= 0 || o.bytes_per_token % 16 != 0) {
    // Real-KV hashing reads 16-byte words, and the partial mode hashes exactly the first one.
    Throw("--bytes-per-token must be a positive multiple of 16, got ", o.bytes_per_token);
  }
  RequireAtLeast("--max-running", o.max_running_reqs, 1);
  RequireAtLeast("--context", o.max_context_len, 2);
  RequireAtLeast("--chunk", o.chunk_size, 1);
  RequireAtLeast("prefill token budget", o.prefill_token_budget, 1);
  if (o.vocab_size < 2 || o.vocab_size > std::numeric_limits<int32_t>::max()) {
    Throw("vocabulary size must be in [2, 2^31 - 1] (tokens are int32), got ", o.vocab_size);
  }
  // A request may grow to the whole context, and slot 0 is never handed out: with fewer slots
  // the scheduler could admit a request it can never finish.
  if (o.num_slots <= o.max_context_len) {
    Throw("--num-slots ", o.num_slots, " is too small for --context ", o.max_context_len,
          ": one full-context request needs ", o.max_context_len + 1, " slots (slot 0 is padding)");
  }
}

void ValidateWorkload(const SimOptions& o) {
  RequireAtLeast("number of system prompts", o.num_system_prompts, 0);
  if (o.num_system_prompts > 0) {
    RequireRange("system prompt length", o.system_prompt_len_min, o.system_prompt_len_max);
  }
  RequireRange("user turn length", o.user_turn_len_min, o.user_turn_len_max);
  RequireRange("max new tokens", o.max_new_tokens_min, o.max_new_tokens_max);
  RequireProbability("follow-up probability", o.follow_up_prob);
  // Bounded above (and so finite): the workload holds steps x arrivals initial requests, counted
  // in an int.
  if (!(o.arrivals_per_step > 0 && o.arrivals_per_step <= 16)) {
    Throw("arrivals per step must be in (0, 16], got ", o.arrivals_per_step);
  }
  // Follow-ups end their conversation when the next turn would not fit, but a first turn has
  // nowhere to go: the longest one must fit the context.
  const int64_t system = o.num_system_prompts > 0 ? o.system_prompt_len_max : 0;
  const int64_t longest = system + o.user_turn_len_max + o.max_new_tokens_max;
  // The workload also needs the context strictly longer (a finished turn feeds a token back).
  if (longest >= o.max_context_len) {
    Throw("--context ", o.max_context_len, " is too small for the workload: a first turn may need ",
          longest, " tokens (system prompt ", system, " + user turn ", o.user_turn_len_max,
          " + output ", o.max_new_tokens_max, ")");
  }
}

void ValidateTiers(const SimOptions& o) {
  RequireAtLeast("--swa-window", o.swa_window, 0);
  if (o.swa_window > 0) {
    if (o.swa_window >= o.max_context_len) {
      Throw("--swa-window ", o.swa_window, " must be smaller than --context ", o.max_context_len,
            " (a window as large as the context never slides)");
    }
    // While a chunk is written, the window before its first token and the whole chunk are
    // resident at once; slot 0 is padding.
    // Sums and products are checked: a library caller's options need not be within the flags'
    // bounds, and an overflow must be a usage error, not a wrapped size.
    const std::optional<int64_t> one_request = TryAdd(o.swa_window, o.chunk_size);
    if (!one_request || o.swa_num_slots <= *one_request) {
      Throw("--swa-slots ", o.swa_num_slots, " is too small: one request needs --swa-window ",
            o.swa_window, " + --chunk ", o.chunk_size, " slots plus the padding slot");
    }
    // Worst step: every running request holds its window, and a prefill batch adds its budget.
    std::optional<int64_t> worst = TryAdd(o.swa_window, 1);
    if (worst) worst = TryMul(o.max_running_reqs, *worst);
    if (worst) worst = TryAdd(*worst, o.prefill_token_budget);
    if (worst) worst = TryAdd(*worst, 1);
    if (!worst || o.swa_num_slots < *worst) {
      Throw("--swa-slots ", o.swa_num_slots, " is too small for --max-running ",
            o.max_running_reqs, " windows of ", o.swa_window, " plus a prefill budget of ",
            o.prefill_token_budget, ": need at least ",
            worst ? std::to_string(*worst) : std::string("more than 2^63 - 1"));
    }
    if (o.host_tier || o.pd) {
      Throw("--swa-window cannot be combined with --host-tier or --pd (the simulator's host tier "
            "and PD transfer carry the full pool only)");
    }
  }
  if (o.host_tier) RequireAtLeast("--host-slots", o.host_slots, 1);
  RequireAtLeast("--l3-slots", o.l3_slots, 0);
  if (o.l3_slots > 0 && !o.host_tier) Throw("--l3-slots ", o.l3_slots, " needs --host-tier");
}

void ValidatePaging(const SimOptions& o) {
  RequireAtLeast("--block-size", o.block_size, 0);
  if (o.block_size == 0) return;
  if (o.num_slots % o.block_size != 0) {
    Throw("--num-slots ", o.num_slots, " must be a multiple of --block-size ", o.block_size);
  }
  // Block 0 holds the padding slot; one full-context request needs ceil(context / block) blocks.
  const int64_t blocks = o.num_slots / o.block_size;
  const int64_t one_request = (o.max_context_len + o.block_size - 1) / o.block_size;
  if (blocks <= one_request) {
    Throw("--num-slots ", o.num_slots, " is too small for --context ", o.max_context_len,
          " in blocks of ", o.block_size, ": one full-context request needs ", one_request + 1,
          " blocks (block 0 holds the padding slot), got ", blocks);
  }
  if (o.swa_window > 0 || o.host_tier || o.pd) {
    Throw("--block-size cannot be combined with --swa-window, --host-tier or --pd (the "
          "simulator's SWA pool, host tier and PD transfer work per token)");
  }
}

void ValidateSpeculative(const SimOptions& o) {
  RequireAtLeast("--draft-forwards", o.draft_forwards, 0);  // the maximum: CheckFlagMaxima
  if (o.draft_forwards > 1 && (o.block_size > 0 || o.swa_window > 0 || o.pd)) {
    Throw("--draft-forwards cannot be combined with --block-size, --swa-window or --pd (the "
          "simulator's drafts are per-token slots of the full pool)");
  }
}

// An MLA pool is the canary's view of the K layers; a compressed pool stands beside a plain
// per-token pool that no other part of the simulator extends.
void ValidatePoolKinds(const SimOptions& o) {
  RequireOneOf("--pool-layout", o.pool_layout, {"mha", "mla"});
  if (o.compress_ratio < 0 || o.compress_ratio == 1) {
    Throw("--compress-ratio must be 0 (no compressed pool) or at least 2, got ", o.compress_ratio);
  }
  if (o.compress_ratio > 1 && (o.block_size > 0 || o.swa_window > 0 || o.host_tier || o.pd ||
                               o.draft_forwards > 1 || o.pool_layout != "mha")) {
    Throw(
        "--compress-ratio cannot be combined with --block-size, --swa-window, --host-tier, "
        "--pd, --draft-forwards or --pool-layout mla");
  }
  if (o.pool_layout == "mla" && o.pd) Throw("--pool-layout mla cannot be combined with --pd");
}

void ValidateCanary(const SimOptions& o) {
  RequireOneOf("--mode", o.mode, {"none", "log", "raise"});
  RequireOneOf("--real-data", o.real_data, {"none", "partial", "all"});
  RequireOneOf("--on-violation", o.on_violation, {"log", "quarantine"});
  if (o.on_violation == "quarantine" && o.mode != "log") {
    Throw("--on-violation quarantine requires --mode log, got --mode ", o.mode);
  }
  RequireOneOf("--fingerprint-layers", o.fingerprint_layers, {"layer0", "all"});
  RequireAtLeast("--sweep-interval", o.sweep_interval, 0);
  RequireAtLeast("--verify-sample", o.verify_sample, 1);  // the maximum: CheckFlagMaxima
  RequireAtLeast("--hold-back", o.hold_back, 0);
  RequireAtLeast("ring capacity", o.ring_capacity, 1);
  if (o.jitter && o.mode == "none") {
    Throw("--jitter requires --mode log or raise, got --mode none");
  }
  RequireAtLeast("--jitter-max-cycles", o.jitter_max_cycles, 1);  // the maximum: CheckFlagMaxima
}

void ValidateFaults(const SimOptions& o) {
  RequireAtLeast("--fault-rate", o.fault_rate, 0);
  if (o.faults == "all" || o.faults == "none") return;
  const std::vector<FaultKind> faults = ParseFaultList(o.faults);
  if (faults.empty()) Throw("--faults is empty (valid: ", ValidFaultNames(), ")");
  for (FaultKind fault : faults) {
    if (!FaultApplies(fault, o)) {
      Throw("--faults: ", FaultName(fault), " does not apply to this engine: it needs ",
            FaultRequirement(fault));
    }
  }
}

}  // namespace

bool FaultApplies(FaultKind fault, const SimOptions& options) {
  // The canary of a compressed engine sees the compressed pool alone.
  if (options.compress_ratio > 1) return fault == FaultKind::kCompressedSlotStale;
  switch (fault) {
    case FaultKind::kSwaLutStale:
      return options.swa_window > 0;
    case FaultKind::kOffloadDrop:
      return options.host_tier;
    case FaultKind::kL3Corrupt:
    case FaultKind::kL3Stale:
      return options.host_tier && options.l3_slots > 0;
    case FaultKind::kPdTransferDrop:
      return options.pd;
    case FaultKind::kRealKvUnusedCache:
      return options.sweep_interval > 0;
    case FaultKind::kRealKvDeepLayer:
      return options.num_layers > kMaxRealKvSources;
    case FaultKind::kEaglePositionPlusOne:
      return options.draft_forwards > 1;
    case FaultKind::kMlaLatentPage:
      return options.pool_layout == "mla" && options.block_size == 0;
    case FaultKind::kCompressedSlotStale:
      return false;  // compress_ratio > 1 returned above
    case FaultKind::kBlockTableSwap:
    case FaultKind::kFreedBlockReuse:
    case FaultKind::kRealKvPage:
    case FaultKind::kStaleOutCacheLoc:
      return options.block_size > 0;
    case FaultKind::kReqToToken:
    case FaultKind::kStrideView:
    case FaultKind::kWrongStrideRead:
    case FaultKind::kStaleSlotReuse:
      return options.block_size == 0;
    default:
      return true;
  }
}

std::vector<FaultKind> EnabledFaults(const SimOptions& options) {
  if (options.faults == "none") return {};
  if (options.faults != "all") return ParseFaultList(options.faults);
  std::vector<FaultKind> faults;
  for (FaultKind fault : AllFaults()) {
    if (FaultApplies(fault, options)) faults.push_back(fault);
  }
  return faults;
}

void ValidateOptions(const SimOptions& options) {
  RequireOneOf("--device", options.device, {"cpu", "cuda"});
  RequireOneOf("--progress", options.progress, {"auto", "on", "off"});
  RequireAtLeast("--steps", options.steps, 0);
  RequireAtLeast("--requests", options.num_requests, 0);
  if (options.steps == 0 && options.num_requests == 0) {
    Throw("--steps and --requests are both 0: the run would never end");
  }
  CheckFlagMaxima(options);
  ValidatePool(options);
  ValidateWorkload(options);
  ValidateTiers(options);
  ValidatePaging(options);
  ValidateSpeculative(options);
  ValidatePoolKinds(options);
  ValidateCanary(options);
  ValidateFaults(options);
  // Last: the only check that asks the machine rather than the options.
  if (options.device == "cuda" && !runtime::CudaDeviceAvailable()) {
    Throw("--device cuda: no CUDA device is available (or this build has no CUDA backend)");
  }
}

int64_t QuarantineHoldBack(const SimOptions& options) {
  return std::max(options.hold_back, options.verify_sample - 1);
}

}  // namespace kvcanary::sim
