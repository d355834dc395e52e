// What a simulator run found: the injections with their detection, the
// violations no injection explains, coverage and speed; the per-class summary; the verdict and
// exit status; and the table printed at the end of a run. The same content as JSON: report_json.h.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/sim_options.h"

namespace kvcanary::sim {

// One injected fault, and what became of it. The engine fills the first four fields when it
// injects, the rest as violations and oracle mismatches are matched to it.
struct Injection {
  FaultKind fault = FaultKind::kReqToToken;
  int64_t step = 0;            // the outer step the fault was injected in
  std::string target;          // what was broken, e.g. "req 12 row 3 pos 40 slot 77"
  std::vector<int64_t> slots;  // the slots it touched: violations on them are explained by it
  bool detected = false;
  int64_t detected_step = -1;  // the step of the first matching violation; -1 if none
  // The victims' forwards (steps whose batch held a victim) that ran with the fault in place,
  // through the one that detected it, that one counted whether or not it held a victim; for an
  // injection without a victim, every forward of the engine. In place: from the injection on, or
  // for a freed slot or block from the forward that first overwrote it. -1 if undetected.
  int64_t detected_forwards = -1;
  // How: the launch tag and failed check ("TAIL_K_FULL verify_real_kv_hash"), or for faults the
  // op rejects up front, "API: " and the error message.
  std::string detected_by;
  int64_t outputs_corrupted = 0;  // sampled tokens that differ from the oracle because of it
  // Of those, the ones returned to a user at a step before detected_step (all of them when the
  // fault went undetected).
  int64_t corrupted_returned_before_detection = 0;
  // Of outputs_corrupted, the ones delivered to a user: with --on-violation log every one as it
  // is sampled; with quarantine the ones released from the hold-back (none, when it works).
  int64_t delivered_corrupted = 0;
  // With quarantine: of outputs_corrupted, the ones discarded with their request's held tokens.
  int64_t discarded_corrupted = 0;
};

// A violation row no injection explains: a false positive.
struct ObservedViolation {
  int64_t step = 0;
  int64_t launch_tag = 0;
  int64_t slot = 0;
  int64_t position = 0;
  int64_t fail_bits = 0;
  std::string first_line;  // the runtime's WARNING line for it
};

struct Coverage {
  int64_t steps = 0;
  int64_t requests = 0;          // requests finished
  int64_t tokens_generated = 0;  // output tokens sampled
  int64_t protected_tokens = 0;  // records checked or written: the sum of the slot counters
  int64_t sweeps = 0;            // SWEEP verifies run
  double prefix_hit_rate = 0;    // prompt tokens served from the radix cache / prompt tokens
};

struct Speed {
  double wall_s = 0;
  double steps_per_s = 0;
  double tokens_per_s = 0;
  double canary_share = 0;  // share of step time spent in canary work, in [0, 1]
};

// One scenario's run.
struct ScenarioReport {
  std::string scenario;
  std::string device;
  std::string mode;
  std::string real_data;
  std::string on_violation = "log";  // --on-violation
  int64_t verify_sample = 1;  // HEAD/TAIL verify a rotating 1/K of every prefix (--verify-sample)
  bool jitter = false;        // the timing-jitter fuzzer was on (--jitter)
  std::vector<FaultKind> faults_enabled;  // EnabledFaults() of the run's options
  std::vector<Injection> injections;      // in injection order
  std::vector<ObservedViolation> false_positives;
  int64_t violations_total = 0;  // every violation row the canary reported, explained or not
  Coverage coverage;
  Speed speed;
  int64_t oracle_mismatches_total = 0;  // sampled tokens that differ from the oracle
  // Of those, the ones no injection explains: a simulator bug, or damage that outlived its
  // injection's quarantine. 0 in every passing run.
  int64_t oracle_mismatches_unexplained = 0;
  // Finished requests whose whole delivered output was compared with the oracle's, and those
  // that differ in at least one token.
  int64_t outputs_checked = 0;
  int64_t outputs_wrong = 0;
  // --on-violation quarantine: what the engine's recovery did (all 0 with log).
  int64_t hold_back = 1;
  QuarantineStats quarantine;
  int64_t tokens_held_at_end = 0;          // sampled, their verdict not known when the run ended
  int64_t delivered_corrupted_unexplained = 0;  // corrupted, delivered, no injection explains
};

// One row of the per-class table. Latencies are detected_step - step (wall steps) and
// detected_forwards (forwards) over the detected injections of the class; medians and maxima are
// -1 and histograms empty when none was detected.
struct FaultClassRow {
  FaultKind fault = FaultKind::kReqToToken;
  int injected = 0;
  int detected = 0;
  double latency_median = -1;  // the mean of the two middle values for an even count
  int64_t latency_max = -1;
  double forwards_median = -1;
  int64_t forwards_max = -1;
  std::map<int64_t, int64_t> steps_histogram;     // latency in steps -> detected injections
  std::map<int64_t, int64_t> forwards_histogram;  // latency in forwards -> detected injections
  int64_t outputs_corrupted = 0;
  int64_t corrupted_before_detection = 0;
  int64_t delivered_corrupted = 0;
  int64_t discarded_corrupted = 0;
};

// A row for every enabled class (injected or not, so a class the engine found no target for
// shows as 0) and for any class injected without being enabled, in FaultKind order.
std::vector<FaultClassRow> SummarizeFaults(const ScenarioReport& report);

// The total over every injection: the sums of the rows, and the latencies of all detected
// injections together (their median too). `fault` means nothing.
FaultClassRow SummarizeTotal(const ScenarioReport& report);

// The injections that were not detected, in injection order.
std::vector<Injection> UndetectedInjections(const ScenarioReport& report);

// Corrupted tokens a user received, over every class (and unexplained ones).
int64_t DeliveredCorrupted(const ScenarioReport& report);
// The verdict: every injection detected and no false positive; with quarantine also no corrupted
// token delivered and every finished request's output the oracle's.
bool Passed(const ScenarioReport& report);
// The process exit status for a run of these scenarios: 0 when all passed, else 1.
int ExitCode(const std::vector<ScenarioReport>& reports);

// The report of one scenario as markdown tables and lines: the header, one row per fault class
// and a total, the false positives, the undetected injections with step and target, coverage,
// speed, and last a line starting "PASS" or "FAIL".
void PrintReport(std::ostream& out, const ScenarioReport& report);
// One line, "PASS: ..." or "FAIL: ...", naming the scenario and what failed.
void PrintVerdict(std::ostream& out, const ScenarioReport& report);
// For `--scenario all`: one table with a row per scenario, then an overall PASS/FAIL line.
void PrintSummary(std::ostream& out, const std::vector<ScenarioReport>& reports);

}  // namespace kvcanary::sim
