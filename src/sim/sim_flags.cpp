// The flag table of `kvcanary sim` and its strict parsing.
#include "sim/sim_flags.h"

#include <charconv>
#include <sstream>
#include <system_error>

#include "kvcanary/plan.h"
#include "kvcanary/spin_wait.h"

namespace kvcanary::sim {
namespace {

// Upper bounds. They keep every size the simulator derives from a flag (pool bytes, the
// req_to_token table, the workload's request list, the injector's queue) far inside int64 and
// the int32 slot and token indices, and every loop over them bounded. A run near a bound may
// still fail to allocate; that is a run-time error, not a usage error.
constexpr int64_t kMaxSteps = 1'000'000;      // the workload holds steps * arrivals requests
constexpr int64_t kMaxRequests = 1'000'000;
constexpr int64_t kMaxFaultRate = 10'000;     // the injector queues rate * classes entries
constexpr int64_t kMaxSlots = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 256;
constexpr int64_t kMaxBytesPerToken = int64_t{1} << 16;
constexpr int64_t kMaxRunning = 4096;
constexpr int64_t kMaxTokens = int64_t{1} << 20;  // context, chunk, window, sweep interval
constexpr int64_t kMaxBlockSize = 4096;
constexpr int64_t kMaxDraftForwards = 8;  // EAGLE runs a handful of draft steps
constexpr int64_t kMaxHoldBack = 64;  // a token held that many forwards is as good as never sent

SimFlag Integer(const char* name, int64_t SimOptions::*field, int64_t min, int64_t max,
                const char* help) {
  SimFlag flag{name, FlagKind::kInteger};
  flag.integer = field;
  flag.min = min;
  flag.max = max;
  flag.help = help;
  return flag;
}

SimFlag Text(const char* name, FlagKind kind, std::string SimOptions::*field, const char* values,
             const char* help) {
  SimFlag flag{name, kind};
  flag.text = field;
  flag.values = values;
  flag.help = help;
  return flag;
}

SimFlag Switch(const char* name, bool SimOptions::*field, const char* help) {
  SimFlag flag{name, FlagKind::kSwitch};
  flag.toggle = field;
  flag.help = help;
  return flag;
}

SimFlag Seed(const char* name, uint64_t SimOptions::*field, const char* help) {
  SimFlag flag{name, FlagKind::kSeed};
  flag.seed = field;
  flag.help = help;
  return flag;
}

std::vector<SimFlag> BuildTable() {
  using O = SimOptions;
  constexpr FlagKind kChoice = FlagKind::kChoice;
  return {
      Text("device", kChoice, &O::device, "cpu|cuda", "Where the pool and canary live"),
      Seed("seed", &O::seed, "Seeds the workload and the faults"),
      Integer("steps", &O::steps, 0, kMaxSteps, "Outer steps to run (0: no limit)"),
      Integer("requests", &O::num_requests, 0, kMaxRequests,
              "Stop once this many requests finished (0: no limit)"),
      Text("faults", kChoice, &O::faults, "all|none|LIST",
           "Faults to inject: all (those that apply), none, or a comma-separated list"),
      Integer("fault-rate", &O::fault_rate, 0, kMaxFaultRate,
              "Injections per enabled fault class"),
      Text("mode", kChoice, &O::mode, "none|log|raise", "Canary mode"),
      Text("real-data", kChoice, &O::real_data, "none|partial|all", "Real-KV hashing"),
      Text("on-violation", kChoice, &O::on_violation, "log|quarantine",
           "What a violation does: log, or quarantine (hold tokens back, recompute the requests "
           "it touched)"),
      Integer("hold-back", &O::hold_back, 0, kMaxHoldBack,
              "Quarantine: later forwards of its request a token waits for before delivery "
              "(raised to K - 1 with --verify-sample K)"),
      Text("fingerprint-layers", kChoice, &O::fingerprint_layers, "layer0|all",
           "Layers a real-KV fingerprint folds: layer 0, or all"),
      Integer("sweep-interval", &O::sweep_interval, 0, kMaxTokens,
              "Steps between sweeps of cached slots (0: off)"),
      Integer("verify-sample", &O::verify_sample, 1, kMaxVerifySample,
              "HEAD/TAIL verify a rotating 1/K of every prefix plus its newest record (1: all)"),
      Switch("jitter", &O::jitter,
             "Timing-jitter fuzzer: spin-waits at four points of every forward (CUDA; a no-op "
             "on the CPU)"),
      Integer("jitter-max-cycles", &O::jitter_max_cycles, 1, kMaxSpinWaitCycles,
              "Longest jitter spin in device clock ticks"),
      Integer("swa-window", &O::swa_window, 0, kMaxTokens,
              "Sliding-window layers with this window (0: none)"),
      Integer("swa-slots", &O::swa_num_slots, 1, kMaxSlots, "Slots of the SWA pool"),
      Switch("host-tier", &O::host_tier, "Back evicted prefixes up to a host tier and restore them"),
      Integer("host-slots", &O::host_slots, 1, kMaxSlots, "Slots of the host tier"),
      Integer("l3-slots", &O::l3_slots, 0, kMaxSlots,
              "Slots of an L3 page store below the host tier (0: none)"),
      Switch("pd", &O::pd, "Prefill/decode disaggregation with KV transfer"),
      Integer("num-slots", &O::num_slots, 2, kMaxSlots, "Slots of the KV pool"),
      Integer("layers", &O::num_layers, 1, kMaxLayers, "Layers of the KV pool"),
      Integer("bytes-per-token", &O::bytes_per_token, 16, kMaxBytesPerToken,
              "KV bytes per token per layer, a multiple of 16"),
      Integer("max-running", &O::max_running_reqs, 1, kMaxRunning, "Requests running at once"),
      Integer("context", &O::max_context_len, 2, kMaxTokens, "Most tokens of one request"),
      Integer("chunk", &O::chunk_size, 1, kMaxTokens, "Chunked-prefill chunk size"),
      Integer("block-size", &O::block_size, 0, kMaxBlockSize,
              "Tokens per KV block of a paged block table (0: per-token req_to_token)"),
      Integer("draft-forwards", &O::draft_forwards, 0, kMaxDraftForwards,
              "Inner forwards of a decode step: the accepted token's, then one draft token each "
              "(0, 1: no drafts)"),
      Text("pool-layout", kChoice, &O::pool_layout, "mha|mla",
           "The pool as the canary sees it: K and V, or MLA (the K layers as the latent buffer)"),
      Integer("compress-ratio", &O::compress_ratio, 0, kMaxBlockSize,
              "A compressed pool beside the full pool, one slot per this many full slots, as the "
              "canary's full group (0: none)"),
      Text("json", FlagKind::kPath, &O::json_path, "PATH", "Also write the report as JSON to PATH"),
      Text("progress", kChoice, &O::progress, "auto|on|off",
           "Progress bar on stderr (auto: on a terminal)"),
  };
}

[[noreturn]] void Reject(const SimFlag& flag, std::string_view expected, std::string_view text) {
  std::ostringstream message;
  message << "--" << flag.name << " must be " << expected << ", got '" << text << "'";
  throw UsageError(message.str());
}

// The whole of `text` as a decimal T; false for anything else, a value out of T's range included.
template <typename T>
bool ParseDecimal(std::string_view text, T& value) {
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && stop == end;
}

}  // namespace

const std::vector<SimFlag>& SimFlagTable() {
  static const std::vector<SimFlag> table = BuildTable();
  return table;
}

std::string FlagRange(const SimFlag& flag) {
  switch (flag.kind) {
    case FlagKind::kInteger: {
      // Appended, not `"[" + ...`: GCC 12 at -O3 reports a false -Wrestrict on that chain.
      std::string range = "[";
      range.append(std::to_string(flag.min)).append(", ").append(std::to_string(flag.max));
      return range.append("]");
    }
    case FlagKind::kSeed:
      return "[0, 2^64 - 1]";
    case FlagKind::kSwitch:
      return "on|off";
    case FlagKind::kChoice:
    case FlagKind::kPath:
      return flag.values;
  }
  return "";
}

void SetFlag(const SimFlag& flag, std::string_view text, SimOptions& options) {
  switch (flag.kind) {
    case FlagKind::kInteger: {
      int64_t value = 0;
      if (!ParseDecimal(text, value) || value < flag.min || value > flag.max) {
        Reject(flag, "an integer in " + FlagRange(flag), text);
      }
      options.*flag.integer = value;
      return;
    }
    case FlagKind::kSeed: {
      uint64_t value = 0;
      if (!ParseDecimal(text, value)) Reject(flag, "an integer in " + FlagRange(flag), text);
      options.*flag.seed = value;
      return;
    }
    case FlagKind::kChoice:
    case FlagKind::kPath:
      if (text.empty()) Reject(flag, std::string("a non-empty ") + flag.values, text);
      options.*flag.text = std::string(text);
      return;
    case FlagKind::kSwitch:
      if (text != "true" && text != "false") Reject(flag, "true or false", text);
      options.*flag.toggle = text == "true";
      return;
  }
}

void CopyFlag(const SimFlag& flag, const SimOptions& from, SimOptions& to) {
  if (flag.integer != nullptr) to.*flag.integer = from.*flag.integer;
  if (flag.seed != nullptr) to.*flag.seed = from.*flag.seed;
  if (flag.text != nullptr) to.*flag.text = from.*flag.text;
  if (flag.toggle != nullptr) to.*flag.toggle = from.*flag.toggle;
}

std::string FlagValue(const SimFlag& flag, const SimOptions& options) {
  if (flag.integer != nullptr) return std::to_string(options.*flag.integer);
  if (flag.seed != nullptr) return std::to_string(options.*flag.seed);
  if (flag.text != nullptr) return options.*flag.text;
  return options.*flag.toggle ? "true" : "false";
}

void CheckFlagMaxima(const SimOptions& options) {
  for (const SimFlag& flag : SimFlagTable()) {
    if (flag.kind != FlagKind::kInteger || options.*flag.integer <= flag.max) continue;
    throw UsageError("--" + std::string(flag.name) + " must be at most " +
                     std::to_string(flag.max) + ", got " +
                     std::to_string(options.*flag.integer));
  }
}

}  // namespace kvcanary::sim
