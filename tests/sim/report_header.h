// The header of a hand-made ScenarioReport, for the tests of the printed report and of its JSON.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/report.h"

namespace kvcanary::sim {

// A report of `scenario` run on the CPU in log mode with `real_data`, the faults in
// `faults_enabled` switched on, and nothing injected or counted yet.
inline ScenarioReport ReportHeader(std::string scenario, std::string real_data,
                                   std::vector<FaultKind> faults_enabled) {
  ScenarioReport report;
  report.scenario = std::move(scenario);
  report.device = "cpu";
  report.mode = "log";
  report.real_data = std::move(real_data);
  report.faults_enabled = std::move(faults_enabled);
  return report;
}

}  // namespace kvcanary::sim
