// Tests for sim/report_json: the JSON carries the same content as the printed report.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "report_header.h"
#include "sim/report_json.h"

namespace kvcanary::sim {
namespace {

ScenarioReport FailingReport() {
  ScenarioReport report =
      ReportHeader("swa", "all", {FaultKind::kReqToToken, FaultKind::kSwaLutStale});
  Injection detected;
  detected.fault = FaultKind::kReqToToken;
  detected.step = 10;
  detected.slots = {5, 6};
  detected.detected = true;
  detected.detected_step = 12;
  detected.detected_forwards = 1;
  detected.detected_by = "HEAD_K_FULL verify_chain_hash";
  detected.outputs_corrupted = 2;
  detected.delivered_corrupted = 1;
  Injection missed;
  missed.fault = FaultKind::kSwaLutStale;
  missed.step = 30;
  missed.target = "lut 44 -> swa slot 3";
  report.injections = {detected, missed};
  report.false_positives.push_back({7, 2, 99, 13, 0x10, "WARNING line"});
  report.violations_total = 3;
  report.oracle_mismatches_total = 2;
  report.oracle_mismatches_unexplained = 1;
  report.coverage = {100, 10, 200, 3000, 12, 0.5};
  report.speed = {1.5, 66.7, 133.3, 0.2};
  return report;
}

TEST(ReportJson, CarriesRowsVerdictAndLists) {
  const nlohmann::ordered_json json = ReportToJson({FailingReport()});
  EXPECT_EQ(json["passed"], false);
  EXPECT_EQ(json["exit_code"], 1);
  ASSERT_EQ(json["scenarios"].size(), 1u);
  const auto& s = json["scenarios"][0];
  EXPECT_EQ(s["scenario"], "swa");
  EXPECT_EQ(s["real_data"], "all");
  EXPECT_EQ(s["faults_enabled"], nlohmann::ordered_json::array({"req_to_token", "swa_lut_stale"}));
  ASSERT_EQ(s["faults"].size(), 2u);
  const auto& row = s["faults"][0];
  EXPECT_EQ(row["fault"], "req_to_token");
  EXPECT_EQ(row["injected"], 1);
  EXPECT_EQ(row["detected"], 1);
  EXPECT_EQ(row["undetected"], 0);
  EXPECT_EQ(row["latency_median"], 2.0);
  EXPECT_EQ(row["latency_max"], 2.0);
  EXPECT_EQ(row["latency_forwards_median"], 1.0);
  EXPECT_EQ(row["latency_forwards_max"], 1.0);
  EXPECT_EQ(row["latency_histogram"]["steps"], nlohmann::ordered_json({{"2", 1}}));
  EXPECT_EQ(row["latency_histogram"]["forwards"], nlohmann::ordered_json({{"1", 1}}));
  EXPECT_EQ(row["outputs_corrupted"], 2);
  EXPECT_EQ(row["corrupted_before_detection"], 0);
  EXPECT_EQ(row["delivered_corrupted_tokens"], 1);
  EXPECT_EQ(s["faults"][1]["delivered_corrupted_tokens"], 0);
  EXPECT_EQ(s["delivered_corrupted_tokens"], 1);
  EXPECT_EQ(s["on_violation"], "log");
  // Nothing detected: latencies are null, not a number that could be averaged.
  EXPECT_TRUE(s["faults"][1]["latency_median"].is_null());
  EXPECT_TRUE(s["faults"][1]["latency_max"].is_null());
  EXPECT_TRUE(s["faults"][1]["latency_forwards_median"].is_null());
  EXPECT_TRUE(s["faults"][1]["latency_forwards_max"].is_null());
  EXPECT_TRUE(s["faults"][1]["latency_histogram"]["steps"].empty());
  EXPECT_TRUE(s["faults"][1]["latency_histogram"]["forwards"].is_object());
  EXPECT_EQ(s["injections"][0]["detected_forwards"], 1);
  EXPECT_TRUE(s["injections"][1]["detected_forwards"].is_null());
  // The total: every injection, the latencies of the detected ones.
  EXPECT_EQ(s["total"]["injected"], 2);
  EXPECT_EQ(s["total"]["undetected"], 1);
  EXPECT_EQ(s["total"]["latency_max"], 2.0);
  EXPECT_EQ(s["total"]["latency_forwards_max"], 1.0);
  EXPECT_EQ(s["total"]["delivered_corrupted_tokens"], 1);
  EXPECT_EQ(s["faults"][1]["undetected"], 1);
  ASSERT_EQ(s["undetected"].size(), 1u);
  EXPECT_EQ(s["undetected"][0]["target"], "lut 44 -> swa slot 3");
  EXPECT_EQ(s["undetected"][0]["step"], 30);
  EXPECT_TRUE(s["undetected"][0]["detected_step"].is_null());
  EXPECT_EQ(s["injections"][0]["slots"], nlohmann::ordered_json::array({5, 6}));
  ASSERT_EQ(s["false_positives"].size(), 1u);
  EXPECT_EQ(s["false_positives"][0]["slot"], 99);
  EXPECT_EQ(s["false_positives"][0]["first_line"], "WARNING line");
  EXPECT_EQ(s["coverage"]["sweeps"], 12);
  EXPECT_EQ(s["coverage"]["prefix_hit_rate"], 0.5);
  EXPECT_EQ(s["speed"]["canary_share"], 0.2);
  EXPECT_EQ(s["violations_total"], 3);
  EXPECT_EQ(s["oracle_mismatches_total"], 2);
  EXPECT_EQ(s["oracle_mismatches_unexplained"], 1);
  EXPECT_EQ(s["passed"], false);
}

TEST(ReportJson, HistogramsCountEachLatencyInIncreasingOrder) {
  ScenarioReport report = FailingReport();
  for (int64_t forwards : {8, 3, 8, 10}) {
    Injection injection = report.injections[0];
    injection.detected_step = injection.step + forwards + 2;
    injection.detected_forwards = forwards;
    report.injections.push_back(injection);
  }
  const nlohmann::ordered_json total = ReportToJson({report})["scenarios"][0]["total"];
  // Keys are the latencies as strings, in numeric order (10 after 8, not before 3).
  std::vector<std::pair<std::string, int>> forwards;
  for (const auto& item : total["latency_histogram"]["forwards"].items()) {
    forwards.emplace_back(item.key(), item.value().get<int>());
  }
  EXPECT_EQ(forwards, (std::vector<std::pair<std::string, int>>{
                          {"1", 1}, {"3", 1}, {"8", 2}, {"10", 1}}));
  EXPECT_EQ(total["latency_histogram"]["steps"],
            nlohmann::ordered_json({{"2", 1}, {"5", 1}, {"10", 2}, {"12", 1}}));
  EXPECT_EQ(total["latency_forwards_median"], 8.0);  // of 1, 3, 8, 8, 10
  EXPECT_EQ(total["latency_forwards_max"], 10.0);
  EXPECT_EQ(total["latency_median"], 10.0);  // of 2, 5, 10, 10, 12
}

TEST(ReportJson, WrittenTextParsesBackToTheSameDocument) {
  ScenarioReport clean;
  clean.scenario = "soak";
  std::ostringstream out;
  WriteReportJson(out, {FailingReport(), clean});
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(out.str());
  EXPECT_EQ(parsed, ReportToJson({FailingReport(), clean}));
  EXPECT_EQ(parsed["scenarios"][1]["passed"], true);
  const std::vector<std::string> keys = {"scenario",
                                         "device",
                                         "mode",
                                         "on_violation",
                                         "real_data",
                                         "verify_sample",
                                         "faults_enabled",
                                         "faults",
                                         "total",
                                         "delivered_corrupted_tokens",
                                         "outputs_checked",
                                         "outputs_wrong",
                                         "quarantine",
                                         "injections",
                                         "false_positives",
                                         "undetected",
                                         "violations_total",
                                         "oracle_mismatches_total",
                                         "oracle_mismatches_unexplained",
                                         "coverage",
                                         "speed",
                                         "passed"};
  std::vector<std::string> actual;
  for (const auto& item : parsed["scenarios"][1].items()) actual.push_back(item.key());
  EXPECT_EQ(actual, keys);
}

}  // namespace
}  // namespace kvcanary::sim
