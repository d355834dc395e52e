#include "kvcanary/runtime/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/plan.h"
#include "kvcanary/spin_wait.h"

namespace kvcanary::runtime {
namespace {

std::string_view Trim(std::string_view value) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!value.empty() && is_space(value.front())) value.remove_prefix(1);
  while (!value.empty() && is_space(value.back())) value.remove_suffix(1);
  return value;
}

std::string Lower(std::string_view value) {
  std::string out(value);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The normalized form every enum and bool parser compares against.
std::string Normalize(std::string_view value) { return Lower(Trim(value)); }

// The names of an enum's values in value order (0, 1, 2, ...): one table serves both the name
// of a value and the parse of a name.
constexpr const char* kModeNames[] = {"none", "log", "raise"};
constexpr const char* kOnViolationNames[] = {"log", "raise", "quarantine"};
constexpr const char* kRealDataNames[] = {"none", "partial", "all"};
constexpr const char* kGroupKindNames[] = {"FULL", "SWA"};
constexpr const char* kFingerprintLayersNames[] = {"layer0", "all"};
constexpr const char* kVerifyEntriesNames[] = {"auto", "derive", "store"};

template <typename Enum, size_t N>
const char* NameOf(const char* const (&names)[N], Enum value, const char* unknown = "unknown") {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : unknown;
}

// The value whose name equals `value` ignoring case and surrounding spaces.
template <typename Enum, size_t N>
std::optional<Enum> FindName(const char* const (&names)[N], std::string_view value) {
  const std::string normalized = Normalize(value);
  for (size_t i = 0; i < N; ++i) {
    if (normalized == Lower(names[i])) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

const char* BoolName(bool value) { return value ? "true" : "false"; }

// Applies `parse` to the variable when it is set; `apply` receives the parsed value.
template <typename Parse, typename Apply>
void ReadVar(const EnvLookup& env, const char* var, Parse parse, Apply apply) {
  const std::optional<std::string> raw = env(var);
  if (!raw.has_value()) return;
  const auto parsed = parse(var, *raw);
  if (parsed.has_value()) apply(*parsed);
}

// Enum variables treat an empty value as unset, like the scalar ones.
template <typename ParseEnum>
auto EnumParser(ParseEnum parse_enum) {
  return [parse_enum](std::string_view, std::string_view raw) {
    using Result = decltype(parse_enum(raw));
    return Trim(raw).empty() ? std::optional<Result>() : std::optional<Result>(parse_enum(raw));
  };
}

// Every integer setting of Config: its variable, its field name and its range (docs/limits.md).
// FromEnv checks a parsed value under the variable's name, Validate under the field's.
struct IntSetting {
  const char* var;
  const char* field;
  int64_t Config::*member;
  int64_t lo;
  int64_t hi;
};

constexpr IntSetting kIntSettings[] = {
    {"KVCANARY_SWEEP_INTERVAL", "sweep_interval", &Config::sweep_interval, 0, kMaxStepInterval},
    {"KVCANARY_RING_CAPACITY", "ring_capacity", &Config::ring_capacity, 1, kMaxRingCapacity},
    {"KVCANARY_STATS_PRINT_EVERY_N_STEPS", "stats_print_every_n_steps",
     &Config::stats_print_every_n_steps, 0, kMaxStepInterval},
    {"KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL", "swa_divergence_stats_interval",
     &Config::swa_divergence_stats_interval, 0, kMaxStepInterval},
    {"KVCANARY_VERIFY_SAMPLE", "verify_sample", &Config::verify_sample, 1, kMaxVerifySample},
    {"KVCANARY_JITTER_MAX_CYCLES", "jitter_max_cycles", &Config::jitter_max_cycles, 1,
     kMaxSpinWaitCycles},
};

// Every boolean setting of Config and its variable.
constexpr std::pair<const char*, bool Config::*> kBoolSettings[] = {
    {"KVCANARY_ENABLE_WRITE_INPUT_ASSERT", &Config::enable_write_input_assert},
    {"KVCANARY_ENABLE_VERIFY_TOKEN_ASSERT", &Config::enable_verify_token_assert},
    {"KVCANARY_ENABLE_TOKEN_ORACLE", &Config::enable_token_oracle},
    {"KVCANARY_ENABLE_MHA_V", &Config::enable_mha_v},
    {"KVCANARY_VERIFY_BACKUP", &Config::verify_backup},
    {"KVCANARY_REPORT_UNTOUCHED_ROWS", &Config::report_untouched_rows},
    {"KVCANARY_ALLREDUCE_VIOLATION_SIGNAL", &Config::allreduce_violation_signal},
    {"KVCANARY_FUSED_VERIFY", &Config::fused_verify},
    {"KVCANARY_JITTER_ENABLED", &Config::jitter_enabled},
};

// A seed is any 64-bit pattern: a negative integer or one above INT64_MAX are both accepted.
std::optional<uint64_t> ParseSeed(std::string_view var, std::string_view value) {
  const std::string_view trimmed = Trim(value);
  uint64_t unsigned_value = 0;
  const auto [end, ec] =
      std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), unsigned_value);
  if (!trimmed.empty() && ec == std::errc() && end == trimmed.data() + trimmed.size()) {
    return unsigned_value;
  }
  const std::optional<int64_t> signed_value = ParseInt(var, value);
  if (!signed_value.has_value()) return std::nullopt;
  return static_cast<uint64_t>(*signed_value);
}

}  // namespace

const char* ModeName(Mode mode) { return NameOf(kModeNames, mode); }
const char* RealDataName(RealKvHashMode mode) { return NameOf(kRealDataNames, mode); }
const char* OnViolationName(OnViolation value) { return NameOf(kOnViolationNames, value); }
const char* GroupKindName(GroupKind kind) { return NameOf(kGroupKindNames, kind, "UNKNOWN"); }
const char* FingerprintLayersName(FingerprintLayers layers) {
  return NameOf(kFingerprintLayersNames, layers);
}
const char* VerifyEntriesName(VerifyEntries value) { return NameOf(kVerifyEntriesNames, value); }

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Mode ParseMode(std::string_view value) {
  if (const auto mode = FindName<Mode>(kModeNames, value)) return *mode;
  ThrowError("kv-canary: mode must be one of none/log/raise, got '", value, "'");
}

RealKvHashMode ParseRealData(std::string_view value) {
  if (const auto mode = FindName<RealKvHashMode>(kRealDataNames, value)) return *mode;
  ThrowError("kv-canary: real_data must be one of none/partial/all, got '", value, "'");
}

OnViolation ParseOnViolation(std::string_view value) {
  if (const auto parsed = FindName<OnViolation>(kOnViolationNames, value)) return *parsed;
  ThrowError("kv-canary: on_violation must be one of log/raise/quarantine, got '", value, "'");
}

FingerprintLayers ParseFingerprintLayers(std::string_view value) {
  if (const auto layers = FindName<FingerprintLayers>(kFingerprintLayersNames, value)) {
    return *layers;
  }
  ThrowError("kv-canary: fingerprint_layers must be one of layer0/all, got '", value, "'");
}

VerifyEntries ParseVerifyEntries(std::string_view value) {
  if (const auto parsed = FindName<VerifyEntries>(kVerifyEntriesNames, value)) return *parsed;
  ThrowError("kv-canary: verify_entries must be one of auto/derive/store, got '", value, "'");
}

GroupKind ParseGroupKind(std::string_view raw) {
  if (const auto kind = FindName<GroupKind>(kGroupKindNames, raw)) return *kind;
  ThrowError("kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be one of 'full' / 'swa', got '", raw,
             "'");
}

std::optional<bool> ParseBool(std::string_view var, std::string_view value) {
  const std::string normalized = Normalize(value);
  if (normalized.empty()) return std::nullopt;
  if (normalized == "1" || normalized == "true" || normalized == "yes" || normalized == "on") {
    return true;
  }
  if (normalized == "0" || normalized == "false" || normalized == "no" || normalized == "off") {
    return false;
  }
  ThrowError("kv-canary: ", var, " must be a boolean, got '", value, "'");
}

std::optional<int64_t> ParseInt(std::string_view var, std::string_view value) {
  std::string_view trimmed = Trim(value);
  if (trimmed.empty()) return std::nullopt;
  // from_chars rejects a leading '+', which users write for positive numbers.
  if (trimmed.front() == '+' && trimmed.size() > 1 && trimmed[1] != '-') trimmed.remove_prefix(1);
  int64_t parsed = 0;
  const auto [end, ec] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), parsed);
  if (ec != std::errc() || end != trimmed.data() + trimmed.size()) {
    ThrowError("kv-canary: ", var, " must be an integer, got '", value, "'");
  }
  return parsed;
}

std::optional<double> ParseNumber(std::string_view var, std::string_view value) {
  const std::string trimmed(Trim(value));
  if (trimmed.empty()) return std::nullopt;
  // strtod (not from_chars) for portability of floating-point parsing across standard libraries.
  char* end = nullptr;
  const double parsed = std::strtod(trimmed.c_str(), &end);
  if (end != trimmed.c_str() + trimmed.size() || std::isnan(parsed)) {
    ThrowError("kv-canary: ", var, " must be a number, got '", value, "'");
  }
  return parsed;
}

void Config::Validate() const {
  for (const IntSetting& setting : kIntSettings) {
    CheckInRange(setting.field, this->*setting.member, setting.lo, setting.hi);
  }
  CheckInRange("jitter_per_slot_fire_prob", jitter_per_slot_fire_prob, 0.0, 1.0);
  if (sweep_interval > 0 && mode == Mode::kNone) {
    ThrowError("kv-canary: sweep_interval > 0 requires mode in {log, raise}");
  }
  // Mode none installs nothing, so there would be no forward to shake. Like the other checks
  // between fields, the message names the Config fields, whether they came from Config or from
  // the environment (FromEnv validates what it read here).
  if (jitter_enabled && mode == Mode::kNone) {
    ThrowError("kv-canary: jitter_enabled requires mode in {log, raise}, got mode ",
               ModeName(mode));
  }
  if (on_violation == OnViolation::kQuarantine && mode != Mode::kLog) {
    ThrowError("kv-canary: on_violation quarantine requires mode log, got mode ", ModeName(mode));
  }
}

std::string Config::ToString() const {
  std::ostringstream out;
  out << "Config(mode=" << ModeName(mode) << ", real_data=" << RealDataName(real_data)
      << ", sweep_interval=" << sweep_interval << ", ring_capacity=" << ring_capacity
      << ", stats_print_every_n_steps=" << stats_print_every_n_steps
      << ", enable_write_input_assert=" << BoolName(enable_write_input_assert)
      << ", enable_verify_token_assert=" << BoolName(enable_verify_token_assert)
      << ", enable_token_oracle=" << BoolName(enable_token_oracle)
      << ", enable_mha_v=" << BoolName(enable_mha_v)
      << ", swa_divergence_stats_interval=" << swa_divergence_stats_interval
      << ", verify_backup=" << BoolName(verify_backup)
      << ", report_untouched_rows=" << BoolName(report_untouched_rows)
      << ", allreduce_violation_signal=" << BoolName(allreduce_violation_signal)
      << ", incident_file='" << incident_file << "'"
      << ", fused_verify=" << BoolName(fused_verify)
      << ", verify_entries=" << VerifyEntriesName(verify_entries)
      << ", fingerprint_layers=" << FingerprintLayersName(fingerprint_layers)
      << ", verify_sample=" << verify_sample << ", on_violation=" << OnViolationName(on_violation)
      << ", jitter_enabled=" << BoolName(jitter_enabled)
      << ", jitter_per_slot_fire_prob=" << jitter_per_slot_fire_prob
      << ", jitter_max_cycles=" << jitter_max_cycles << ", jitter_seed=" << jitter_seed << ")";
  return out.str();
}

Config Config::FromEnv(const EnvLookup& env) {
  Config config;
  ReadVar(env, "KVCANARY_MODE", EnumParser(ParseMode), [&](Mode v) { config.mode = v; });
  ReadVar(env, "KVCANARY_REAL_DATA", EnumParser(ParseRealData),
          [&](RealKvHashMode v) { config.real_data = v; });
  ReadVar(env, "KVCANARY_ON_VIOLATION", EnumParser(ParseOnViolation),
          [&](OnViolation v) { config.on_violation = v; });
  ReadVar(env, "KVCANARY_FINGERPRINT_LAYERS", EnumParser(ParseFingerprintLayers),
          [&](FingerprintLayers v) { config.fingerprint_layers = v; });
  ReadVar(env, "KVCANARY_VERIFY_ENTRIES", EnumParser(ParseVerifyEntries),
          [&](VerifyEntries v) { config.verify_entries = v; });
  for (const IntSetting& setting : kIntSettings) {
    ReadVar(env, setting.var, ParseInt, [&](int64_t v) {
      CheckInRange(setting.var, v, setting.lo, setting.hi);
      config.*setting.member = v;
    });
  }
  for (const auto& [var, member] : kBoolSettings) {
    // Captured by name: clang before 16 cannot capture a structured binding.
    ReadVar(env, var, ParseBool, [&config, field = member](bool v) { config.*field = v; });
  }
  // A path is taken as given, trimmed; an empty value is unset like every other variable.
  if (const std::optional<std::string> path = env("KVCANARY_INCIDENT_FILE")) {
    config.incident_file = std::string(Trim(*path));
  }
  ReadVar(env, "KVCANARY_JITTER_PER_SLOT_FIRE_PROB", ParseNumber, [&](double v) {
    CheckInRange("KVCANARY_JITTER_PER_SLOT_FIRE_PROB", v, 0.0, 1.0);
    config.jitter_per_slot_fire_prob = v;
  });
  ReadVar(env, "KVCANARY_JITTER_SEED", ParseSeed, [&](uint64_t v) { config.jitter_seed = v; });
  config.Validate();
  return config;
}

bool PerturbConfig::AnyEnabled() const {
  return req_to_token_prob > 0 || real_kv_used_prob > 0 || real_kv_unused_cache_prob > 0 ||
         real_kv_post_forward_prob > 0 || next_token_swap_prob > 0 || real_perturb_bytes_prob > 0;
}

void PerturbConfig::Validate() const {
  const std::pair<const char*, double> probabilities[] = {
      {"KVCANARY_PERTURB_REQ_TO_TOKEN_PROB", req_to_token_prob},
      {"KVCANARY_PERTURB_REAL_KV_USED_PROB", real_kv_used_prob},
      {"KVCANARY_PERTURB_REAL_KV_UNUSED_CACHE_PROB", real_kv_unused_cache_prob},
      {"KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB", real_kv_post_forward_prob},
      {"KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB", next_token_swap_prob},
      {"KVCANARY_REAL_PERTURB_BYTES_PROB", real_perturb_bytes_prob},
  };
  for (const auto& [var, probability] : probabilities) CheckInRange(var, probability, 0.0, 1.0);
  CheckInRange("KVCANARY_PERTURB_WARMUP_STEPS", warmup_steps, int64_t{0}, kMaxStepInterval);
}

GroupKind PerturbConfig::RequireTargetGroup(std::string_view perturbation) const {
  if (!target_group.has_value()) {
    ThrowError(
        "kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be explicitly set to 'full' or "
        "'swa' when ",
        perturbation, " perturbation is enabled");
  }
  return *target_group;
}

std::string PerturbConfig::ToString() const {
  std::ostringstream out;
  out << "PerturbConfig(req_to_token_prob=" << req_to_token_prob
      << ", real_kv_used_prob=" << real_kv_used_prob
      << ", real_kv_unused_cache_prob=" << real_kv_unused_cache_prob
      << ", real_kv_post_forward_prob=" << real_kv_post_forward_prob
      << ", next_token_swap_prob=" << next_token_swap_prob
      << ", real_perturb_bytes_prob=" << real_perturb_bytes_prob
      << ", real_perturb_bytes_require_orphan=" << BoolName(real_perturb_bytes_require_orphan)
      << ", target_group=" << (target_group.has_value() ? GroupKindName(*target_group) : "unset")
      << ", warmup_steps=" << warmup_steps << ", seed=" << seed << ")";
  return out.str();
}

PerturbConfig PerturbConfig::FromEnv(const EnvLookup& env) {
  PerturbConfig config;
  const auto read_prob = [&](const char* var, double& field) {
    ReadVar(env, var, ParseNumber, [&](double v) { field = v; });
  };
  read_prob("KVCANARY_PERTURB_REQ_TO_TOKEN_PROB", config.req_to_token_prob);
  read_prob("KVCANARY_PERTURB_REAL_KV_USED_PROB", config.real_kv_used_prob);
  read_prob("KVCANARY_PERTURB_REAL_KV_UNUSED_CACHE_PROB", config.real_kv_unused_cache_prob);
  read_prob("KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB", config.real_kv_post_forward_prob);
  read_prob("KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB", config.next_token_swap_prob);
  read_prob("KVCANARY_REAL_PERTURB_BYTES_PROB", config.real_perturb_bytes_prob);
  ReadVar(env, "KVCANARY_REAL_PERTURB_BYTES_REQUIRE_ORPHAN", ParseBool,
          [&](bool v) { config.real_perturb_bytes_require_orphan = v; });
  ReadVar(env, "KVCANARY_PERTURB_TARGET_GROUP", EnumParser(ParseGroupKind),
          [&](GroupKind v) { config.target_group = v; });
  ReadVar(env, "KVCANARY_PERTURB_WARMUP_STEPS", ParseInt,
          [&](int64_t v) { config.warmup_steps = v; });
  ReadVar(env, "KVCANARY_PERTURB_SEED", ParseSeed, [&](uint64_t v) { config.seed = v; });
  config.Validate();
  return config;
}

}  // namespace kvcanary::runtime
