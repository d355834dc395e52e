#include "kvcanary/runtime/metrics.h"

#include <string_view>

namespace kvcanary::runtime {
namespace {

void AppendHeader(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendScalar(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help, int64_t value) {
  AppendHeader(out, name, type, help);
  out.append(name).append(" ").append(std::to_string(value)).append("\n");
}

// Tag names are fixed upper-case identifiers, so label values need no escaping.
void AppendPerTag(std::string& out, std::string_view name, std::string_view help,
                  const std::array<int64_t, kNumLaunchTags>& values) {
  AppendHeader(out, name, "counter", help);
  for (int tag = 0; tag < kNumLaunchTags; ++tag) {
    out.append(name)
        .append("{launch_tag=\"")
        .append(LaunchTagName(tag))
        .append("\"} ")
        .append(std::to_string(values[tag]))
        .append("\n");
  }
}

// The integer metrics, one row each: name, Prometheus type, help text, field.
struct ScalarMetric {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  int64_t MetricsSnapshot::*value;
};

constexpr ScalarMetric kScalarMetrics[] = {
    {"kvcanary_violations_total", "counter",
     "Violation rows recorded on the device, including rows past the ring.",
     &MetricsSnapshot::violations_total},
    {"kvcanary_rows_reported_total", "counter", "Violation rows logged or raised by the reporter.",
     &MetricsSnapshot::rows_reported},
    {"kvcanary_untouched_rows_dropped_total", "counter",
     "Violation rows of never-written canary slots dropped by the reporter.",
     &MetricsSnapshot::untouched_rows_dropped},
    {"kvcanary_split_steps_total", "counter",
     "Steps whose verify was split outside the graph because of plan overflow.",
     &MetricsSnapshot::split_steps},
    {"kvcanary_skipped_steps_total", "counter",
     "Steps whose per-forward verify was skipped due to overflow.",
     &MetricsSnapshot::skipped_steps},
    {"kvcanary_sweep_passes_total", "counter", "Completed sweep passes.",
     &MetricsSnapshot::sweep_passes},
    {"kvcanary_health_checks_total", "counter", "Health checks drained.",
     &MetricsSnapshot::health_checks},
    {"kvcanary_last_violation_step", "gauge",
     "Outer step at which the last violation was reported, -1 if none.",
     &MetricsSnapshot::last_violation_step},
    {"kvcanary_swa_divergence_reports_total", "counter", "SWA divergence reports run.",
     &MetricsSnapshot::swa_divergence_reports},
    {"kvcanary_swa_record_mismatches", "gauge",
     "Last SWA divergence report: in-window positions whose SWA record disagrees with the FULL "
     "record.",
     &MetricsSnapshot::swa_record_mismatches},
    {"kvcanary_swa_unmapped_in_window", "gauge",
     "Last SWA divergence report: in-window positions the full->SWA table maps to 0.",
     &MetricsSnapshot::swa_unmapped_in_window},
    {"kvcanary_swa_remapped", "gauge",
     "Last SWA divergence report: live positions whose SWA slot differs from the full slot.",
     &MetricsSnapshot::swa_remapped},
    {"kvcanary_swa_out_of_window", "gauge",
     "Last SWA divergence report: positions before the window mapped to 0.",
     &MetricsSnapshot::swa_out_of_window},
    {"kvcanary_l3_corrupt_loads_total", "counter",
     "Loads from an L3 page store that found a corrupt or stale page.",
     &MetricsSnapshot::l3_corrupt_loads},
};

// `text` as the inside of a JSON string.
std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out.append("\\u00").push_back(kHex[(c >> 4) & 0xF]);
      out.push_back(kHex[c & 0xF]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string FormatPrometheus(const MetricsSnapshot& s) {
  std::string out;
  AppendPerTag(out, "kvcanary_kernel_runs_total", "Canary kernel launches per launch tag.",
               s.kernel_runs);
  AppendPerTag(out, "kvcanary_protected_tokens_total",
               "Canary records checked or written per launch tag.", s.protected_tokens);
  AppendPerTag(out, "kvcanary_violations_by_tag_total", "Violation rows per launch tag.",
               s.violations_by_tag);
  for (const ScalarMetric& metric : kScalarMetrics) {
    AppendScalar(out, metric.name, metric.type, metric.help, s.*metric.value);
  }
  AppendScalar(out, "kvcanary_ring_overflow", "gauge",
               "1 if more violations were recorded than the ring holds.",
               s.ring_overflow ? 1 : 0);
  return out;
}

std::string FormatIncidentJson(const ViolationRow& row, int64_t step) {
  std::string reasons;
  for (int i = 0; i < FailReason::kNumBits; ++i) {
    const int64_t bit = int64_t{1} << i;
    const char* label = FailReasonLabel(bit);
    if ((row.fail_reason_bits & bit) == 0 || label == nullptr) continue;
    if (!reasons.empty()) reasons += ",";
    reasons.append("\"").append(label).append("\"");
  }
  // Hashes as hex strings: JSON numbers beyond 2^53 lose precision in most parsers.
  return "{\"step\":" + std::to_string(step) + ",\"launch_tag\":\"" +
         LaunchTagLabel(row.kernel_kind) + "\",\"fail_reasons\":[" + reasons +
         "],\"slot_idx\":" + std::to_string(row.slot_idx) +
         ",\"position\":" + std::to_string(row.position) +
         ",\"stored_token\":" + std::to_string(row.stored_token) +
         ",\"expected_token\":" + std::to_string(row.expected_token) +
         ",\"stored_chain_hash\":\"" + FormatHex64(row.stored_chain_hash) +
         "\",\"expected_aux\":\"" + FormatHex64(row.expected_aux) +
         "\",\"fail_reason_bits\":" + std::to_string(row.fail_reason_bits) + "}";
}

std::string FormatL3LoadIncidentJson(int64_t step, const std::string& group, const std::string& key,
                                     const std::string& reason) {
  return "{\"step\":" + std::to_string(step) + ",\"launch_tag\":\"CANARY_L3_LOAD\",\"group\":\"" +
         JsonEscaped(group) + "\",\"key\":\"" + JsonEscaped(key) + "\",\"reason\":\"" +
         JsonEscaped(reason) + "\"}";
}

}  // namespace kvcanary::runtime
