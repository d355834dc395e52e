// JSON rendering of simulator reports.
#include "sim/report_json.h"

#include <map>
#include <string>

namespace kvcanary::sim {
namespace {

using Json = nlohmann::ordered_json;

// -1 marks "nothing detected" in FaultClassRow; JSON says so with null rather than a number a
// reader could average.
Json LatencyOrNull(double steps) { return steps < 0 ? Json(nullptr) : Json(steps); }

Json InjectionJson(const Injection& injection) {
  return {{"fault", FaultName(injection.fault)},
          {"step", injection.step},
          {"target", injection.target},
          {"slots", injection.slots},
          {"detected", injection.detected},
          {"detected_step", injection.detected ? Json(injection.detected_step) : Json(nullptr)},
          {"detected_forwards",
           injection.detected ? Json(injection.detected_forwards) : Json(nullptr)},
          {"detected_by", injection.detected_by},
          {"outputs_corrupted", injection.outputs_corrupted},
          {"corrupted_before_detection", injection.corrupted_returned_before_detection}};
}

// {latency: detected injections}; JSON keys are strings, in increasing order of the number.
Json HistogramJson(const std::map<int64_t, int64_t>& histogram) {
  Json json = Json::object();
  for (const auto& [latency, count] : histogram) json[std::to_string(latency)] = count;
  return json;
}

// The counts and latencies of a class row or of the total.
Json CountsJson(const FaultClassRow& row) {
  return {{"injected", row.injected},
          {"detected", row.detected},
          {"undetected", row.injected - row.detected},
          {"latency_median", LatencyOrNull(row.latency_median)},
          {"latency_max", LatencyOrNull(static_cast<double>(row.latency_max))},
          {"latency_forwards_median", LatencyOrNull(row.forwards_median)},
          {"latency_forwards_max", LatencyOrNull(static_cast<double>(row.forwards_max))},
          {"latency_histogram",
           {{"steps", HistogramJson(row.steps_histogram)},
            {"forwards", HistogramJson(row.forwards_histogram)}}},
          {"outputs_corrupted", row.outputs_corrupted},
          {"corrupted_before_detection", row.corrupted_before_detection},
          {"delivered_corrupted_tokens", row.delivered_corrupted},
          {"discarded_corrupted_tokens", row.discarded_corrupted}};
}

Json RowJson(const FaultClassRow& row) {
  Json json = {{"fault", FaultName(row.fault)}};
  json.update(CountsJson(row));
  return json;
}

Json ViolationJson(const ObservedViolation& v) {
  return {{"step", v.step},         {"launch_tag", v.launch_tag}, {"slot", v.slot},
          {"position", v.position}, {"fail_bits", v.fail_bits},   {"first_line", v.first_line}};
}

Json ScenarioJson(const ScenarioReport& report) {
  Json json;
  json["scenario"] = report.scenario;
  json["device"] = report.device;
  json["mode"] = report.mode;
  json["on_violation"] = report.on_violation;
  json["real_data"] = report.real_data;
  json["verify_sample"] = report.verify_sample;
  json["faults_enabled"] = Json::array();
  for (FaultKind fault : report.faults_enabled) json["faults_enabled"].push_back(FaultName(fault));
  json["faults"] = Json::array();
  for (const FaultClassRow& row : SummarizeFaults(report)) json["faults"].push_back(RowJson(row));
  json["total"] = CountsJson(SummarizeTotal(report));
  json["delivered_corrupted_tokens"] = DeliveredCorrupted(report);
  json["outputs_checked"] = report.outputs_checked;
  json["outputs_wrong"] = report.outputs_wrong;
  const QuarantineStats& q = report.quarantine;
  json["quarantine"] = {{"hold_back", report.hold_back},
                        {"requests_recomputed", q.requests_recomputed},
                        {"tokens_delivered", q.tokens_delivered},
                        {"tokens_discarded", q.tokens_discarded},
                        {"cached_prefixes_dropped", q.nodes_removed},
                        {"tokens_held_at_end", report.tokens_held_at_end},
                        {"delivered_corrupted_unexplained", report.delivered_corrupted_unexplained}};
  json["injections"] = Json::array();
  for (const Injection& injection : report.injections) {
    json["injections"].push_back(InjectionJson(injection));
  }
  json["false_positives"] = Json::array();
  for (const ObservedViolation& v : report.false_positives) {
    json["false_positives"].push_back(ViolationJson(v));
  }
  json["undetected"] = Json::array();
  for (const Injection& injection : UndetectedInjections(report)) {
    json["undetected"].push_back(InjectionJson(injection));
  }
  json["violations_total"] = report.violations_total;
  json["oracle_mismatches_total"] = report.oracle_mismatches_total;
  json["oracle_mismatches_unexplained"] = report.oracle_mismatches_unexplained;
  const Coverage& c = report.coverage;
  json["coverage"] = {{"steps", c.steps},
                      {"requests", c.requests},
                      {"tokens_generated", c.tokens_generated},
                      {"protected_tokens", c.protected_tokens},
                      {"sweeps", c.sweeps},
                      {"prefix_hit_rate", c.prefix_hit_rate}};
  const Speed& s = report.speed;
  json["speed"] = {{"wall_s", s.wall_s},
                   {"steps_per_s", s.steps_per_s},
                   {"tokens_per_s", s.tokens_per_s},
                   {"canary_share", s.canary_share}};
  json["passed"] = Passed(report);
  return json;
}

}  // namespace

Json ReportToJson(const std::vector<ScenarioReport>& reports) {
  Json json;
  json["passed"] = ExitCode(reports) == 0;
  json["exit_code"] = ExitCode(reports);
  json["scenarios"] = Json::array();
  for (const ScenarioReport& report : reports) json["scenarios"].push_back(ScenarioJson(report));
  return json;
}

void WriteReportJson(std::ostream& out, const std::vector<ScenarioReport>& reports) {
  out << ReportToJson(reports).dump(2) << "\n";
}

}  // namespace kvcanary::sim
