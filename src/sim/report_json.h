// The simulator report as JSON (`kvcanary sim --json PATH`): the same content as the printed
// tables, through the header-only nlohmann-json.
#pragma once

#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/report.h"

namespace kvcanary::sim {

// {"passed": bool, "exit_code": 0|1, "scenarios": [...]}, one object per scenario with its
// settings, "faults" (the per-class rows: fault, injected, detected, undetected, latency_median,
// latency_max, outputs_corrupted, corrupted_before_detection; latencies null when nothing was
// detected), "injections", "false_positives", "undetected", "violations_total",
// "oracle_mismatches_total", "oracle_mismatches_unexplained", "coverage", "speed" and
// "passed". Keys keep this order.
nlohmann::ordered_json ReportToJson(const std::vector<ScenarioReport>& reports);

// ReportToJson, indented by 2, and a newline.
void WriteReportJson(std::ostream& out, const std::vector<ScenarioReport>& reports);

}  // namespace kvcanary::sim
