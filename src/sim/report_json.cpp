// JSON rendering of simulator reports.
#include "sim/report_json.h"

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
          {"detected_by", injection.detected_by},
          {"outputs_corrupted", injection.outputs_corrupted},
          {"corrupted_before_detection", injection.corrupted_returned_before_detection}};
}

Json RowJson(const FaultClassRow& row) {
  return {{"fault", FaultName(row.fault)},
          {"injected", row.injected},
          {"detected", row.detected},
          {"undetected", row.injected - row.detected},
          {"latency_median", LatencyOrNull(row.latency_median)},
          {"latency_max", LatencyOrNull(static_cast<double>(row.latency_max))},
          {"outputs_corrupted", row.outputs_corrupted},
          {"corrupted_before_detection", row.corrupted_before_detection},
          {"delivered_corrupted_tokens", row.delivered_corrupted},
          {"discarded_corrupted_tokens", row.discarded_corrupted}};
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
  const std::vector<FaultClassRow> rows = SummarizeFaults(report);
  for (const FaultClassRow& row : rows) json["faults"].push_back(RowJson(row));
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
