// Tests for sim/report: the per-class summary, the verdict and exit status, and the printed tables.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "report_header.h"
#include "sim/report.h"

namespace kvcanary::sim {
namespace {

Injection Detected(FaultKind fault, int64_t step, int64_t latency, int64_t corrupted = 0,
                   int64_t before = 0) {
  Injection injection;
  injection.fault = fault;
  injection.step = step;
  injection.target = "req 1 row 1 pos " + std::to_string(step) + " slot 9";
  injection.slots = {9};
  injection.detected = true;
  injection.detected_step = step + latency;
  injection.detected_by = "TAIL_K_FULL verify_chain_hash";
  injection.outputs_corrupted = corrupted;
  injection.corrupted_returned_before_detection = before;
  return injection;
}

Injection Undetected(FaultKind fault, int64_t step, const std::string& target) {
  Injection injection;
  injection.fault = fault;
  injection.step = step;
  injection.target = target;
  injection.outputs_corrupted = 4;
  injection.corrupted_returned_before_detection = 4;
  return injection;
}

ScenarioReport CleanReport() {
  ScenarioReport report =
      ReportHeader("default", "partial",
                   {FaultKind::kReqToToken, FaultKind::kRealKvUsed, FaultKind::kPositionSkip});
  report.injections = {
      Detected(FaultKind::kReqToToken, 10, 1, 2, 1), Detected(FaultKind::kReqToToken, 20, 5, 3),
      Detected(FaultKind::kReqToToken, 30, 3),       Detected(FaultKind::kRealKvUsed, 40, 2),
      Detected(FaultKind::kRealKvUsed, 50, 5),
  };
  // The victims' forwards: fewer than the wall steps, as when prefill batches ran between.
  const int64_t forwards[] = {1, 3, 2, 1, 4};
  for (size_t i = 0; i < report.injections.size(); ++i) {
    report.injections[i].detected_forwards = forwards[i];
  }
  report.violations_total = 7;
  report.coverage = {500, 120, 4000, 60000, 62, 0.713};
  report.speed = {2.5, 200, 1600, 0.25};
  return report;
}

std::string Printed(const ScenarioReport& report) {
  std::ostringstream out;
  PrintReport(out, report);
  return out.str();
}

std::string LastLine(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - start);
}

TEST(Report, SummarizeFaultsCountsAndTakesMedianAndMaxLatency) {
  const std::vector<FaultClassRow> rows = SummarizeFaults(CleanReport());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fault, FaultKind::kReqToToken);
  EXPECT_EQ(rows[0].injected, 3);
  EXPECT_EQ(rows[0].detected, 3);
  EXPECT_EQ(rows[0].latency_median, 3);  // of 1, 5, 3
  EXPECT_EQ(rows[0].latency_max, 5);
  EXPECT_EQ(rows[0].outputs_corrupted, 5);
  EXPECT_EQ(rows[0].corrupted_before_detection, 1);
  EXPECT_EQ(rows[1].fault, FaultKind::kRealKvUsed);
  EXPECT_EQ(rows[1].latency_median, 3.5);  // of 2, 5: the mean of the middle two
  EXPECT_EQ(rows[1].latency_max, 5);
  // Enabled but never injected: a row of zeros, latencies marked absent.
  EXPECT_EQ(rows[2].fault, FaultKind::kPositionSkip);
  EXPECT_EQ(rows[2].injected, 0);
  EXPECT_EQ(rows[2].latency_median, -1);
  EXPECT_EQ(rows[2].latency_max, -1);
}

TEST(Report, SummarizeFaultsTakesMedianMaxAndHistogramsOfBothLatencies) {
  const std::vector<FaultClassRow> rows = SummarizeFaults(CleanReport());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].forwards_median, 2);  // of 1, 3, 2
  EXPECT_EQ(rows[0].forwards_max, 3);
  EXPECT_EQ(rows[0].steps_histogram, (std::map<int64_t, int64_t>{{1, 1}, {3, 1}, {5, 1}}));
  EXPECT_EQ(rows[0].forwards_histogram, (std::map<int64_t, int64_t>{{1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(rows[1].forwards_median, 2.5);  // of 1, 4
  EXPECT_EQ(rows[1].forwards_max, 4);
  EXPECT_EQ(rows[1].steps_histogram, (std::map<int64_t, int64_t>{{2, 1}, {5, 1}}));
  EXPECT_EQ(rows[2].forwards_median, -1);
  EXPECT_EQ(rows[2].forwards_max, -1);
  EXPECT_TRUE(rows[2].forwards_histogram.empty());
}

TEST(Report, SummarizeTotalPoolsTheLatenciesOfEveryDetectedInjection) {
  ScenarioReport report = CleanReport();
  report.injections.push_back(Undetected(FaultKind::kPositionSkip, 60, "x"));
  const FaultClassRow total = SummarizeTotal(report);
  EXPECT_EQ(total.injected, 6);
  EXPECT_EQ(total.detected, 5);
  EXPECT_EQ(total.latency_median, 3);  // of 1, 5, 3, 2, 5
  EXPECT_EQ(total.latency_max, 5);
  EXPECT_EQ(total.forwards_median, 2);  // of 1, 3, 2, 1, 4
  EXPECT_EQ(total.forwards_max, 4);
  EXPECT_EQ(total.steps_histogram, (std::map<int64_t, int64_t>{{1, 1}, {2, 1}, {3, 1}, {5, 2}}));
  EXPECT_EQ(total.forwards_histogram,
            (std::map<int64_t, int64_t>{{1, 2}, {2, 1}, {3, 1}, {4, 1}}));
  EXPECT_EQ(total.outputs_corrupted, 5 + 4);
  EXPECT_EQ(total.corrupted_before_detection, 1 + 4);
}

TEST(Report, SummarizeFaultsLeavesUndetectedOutOfLatencyAndKeepsUnlistedClasses) {
  ScenarioReport report = CleanReport();
  report.injections.push_back(Undetected(FaultKind::kReqToToken, 60, "x"));
  // Injected although not in faults_enabled: it must still get a row, in FaultKind order.
  report.injections.push_back(Detected(FaultKind::kStrideView, 70, 0));
  const std::vector<FaultClassRow> rows = SummarizeFaults(report);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].injected, 4);
  EXPECT_EQ(rows[0].detected, 3);
  EXPECT_EQ(rows[0].latency_median, 3);
  EXPECT_EQ(rows[0].outputs_corrupted, 9);
  EXPECT_EQ(rows[0].corrupted_before_detection, 5);
  EXPECT_EQ(rows[1].fault, FaultKind::kStrideView);
  EXPECT_EQ(rows[1].latency_median, 0);
}

TEST(Report, CleanRunPassesWithExitZero) {
  EXPECT_TRUE(Passed(CleanReport()));
  EXPECT_EQ(ExitCode({CleanReport()}), 0);
  EXPECT_EQ(ExitCode({CleanReport(), CleanReport()}), 0);
}

TEST(Report, AnUndetectedInjectionFails) {
  ScenarioReport report = CleanReport();
  report.injections.push_back(Undetected(FaultKind::kRealKvUsed, 60, "req 2 slot 5"));
  EXPECT_FALSE(Passed(report));
  EXPECT_EQ(ExitCode({CleanReport(), report}), 1);
  ASSERT_EQ(UndetectedInjections(report).size(), 1u);
  EXPECT_EQ(UndetectedInjections(report)[0].target, "req 2 slot 5");
}

TEST(Report, AFalsePositiveFails) {
  ScenarioReport report = CleanReport();
  report.false_positives.push_back({12, 3, 77, 40, 0x4, "TAIL_K_FULL slot 77"});
  EXPECT_FALSE(Passed(report));
  EXPECT_EQ(ExitCode({report}), 1);
}

TEST(Report, PrintReportHasTheFaultRowsCoverageAndAPassLine) {
  const std::string text = Printed(CleanReport());
  EXPECT_NE(text.find("| fault | injected | detected | undetected | latency median | latency max | "
                      "forwards median | forwards max | outputs corrupted | "
                      "corrupted before detection |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| req_to_token | 3 | 3 | 0 | 3 | 5 | 2 | 3 | 5 | 1 |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("| real_kv_used | 2 | 2 | 0 | 3.5 | 5 | 2.5 | 4 | 0 | 0 |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| position_skip | 0 | 0 | 0 | – | – | – | – | 0 | 0 |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("| total | 5 | 5 | 0 | 3 | 5 | 2 | 4 | 5 | 1 |"), std::string::npos) << text;
  EXPECT_NE(text.find("false positives: 0"), std::string::npos) << text;
  EXPECT_NE(text.find("undetected injections: 0"), std::string::npos) << text;
  EXPECT_NE(text.find("500 steps, 120 requests, 4000 tokens generated, 60000 protected tokens, "
                      "62 sweeps, prefix-cache hit rate 71.3%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("canary share 25.0%"), std::string::npos) << text;
  EXPECT_EQ(LastLine(text).rfind("PASS: default", 0), 0u) << LastLine(text);
}

TEST(Report, TheHeaderNamesTheSamplingRateOnlyWhenSampling) {
  ScenarioReport report = CleanReport();
  EXPECT_NE(Printed(report).find("real-data partial; faults enabled"), std::string::npos);
  report.verify_sample = 8;
  EXPECT_NE(Printed(report).find("real-data partial, verify-sample 8; faults enabled"),
            std::string::npos)
      << Printed(report);
}

TEST(Report, PrintReportListsWhatFailedAndEndsWithFail) {
  ScenarioReport report = CleanReport();
  report.injections.push_back(Undetected(FaultKind::kRealKvUsed, 60, "req 2 row 1 pos 7 slot 5"));
  report.false_positives.push_back({12, 3, 77, 40, 0x4, "TAIL_K_FULL slot 77 bad"});
  const std::string text = Printed(report);
  EXPECT_NE(text.find("- real_kv_used at step 60: req 2 row 1 pos 7 slot 5"), std::string::npos)
      << text;
  EXPECT_NE(text.find("| 12 | 77 | 40 | 0x4 | TAIL_K_FULL slot 77 bad |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("false positives: 1"), std::string::npos) << text;
  EXPECT_EQ(LastLine(text), "FAIL: default: 1 of 6 injected faults undetected, 1 false positive");
}

TEST(Report, PrintSummaryHasARowPerScenarioAndAnOverallVerdict) {
  ScenarioReport failed = CleanReport();
  failed.scenario = "swa";
  failed.injections.push_back(Undetected(FaultKind::kSwaLutStale, 9, "lut 3"));
  std::ostringstream out;
  PrintSummary(out, {CleanReport(), failed});
  const std::string text = out.str();
  EXPECT_NE(text.find("| default | cpu | 3 | 5 | 5 | 0 | 0 | 500 | 2.50 | PASS |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| swa | cpu | 3 | 6 | 5 | 1 | 0 | 500 | 2.50 | FAIL |"), std::string::npos)
      << text;
  EXPECT_EQ(LastLine(text), "FAIL: 1 of 2 scenarios failed");
  std::ostringstream clean;
  PrintSummary(clean, {CleanReport()});
  EXPECT_EQ(LastLine(clean.str()), "PASS: all 1 scenarios passed");
}

}  // namespace
}  // namespace kvcanary::sim
