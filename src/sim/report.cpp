// Summaries, verdicts and the text rendering of simulator reports.
#include "sim/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

namespace kvcanary::sim {
namespace {

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

// Latencies are whole steps; a median of an even count may end in .5.
std::string Latency(double steps) {
  if (steps < 0) return "–";
  return steps == static_cast<double>(static_cast<int64_t>(steps)) ? Format("%.0f", steps)
                                                                   : Format("%.1f", steps);
}

std::string Hex(int64_t bits) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(bits));
  return text;
}

std::string Percent(double share) { return Format("%.1f", 100 * share) + "%"; }

int64_t CountUndetected(const ScenarioReport& report) {
  return std::count_if(report.injections.begin(), report.injections.end(),
                       [](const Injection& injection) { return !injection.detected; });
}

std::string FaultNames(const std::vector<FaultKind>& faults) {
  if (faults.empty()) return "none";
  std::string names;
  for (FaultKind fault : faults) {
    if (!names.empty()) names += ", ";
    names += FaultName(fault);
  }
  return names;
}

// Median (the mean of the two middle values for an even count), maximum and histogram of one
// latency measure; left at -1 and empty without values.
void SummarizeLatencies(std::vector<int64_t> values, double& median, int64_t& max,
                        std::map<int64_t, int64_t>& histogram) {
  if (values.empty()) return;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  median = n % 2 == 1 ? static_cast<double>(values[n / 2])
                      : (values[n / 2 - 1] + values[n / 2]) / 2.0;
  max = values.back();
  for (int64_t value : values) histogram[value] += 1;
}

// One row over the injections `keep` accepts.
template <typename Keep>
FaultClassRow SummarizeInjections(const ScenarioReport& report, Keep keep) {
  FaultClassRow row;
  std::vector<int64_t> steps, forwards;
  for (const Injection& injection : report.injections) {
    if (!keep(injection)) continue;
    ++row.injected;
    row.outputs_corrupted += injection.outputs_corrupted;
    row.corrupted_before_detection += injection.corrupted_returned_before_detection;
    row.delivered_corrupted += injection.delivered_corrupted;
    row.discarded_corrupted += injection.discarded_corrupted;
    if (!injection.detected) continue;
    ++row.detected;
    steps.push_back(injection.detected_step - injection.step);
    forwards.push_back(injection.detected_forwards);
  }
  SummarizeLatencies(steps, row.latency_median, row.latency_max, row.steps_histogram);
  SummarizeLatencies(forwards, row.forwards_median, row.forwards_max, row.forwards_histogram);
  return row;
}

void PrintFaultRow(std::ostream& out, const std::string& name, const FaultClassRow& row) {
  out << "| " << name << " | " << row.injected << " | " << row.detected << " | "
      << row.injected - row.detected << " | " << Latency(row.latency_median) << " | "
      << Latency(static_cast<double>(row.latency_max)) << " | " << Latency(row.forwards_median)
      << " | " << Latency(static_cast<double>(row.forwards_max)) << " | " << row.outputs_corrupted
      << " | " << row.corrupted_before_detection << " |\n";
}

void PrintFaultTable(std::ostream& out, const ScenarioReport& report) {
  out << "| fault | injected | detected | undetected | latency median | latency max | "
         "forwards median | forwards max | outputs corrupted | corrupted before detection |\n";
  out << "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const FaultClassRow& row : SummarizeFaults(report)) {
    PrintFaultRow(out, FaultName(row.fault), row);
  }
  PrintFaultRow(out, "total", SummarizeTotal(report));
}

void PrintFalsePositives(std::ostream& out, const ScenarioReport& report) {
  out << "false positives: " << report.false_positives.size() << "\n";
  if (report.false_positives.empty()) return;
  // The first rows say what went wrong; the JSON report has all of them.
  constexpr size_t kShown = 20;
  out << "\n| step | slot | position | fail bits | first line |\n";
  out << "|--:|--:|--:|--:|---|\n";
  for (size_t i = 0; i < report.false_positives.size() && i < kShown; ++i) {
    const ObservedViolation& v = report.false_positives[i];
    out << "| " << v.step << " | " << v.slot << " | " << v.position << " | " << Hex(v.fail_bits)
        << " | " << v.first_line << " |\n";
  }
  if (report.false_positives.size() > kShown) {
    out << "... " << report.false_positives.size() - kShown << " more (see --json)\n";
  }
  out << "\n";
}

void PrintUndetected(std::ostream& out, const ScenarioReport& report) {
  const std::vector<Injection> undetected = UndetectedInjections(report);
  out << "undetected injections: " << undetected.size() << "\n";
  for (const Injection& injection : undetected) {
    out << "- " << FaultName(injection.fault) << " at step " << injection.step << ": "
        << injection.target << " (" << injection.outputs_corrupted << " outputs corrupted)\n";
  }
}

}  // namespace

std::vector<FaultClassRow> SummarizeFaults(const ScenarioReport& report) {
  std::vector<FaultClassRow> rows;
  for (FaultKind fault : AllFaults()) {
    const bool enabled = std::find(report.faults_enabled.begin(), report.faults_enabled.end(),
                                   fault) != report.faults_enabled.end();
    FaultClassRow row = SummarizeInjections(
        report, [fault](const Injection& injection) { return injection.fault == fault; });
    row.fault = fault;
    if (!enabled && row.injected == 0) continue;
    rows.push_back(row);
  }
  return rows;
}

FaultClassRow SummarizeTotal(const ScenarioReport& report) {
  return SummarizeInjections(report, [](const Injection&) { return true; });
}

std::vector<Injection> UndetectedInjections(const ScenarioReport& report) {
  std::vector<Injection> undetected;
  for (const Injection& injection : report.injections) {
    if (!injection.detected) undetected.push_back(injection);
  }
  return undetected;
}

int64_t DeliveredCorrupted(const ScenarioReport& report) {
  int64_t total = report.delivered_corrupted_unexplained;
  for (const Injection& injection : report.injections) total += injection.delivered_corrupted;
  return total;
}

namespace {

bool QuarantineHeld(const ScenarioReport& report) {
  return report.on_violation != "quarantine" ||
         (DeliveredCorrupted(report) == 0 && report.outputs_wrong == 0);
}

void PrintDelivery(std::ostream& out, const ScenarioReport& report) {
  int64_t corrupted = 0, discarded = 0;
  for (const Injection& injection : report.injections) {
    corrupted += injection.outputs_corrupted;
    discarded += injection.discarded_corrupted;
  }
  out << "delivery (" << report.on_violation;
  if (report.on_violation == "quarantine") out << ", hold-back " << report.hold_back;
  out << "): " << corrupted << " corrupted tokens sampled, " << DeliveredCorrupted(report)
      << " delivered";
  if (report.on_violation == "quarantine") {
    const QuarantineStats& q = report.quarantine;
    out << ", " << discarded << " discarded; " << q.requests_recomputed
        << " requests recomputed, " << q.tokens_discarded << " held tokens discarded, "
        << q.nodes_removed
        << " cached prefixes dropped, " << report.tokens_held_at_end << " tokens held at the end";
  }
  out << "\noutputs: " << report.outputs_checked
      << " finished requests checked against the oracle, " << report.outputs_wrong
      << " differ\n";
}

}  // namespace

bool Passed(const ScenarioReport& report) {
  return CountUndetected(report) == 0 && report.false_positives.empty() && QuarantineHeld(report);
}

int ExitCode(const std::vector<ScenarioReport>& reports) {
  return std::all_of(reports.begin(), reports.end(), Passed) ? 0 : 1;
}

void PrintVerdict(std::ostream& out, const ScenarioReport& report) {
  const int64_t undetected = CountUndetected(report);
  const size_t false_positives = report.false_positives.size();
  const bool quarantine = report.on_violation == "quarantine";
  if (Passed(report)) {
    out << "PASS: " << report.scenario << ": " << report.injections.size() << " of "
        << report.injections.size() << " injected faults detected, no false positive"
        << (quarantine ? ", no corrupted token delivered" : "") << "\n";
    return;
  }
  out << "FAIL: " << report.scenario << ": " << undetected << " of " << report.injections.size()
      << " injected faults undetected, " << false_positives << " false positive"
      << (false_positives == 1 ? "" : "s");
  if (quarantine) {
    out << ", " << DeliveredCorrupted(report) << " corrupted tokens delivered, "
        << report.outputs_wrong << " outputs differ from the oracle";
  }
  out << "\n";
}

void PrintReport(std::ostream& out, const ScenarioReport& report) {
  std::vector<FaultKind> inapplicable;
  for (FaultKind fault : AllFaults()) {
    if (std::find(report.faults_enabled.begin(), report.faults_enabled.end(), fault) ==
        report.faults_enabled.end()) {
      inapplicable.push_back(fault);
    }
  }
  // Blank lines between the blocks keep them apart when the output is pasted as markdown.
  out << "scenario " << report.scenario << " on " << report.device << ": mode " << report.mode
      << ", real-data " << report.real_data;
  // Shown only when sampling, so the full verify's header reads as it always has.
  if (report.verify_sample > 1) out << ", verify-sample " << report.verify_sample;
  if (report.jitter) out << ", jitter";
  out << "; faults enabled " << report.faults_enabled.size() << " of " << AllFaults().size()
      << " (not enabled: " << FaultNames(inapplicable) << ")\n\n";
  PrintFaultTable(out, report);
  out << "\nlatency: steps from injection to the first violation it explains. forwards: the "
         "victims' forwards with the fault in place, through the one that detected it (every "
         "forward for a fault without a victim). corrupted: sampled tokens that differ from the "
         "oracle's.\n\n";
  PrintFalsePositives(out, report);
  PrintUndetected(out, report);
  const Coverage& c = report.coverage;
  out << "\ncoverage: " << c.steps << " steps, " << c.requests << " requests, "
      << c.tokens_generated << " tokens generated, " << c.protected_tokens << " protected tokens, "
      << c.sweeps << " sweeps, prefix-cache hit rate " << Percent(c.prefix_hit_rate) << "\n";
  const Speed& s = report.speed;
  out << "speed: " << Format("%.2f", s.wall_s) << " s wall, " << Format("%.1f", s.steps_per_s)
      << " steps/s, " << Format("%.0f", s.tokens_per_s) << " tokens/s, canary share "
      << Percent(s.canary_share) << " of step time\n";
  out << "violations: " << report.violations_total
      << " reported; oracle mismatches: " << report.oracle_mismatches_total << " ("
      << report.oracle_mismatches_unexplained << " not explained by an injection)\n";
  PrintDelivery(out, report);
  out << "\n";
  PrintVerdict(out, report);
}

void PrintSummary(std::ostream& out, const std::vector<ScenarioReport>& reports) {
  out << "| scenario | device | faults enabled | injected | detected | undetected | "
         "false positives | steps | wall s | result |\n";
  out << "|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n";
  int failed = 0;
  for (const ScenarioReport& r : reports) {
    const int64_t undetected = CountUndetected(r);
    const bool passed = Passed(r);
    failed += passed ? 0 : 1;
    out << "| " << r.scenario << " | " << r.device << " | " << r.faults_enabled.size() << " | "
        << r.injections.size() << " | " << static_cast<int64_t>(r.injections.size()) - undetected
        << " | " << undetected << " | " << r.false_positives.size() << " | " << r.coverage.steps
        << " | " << Format("%.2f", r.speed.wall_s) << " | " << (passed ? "PASS" : "FAIL") << " |\n";
  }
  out << "\n";
  if (failed == 0) {
    out << "PASS: all " << reports.size() << " scenarios passed\n";
  } else {
    out << "FAIL: " << failed << " of " << reports.size() << " scenarios failed\n";
  }
}

}  // namespace kvcanary::sim
