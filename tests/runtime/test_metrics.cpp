#include "kvcanary/runtime/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "text_lines.h"

namespace kvcanary::runtime {
namespace {

using testing::Lines;

MetricsSnapshot SampleSnapshot() {
  MetricsSnapshot s;
  for (int tag = 0; tag < kNumLaunchTags; ++tag) {
    s.kernel_runs[tag] = 100 + tag;
    s.protected_tokens[tag] = 1000 * tag;
  }
  s.violations_by_tag[2] = 3;
  s.violations_total = 5;
  s.rows_reported = 3;
  s.untouched_rows_dropped = 1;
  s.split_steps = 2;
  s.skipped_steps = 0;
  s.sweep_passes = 4;
  s.health_checks = 7;
  s.last_violation_step = 42;
  s.ring_overflow = true;
  s.swa_divergence_reports = 6;
  s.swa_record_mismatches = 2;
  s.swa_unmapped_in_window = 1;
  s.swa_remapped = 9;
  s.swa_out_of_window = 30;
  s.l3_corrupt_loads = 8;
  return s;
}

// Every line is a HELP/TYPE comment or a sample "name{labels} value"; every metric has exactly
// one HELP and one TYPE, both before its first sample; no sample repeats.
TEST(Metrics, PrometheusTextIsWellFormed) {
  const std::string text = FormatPrometheus(SampleSnapshot());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"\})? (-?[0-9]+)$)");
  const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*$)");
  const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$)");
  std::map<std::string, int> helps, types;
  std::map<std::string, std::string> type_of;
  std::set<std::string> samples;
  for (const std::string& line : Lines(text)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      ++helps[m[1]];
    } else if (std::regex_match(line, m, type)) {
      ++types[m[1]];
      type_of[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      const std::string name = m[1];
      EXPECT_EQ(helps[name], 1) << "sample before its HELP: " << line;
      EXPECT_EQ(types[name], 1) << "sample before its TYPE: " << line;
      EXPECT_TRUE(samples.insert(name + std::string(m[2])).second) << "duplicate: " << line;
      if (type_of[name] == "counter") {
        EXPECT_EQ(name.substr(name.size() - 6), "_total") << name;
      }
    } else {
      ADD_FAILURE() << "malformed line: '" << line << "'";
    }
  }
  for (const auto& [name, count] : helps) EXPECT_EQ(count, 1) << name;
  for (const auto& [name, count] : types) EXPECT_EQ(count, 1) << name;
  EXPECT_EQ(helps.size(), types.size());
  EXPECT_EQ(samples.size(), 3u * kNumLaunchTags + 15u);
}

TEST(Metrics, PrometheusCarriesTheSnapshotValues) {
  const std::string text = FormatPrometheus(SampleSnapshot());
  for (const char* expected :
       {"kvcanary_kernel_runs_total{launch_tag=\"HEAD_K_FULL\"} 100\n",
        "kvcanary_kernel_runs_total{launch_tag=\"SWEEP_V_SWA\"} 111\n",
        "kvcanary_protected_tokens_total{launch_tag=\"TAIL_K_FULL\"} 2000\n",
        "kvcanary_violations_by_tag_total{launch_tag=\"TAIL_K_FULL\"} 3\n",
        "kvcanary_violations_total 5\n", "kvcanary_rows_reported_total 3\n",
        "kvcanary_untouched_rows_dropped_total 1\n", "kvcanary_split_steps_total 2\n",
        "kvcanary_skipped_steps_total 0\n", "kvcanary_sweep_passes_total 4\n",
        "kvcanary_health_checks_total 7\n", "# TYPE kvcanary_last_violation_step gauge\n",
        "kvcanary_last_violation_step 42\n", "# TYPE kvcanary_ring_overflow gauge\n",
        "kvcanary_ring_overflow 1\n", "# TYPE kvcanary_kernel_runs_total counter\n",
        "kvcanary_swa_divergence_reports_total 6\n", "# TYPE kvcanary_swa_record_mismatches gauge\n",
        "kvcanary_swa_record_mismatches 2\n", "kvcanary_swa_unmapped_in_window 1\n",
        "kvcanary_swa_remapped 9\n", "kvcanary_swa_out_of_window 30\n",
        "# TYPE kvcanary_l3_corrupt_loads_total counter\n", "kvcanary_l3_corrupt_loads_total 8\n"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected;
  }
  EXPECT_NE(FormatPrometheus(MetricsSnapshot{}).find("kvcanary_last_violation_step -1\n"),
            std::string::npos);
  EXPECT_NE(FormatPrometheus(MetricsSnapshot{}).find("kvcanary_ring_overflow 0\n"),
            std::string::npos);
}

TEST(Metrics, IncidentJsonOfTheReporterVector) {
  const int64_t values[kViolationFields] = {0, 17, 42, 111, -1, 0x1111111111111111,
                                            0x2222222222222222, 7};
  EXPECT_EQ(FormatIncidentJson(ViolationRow::FromArray(values), 7),
            "{\"step\":7,\"launch_tag\":\"HEAD_K_FULL\",\"fail_reasons\":[\"verify_chain_hash\","
            "\"verify_position\",\"verify_real_kv_hash\"],\"slot_idx\":17,\"position\":42,"
            "\"stored_token\":111,\"expected_token\":-1,\"stored_chain_hash\":"
            "\"0x1111111111111111\",\"expected_aux\":\"0x2222222222222222\","
            "\"fail_reason_bits\":7}");
}

TEST(Metrics, IncidentJsonOfUnknownTagWithoutReasons) {
  ViolationRow row;
  row.kernel_kind = 9999;
  row.stored_chain_hash = -1;
  row.fail_reason_bits = 64;  // an unlabelled bit
  const std::string json = FormatIncidentJson(row, 3);
  EXPECT_NE(json.find("\"launch_tag\":\"unknown(9999)\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"fail_reasons\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"stored_chain_hash\":\"0xffffffffffffffff\""), std::string::npos) << json;
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(Metrics, L3LoadIncidentJsonEscapesTheReason) {
  EXPECT_EQ(FormatL3LoadIncidentJson(4, "FULL", "p0", "checksum mismatch"),
            "{\"step\":4,\"launch_tag\":\"CANARY_L3_LOAD\",\"group\":\"FULL\",\"key\":\"p0\","
            "\"reason\":\"checksum mismatch\"}");
  const std::string json = FormatL3LoadIncidentJson(0, "SWA", "k", "a \"quoted\" \\ path\n");
  EXPECT_NE(json.find("\"reason\":\"a \\\"quoted\\\" \\\\ path\\u000a\"}"), std::string::npos)
      << json;
}

}  // namespace
}  // namespace kvcanary::runtime
