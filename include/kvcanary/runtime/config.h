// The runtime's configuration: the behaviour switches of one runtime
// (`Config`) and the fault-injection knobs used only by tests (`PerturbConfig`), with their
// environment-variable parsing and validation. Nothing below the runtime reads the environment.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "kvcanary/format.h"

namespace kvcanary::runtime {

// What the runtime does at all, and what it does on a violation.
enum class Mode {
  kNone,   // nothing installed; zero overhead
  kLog,    // each violation is one WARNING; the engine keeps serving
  kRaise,  // the first batch of violations raises (the engine is expected to stop)
};

// What a reported violation does to the engine (Config::on_violation). Mode raise raises
// whatever this says; quarantine needs mode log.
enum class OnViolation {
  kLog,         // log the rows (and call the listener); the engine keeps serving every request
  kRaise,       // as mode raise: the first batch of violations raises
  kQuarantine,  // log the rows and keep the requests they touch for TakeAffectedRequests
};

// "none", "log", "raise".
const char* ModeName(Mode mode);
// "log", "raise", "quarantine".
const char* OnViolationName(OnViolation value);
// "none", "partial", "all".
const char* RealDataName(RealKvHashMode mode);

// Which listed layers a real-KV fingerprint folds (a kvcanary addition; docs/fingerprints.md).
enum class FingerprintLayers {
  // Layer 0: k_layer0 / v_layer0, or k_layers[0] of a list longer than kMaxRealKvSources; a list
  // of at most kMaxRealKvSources layers keeps folding every listed layer, as before this option.
  kLayer0,
  kAll,  // every listed layer (at most kMaxRealKvLayers): a byte of any of them is caught
};
// "layer0", "all".
const char* FingerprintLayersName(FingerprintLayers layers);

// Where a fused step's HEAD and TAIL verifies get their entries (a kvcanary addition;
// Config::verify_entries, docs/integration.md).
enum class VerifyEntries {
  // Stored where storing measured faster than deriving: on the CPU backend with sampled verify or
  // a block table (StoredEntriesPay, kvcanary/fused_verify.h); derived everywhere else.
  kAuto,
  kDerive,  // each verify derives every entry in the kernel; the plans hold no entry arrays
  // HEAD stores the step's entries after its plan, when they fit the verify capacity, and both
  // verifies read them (a step past the capacity derives them): the plans hold entry arrays.
  kStore,
};
// "auto", "derive", "store".
const char* VerifyEntriesName(VerifyEntries value);

// A buffer group: FULL covers positions [0, K), SWA the last W positions.
enum class GroupKind : int { kFull = 0, kSwa = 1 };

// "FULL", "SWA".
const char* GroupKindName(GroupKind kind);

// Looks a variable up by name; nullopt when it is not set. Tests pass a map-backed lookup.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (std::getenv).
EnvLookup ProcessEnv();

// Parse helpers. Values are trimmed (ASCII whitespace) and compared case-insensitively.
// ParseMode/ParseRealData throw "kv-canary: mode (real_data) must be one of ..., got '<value>'",
// quoting `value` as given.
Mode ParseMode(std::string_view value);
RealKvHashMode ParseRealData(std::string_view value);
// "kv-canary: on_violation must be one of log/raise/quarantine, got '<value>'".
OnViolation ParseOnViolation(std::string_view value);
// "kv-canary: fingerprint_layers must be one of layer0/all, got '<value>'".
FingerprintLayers ParseFingerprintLayers(std::string_view value);
// "kv-canary: verify_entries must be one of auto/derive/store, got '<value>'".
VerifyEntries ParseVerifyEntries(std::string_view value);
// `raw` is "full" or "swa"; else throws the target-group message quoting `raw`.
GroupKind ParseGroupKind(std::string_view raw);
// For a variable named `var`: nullopt when the trimmed value is empty (unset), else the value, or
// Error "kv-canary: <var> must be a boolean / an integer / a number, got '<value>'".
// Booleans: 1/0/true/false/yes/no/on/off.
std::optional<bool> ParseBool(std::string_view var, std::string_view value);
std::optional<int64_t> ParseInt(std::string_view var, std::string_view value);
std::optional<double> ParseNumber(std::string_view var, std::string_view value);

// The upper bounds of the integer settings (docs/limits.md). The ring holds 64 bytes a row, so
// its bound keeps it at 1 GiB; a step interval or count past 2^31 - 1 steps is never reached.
inline constexpr int64_t kMaxRingCapacity = int64_t{1} << 24;
inline constexpr int64_t kMaxStepInterval = 2147483647;

// Immutable after construction: the runtime copies it at install.
struct Config {
  // Fields in the order of SGLang's config (keep it: adapters use designated initializers).
  Mode mode = Mode::kNone;                           // KVCANARY_MODE
  RealKvHashMode real_data = RealKvHashMode::kNone;  // KVCANARY_REAL_DATA
  // KVCANARY_SWEEP_INTERVAL; 0 = off; in [0, kMaxStepInterval]
  int64_t sweep_interval = 0;
  int64_t ring_capacity = 1024;  // KVCANARY_RING_CAPACITY; in [1, kMaxRingCapacity]
  // KVCANARY_STATS_PRINT_EVERY_N_STEPS; 0 = off; in [0, kMaxStepInterval]
  int64_t stats_print_every_n_steps = 100;
  bool enable_write_input_assert = false;            // KVCANARY_ENABLE_WRITE_INPUT_ASSERT
  bool enable_verify_token_assert = false;           // KVCANARY_ENABLE_VERIFY_TOKEN_ASSERT
  bool enable_token_oracle = false;                  // KVCANARY_ENABLE_TOKEN_ORACLE
  bool enable_mha_v = false;                         // KVCANARY_ENABLE_MHA_V; gates V launches
  // KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL; 0 = off; in [0, kMaxStepInterval]. Every N outer
  // steps, EndStep compares the SWA group's table and records with the FULL group's over the
  // step's live rows and logs one INFO line (docs/integration.md, "SWA divergence report").
  int64_t swa_divergence_stats_interval = 0;
  bool verify_backup = false;                        // KVCANARY_VERIFY_BACKUP
  bool report_untouched_rows = false;                // KVCANARY_REPORT_UNTOUCHED_ROWS
  bool allreduce_violation_signal = false;           // KVCANARY_ALLREDUCE_VIOLATION_SIGNAL
  // KVCANARY_INCIDENT_FILE (kvcanary): when set, the reporter appends one JSON line per shown
  // violation (FormatIncidentJson, metrics.h) to this path. Empty = off. Install refuses a path
  // it cannot open for append; later write failures are logged (src/runtime/incident_file.h).
  std::string incident_file;
  // KVCANARY_FUSED_VERIFY (kvcanary): HEAD and TAIL verify derive their entries in the kernel
  // (FusedVerify after an offsets-only plan), so the per-step workspace holds no per-entry plan
  // arrays and never overflows. false: SGLang's plan arrays, split into chunks on overflow.
  bool fused_verify = true;
  // KVCANARY_VERIFY_ENTRIES (kvcanary; with fused_verify): auto, derive or store (VerifyEntries).
  VerifyEntries verify_entries = VerifyEntries::kAuto;
  // KVCANARY_FINGERPRINT_LAYERS (kvcanary): the layers of GroupSpec::k_layers / v_layers a slot's
  // real-KV fingerprint folds (FingerprintLayers). Has no effect with real_data none.
  FingerprintLayers fingerprint_layers = FingerprintLayers::kLayer0;
  // KVCANARY_VERIFY_SAMPLE (kvcanary): HEAD and TAIL verify a rotating 1/K of every request's
  // prefix plus its newest record, so each record is re-verified at least once every K forwards
  // (docs/sampled_verify.md); the sweep still checks everything. 1 = every record, every
  // forward. In [1, kMaxVerifySample = 65536].
  int64_t verify_sample = 1;
  // KVCANARY_ON_VIOLATION (kvcanary): log, raise or quarantine (docs/quarantine.md). Quarantine
  // requires mode log; raise behaves as mode raise.
  OnViolation on_violation = OnViolation::kLog;
  // The timing-jitter fuzzer (testing: it shakes stream timing to expose races between the
  // engine's KV writes and the canary's launches; docs/integration.md, "Timing-jitter fuzzer").
  // Four fixed points of every forward spin for a tick count drawn on the host before each step.
  bool jitter_enabled = false;             // KVCANARY_JITTER_ENABLED; needs mode log or raise
  double jitter_per_slot_fire_prob = 0.5;  // KVCANARY_JITTER_PER_SLOT_FIRE_PROB; in [0, 1]
  // KVCANARY_JITTER_MAX_CYCLES: a firing point spins log-uniform in [1, this] device clock ticks;
  // in [1, kMaxSpinWaitCycles] (kvcanary/spin_wait.h).
  int64_t jitter_max_cycles = 100000;
  uint64_t jitter_seed = 0;                // KVCANARY_JITTER_SEED; any 64-bit pattern

  // Whether a reported violation throws ViolationError: mode raise or on_violation raise.
  bool RaisesOnViolation() const {
    return mode == Mode::kRaise || on_violation == OnViolation::kRaise;
  }

  // Throws the first error: an integer field outside its range ("kv-canary: <field> must be in
  // [lo, hi], got v"), then jitter_per_slot_fire_prob outside [0, 1], then sweep_interval > 0
  // with mode none, then jitter_enabled with mode none, then on_violation quarantine with a mode
  // other than log.
  void Validate() const;
  // "Config(mode=log, real_data=none, ...)": every field, for the install INFO line.
  std::string ToString() const;
  // Reads every variable above (unset or empty keeps the default), then Validate()s.
  static Config FromEnv(const EnvLookup& env = ProcessEnv());
};

// Fault injection, testing only. Probabilities are per step and in [0, 1].
struct PerturbConfig {
  double req_to_token_prob = 0;          // KVCANARY_PERTURB_REQ_TO_TOKEN_PROB
  double real_kv_used_prob = 0;          // KVCANARY_PERTURB_REAL_KV_USED_PROB
  double real_kv_unused_cache_prob = 0;  // KVCANARY_PERTURB_REAL_KV_UNUSED_CACHE_PROB
  double real_kv_post_forward_prob = 0;  // KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB
  double next_token_swap_prob = 0;       // KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB
  // SGLang's older real-KV flip: a random folded byte of a random fingerprinted layer at an
  // orphan slot (cached in the attached radix view, unlocked, outside the step's batch) or, when
  // there is none and require_orphan is off, at a live slot of the batch.
  double real_perturb_bytes_prob = 0;    // KVCANARY_REAL_PERTURB_BYTES_PROB
  bool real_perturb_bytes_require_orphan = false;  // KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN
  // KVCANARY_PERTURB_TARGET_GROUP; unset is allowed until a real-KV perturbation fires.
  std::optional<GroupKind> target_group;
  int64_t warmup_steps = 50;             // KVCANARY_PERTURB_WARMUP_STEPS; [0, kMaxStepInterval]
  uint64_t seed = 0;                     // KVCANARY_PERTURB_SEED (kvcanary's R8)

  // Whether any probability is positive.
  bool AnyEnabled() const;
  // Throws "kv-canary: <VAR> must be in [0, 1], got <v>" for the first probability outside.
  void Validate() const;
  // The target group, or the target-group error naming `perturbation` (e.g. "real_kv_used") when
  // unset.
  // Called when a real-KV perturbation fires.
  GroupKind RequireTargetGroup(std::string_view perturbation) const;
  std::string ToString() const;
  // Reads every variable above (unset or empty keeps the default), then Validate()s.
  static PerturbConfig FromEnv(const EnvLookup& env = ProcessEnv());
};

}  // namespace kvcanary::runtime
