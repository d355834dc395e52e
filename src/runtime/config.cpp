#include "kvcanary/runtime/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "kvcanary/error.h"

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

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kNone: return "none";
    case Mode::kLog: return "log";
    case Mode::kRaise: return "raise";
  }
  return "unknown";
}

const char* RealDataName(RealKvHashMode mode) {
  switch (mode) {
    case RealKvHashMode::kNone: return "none";
    case RealKvHashMode::kPartial: return "partial";
    case RealKvHashMode::kAll: return "all";
  }
  return "unknown";
}

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kFull: return "FULL";
    case GroupKind::kSwa: return "SWA";
  }
  return "UNKNOWN";
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Mode ParseMode(std::string_view value) {
  const std::string normalized = Normalize(value);
  if (normalized == "none") return Mode::kNone;
  if (normalized == "log") return Mode::kLog;
  if (normalized == "raise") return Mode::kRaise;
  ThrowError("kv-canary: mode must be one of none/log/raise, got '", value, "'");
}

RealKvHashMode ParseRealData(std::string_view value) {
  const std::string normalized = Normalize(value);
  if (normalized == "none") return RealKvHashMode::kNone;
  if (normalized == "partial") return RealKvHashMode::kPartial;
  if (normalized == "all") return RealKvHashMode::kAll;
  ThrowError("kv-canary: real_data must be one of none/partial/all, got '", value, "'");
}

GroupKind ParseGroupKind(std::string_view raw) {
  const std::string normalized = Normalize(raw);
  if (normalized == "full") return GroupKind::kFull;
  if (normalized == "swa") return GroupKind::kSwa;
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
  if (sweep_interval < 0) {
    ThrowError("kv-canary: sweep_interval must be non-negative, got ", sweep_interval);
  }
  if (sweep_interval > 0 && mode == Mode::kNone) {
    ThrowError("kv-canary: sweep_interval > 0 requires mode in {log, raise}");
  }
  if (ring_capacity <= 0) {
    ThrowError("kv-canary: ring_capacity must be positive, got ", ring_capacity);
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
      << ", fused_verify=" << BoolName(fused_verify) << ")";
  return out.str();
}

Config Config::FromEnv(const EnvLookup& env) {
  Config config;
  ReadVar(env, "KVCANARY_MODE", EnumParser(ParseMode), [&](Mode v) { config.mode = v; });
  ReadVar(env, "KVCANARY_REAL_DATA", EnumParser(ParseRealData),
          [&](RealKvHashMode v) { config.real_data = v; });
  const auto read_int = [&](const char* var, int64_t& field) {
    ReadVar(env, var, ParseInt, [&](int64_t v) { field = v; });
  };
  const auto read_bool = [&](const char* var, bool& field) {
    ReadVar(env, var, ParseBool, [&](bool v) { field = v; });
  };
  read_int("KVCANARY_SWEEP_INTERVAL", config.sweep_interval);
  read_int("KVCANARY_RING_CAPACITY", config.ring_capacity);
  read_int("KVCANARY_STATS_PRINT_EVERY_N_STEPS", config.stats_print_every_n_steps);
  read_bool("KVCANARY_ENABLE_WRITE_INPUT_ASSERT", config.enable_write_input_assert);
  read_bool("KVCANARY_ENABLE_VERIFY_TOKEN_ASSERT", config.enable_verify_token_assert);
  read_bool("KVCANARY_ENABLE_TOKEN_ORACLE", config.enable_token_oracle);
  read_bool("KVCANARY_ENABLE_MHA_V", config.enable_mha_v);
  read_int("KVCANARY_SWA_DIVERGENCE_STATS_INTERVAL", config.swa_divergence_stats_interval);
  read_bool("KVCANARY_VERIFY_BACKUP", config.verify_backup);
  read_bool("KVCANARY_REPORT_UNTOUCHED_ROWS", config.report_untouched_rows);
  read_bool("KVCANARY_ALLREDUCE_VIOLATION_SIGNAL", config.allreduce_violation_signal);
  read_bool("KVCANARY_FUSED_VERIFY", config.fused_verify);
  // A path is taken as given, trimmed; an empty value is unset like every other variable.
  if (const std::optional<std::string> path = env("KVCANARY_INCIDENT_FILE")) {
    config.incident_file = std::string(Trim(*path));
  }
  config.Validate();
  return config;
}

bool PerturbConfig::AnyEnabled() const {
  return req_to_token_prob > 0 || real_kv_used_prob > 0 || real_kv_unused_cache_prob > 0 ||
         real_kv_post_forward_prob > 0 || next_token_swap_prob > 0;
}

void PerturbConfig::Validate() const {
  const std::pair<const char*, double> probabilities[] = {
      {"KVCANARY_PERTURB_REQ_TO_TOKEN_PROB", req_to_token_prob},
      {"KVCANARY_PERTURB_REAL_KV_USED_PROB", real_kv_used_prob},
      {"KVCANARY_PERTURB_REAL_KV_UNUSED_CACHE_PROB", real_kv_unused_cache_prob},
      {"KVCANARY_PERTURB_REAL_KV_POST_FORWARD_PROB", real_kv_post_forward_prob},
      {"KVCANARY_PERTURB_NEXT_TOKEN_SWAP_PROB", next_token_swap_prob},
  };
  for (const auto& [var, probability] : probabilities) {
    // Written as a negated range test so NaN is rejected too.
    if (!(probability >= 0.0 && probability <= 1.0)) {
      ThrowError("kv-canary: ", var, " must be in [0, 1], got ", probability);
    }
  }
}

GroupKind PerturbConfig::RequireTargetGroup(std::string_view perturbation) const {
  if (!target_group.has_value()) {
    ThrowError("kv-canary: KVCANARY_PERTURB_TARGET_GROUP must be explicitly set to 'full' or "
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
      << ", next_token_swap_prob=" << next_token_swap_prob << ", target_group="
      << (target_group.has_value() ? GroupKindName(*target_group) : "unset")
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
  ReadVar(env, "KVCANARY_PERTURB_TARGET_GROUP", EnumParser(ParseGroupKind),
          [&](GroupKind v) { config.target_group = v; });
  ReadVar(env, "KVCANARY_PERTURB_WARMUP_STEPS", ParseInt,
          [&](int64_t v) { config.warmup_steps = v; });
  ReadVar(env, "KVCANARY_PERTURB_SEED", ParseSeed, [&](uint64_t v) { config.seed = v; });
  config.Validate();
  return config;
}

}  // namespace kvcanary::runtime
