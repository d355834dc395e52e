// RunScenario: drives one engine through a scenario with the fault injector and turns what it
// saw into the report.
#include "sim/run_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <numeric>
#include <sstream>

#include "kvcanary/checked.h"
#include "kvcanary/runtime/canary_manager.h"
#include "sim/engine.h"
#include "sim/faults.h"
#include "sim/no_hooks.h"
#include "sim/workload.h"

namespace kvcanary::sim {
namespace {

// The report is the simulator's output: the runtime's own log lines are counted, not printed.
class CountingLog : public runtime::LogSink {
 public:
  void Log(runtime::LogLevel level, const std::string&) override {
    if (level != runtime::LogLevel::kInfo) warnings += 1;
  }
  int64_t warnings = 0;
};

WorkloadOptions WorkloadOf(const SimOptions& options) {
  WorkloadOptions workload;
  workload.seed = options.seed;
  const int64_t by_steps = static_cast<int64_t>(
      std::ceil(static_cast<double>(options.steps) * options.arrivals_per_step));
  // Counts and lengths the workload keeps as int: one past int is refused, not truncated.
  const auto narrow = [](const char* name, int64_t value) {
    return CheckedNarrow<int>(name, value);
  };
  const int64_t requests =
      options.num_requests > 0 ? options.num_requests : std::max<int64_t>(by_steps, 1);
  workload.num_requests = narrow("num_requests", requests);
  workload.num_system_prompts =
      narrow("num_system_prompts", std::max<int64_t>(options.num_system_prompts, 1));
  workload.system_prompt_len_min = narrow("system_prompt_len_min", options.system_prompt_len_min);
  workload.system_prompt_len_max = narrow("system_prompt_len_max", options.system_prompt_len_max);
  workload.user_len_min = narrow("user_turn_len_min", options.user_turn_len_min);
  workload.user_len_max = narrow("user_turn_len_max", options.user_turn_len_max);
  workload.max_new_tokens_min = narrow("max_new_tokens_min", options.max_new_tokens_min);
  workload.max_new_tokens_max = narrow("max_new_tokens_max", options.max_new_tokens_max);
  workload.follow_up_prob = options.follow_up_prob;
  workload.arrival_per_step_max = 0;  // arrival steps are spread below
  workload.vocab_size = options.vocab_size;
  workload.max_context_len = options.max_context_len;
  return workload;
}

// Violations on the prefill side have no fault to explain them.
void AddUnexplained(const std::vector<ReportedViolation>& violations, int64_t step,
                    ScenarioReport& report) {
  for (const ReportedViolation& v : violations) {
    report.violations_total += 1;
    report.false_positives.push_back(ObservedViolation{step, v.row.kernel_kind, v.row.slot_idx,
                                                       v.row.position, v.row.fail_reason_bits,
                                                       "prefill: " + v.first_line});
  }
}

}  // namespace

ScenarioReport RunScenario(const SimOptions& options, const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  CountingLog log;
  // Unified: one engine. PD: requests enter the prefill engine, whose finished prompts move to
  // `engine` (the decode side) through TransferPackets.
  Engine engine(options, options.pd ? "decode" : "engine", &log,
                options.pd ? EngineRole::kDecode : EngineRole::kUnified);
  std::unique_ptr<Engine> prefill;
  if (options.pd) prefill = std::make_unique<Engine>(options, "prefill", &log, EngineRole::kPrefill);
  Engine& entry = prefill ? *prefill : engine;
  NoHooks no_faults;  // the PD prefill engine runs no fault of its own
  std::deque<TransferPacket> in_flight;
  Workload workload(WorkloadOf(options));
  int64_t index = 0;
  for (RequestSpec spec : workload.initial_requests()) {
    spec.arrival_step = static_cast<int64_t>(static_cast<double>(index++) / options.arrivals_per_step);
    entry.scheduler().Submit(std::move(spec));
  }
  const int64_t total_steps = options.steps > 0 ? options.steps : int64_t{1} << 40;
  FaultInjector injector(options, options.steps > 0 ? options.steps : 1000);

  ScenarioReport report;
  report.scenario = options.scenario;
  report.device = options.device;
  report.mode = options.mode;
  report.on_violation = options.on_violation;
  report.real_data = options.real_data;
  report.verify_sample = options.verify_sample;
  report.jitter = options.jitter;
  report.faults_enabled = EnabledFaults(options);

  int64_t step = 0;
  int64_t finished = 0;
  auto absorb = [&] {
    std::vector<ReportedViolation> violations = engine.TakeViolations();
    report.violations_total += static_cast<int64_t>(violations.size());
    injector.AfterStep(engine, violations, report.false_positives);
  };
  bool stopped = false;  // raise mode stops the engine at its first violation
  for (; step < total_steps && !stopped; ++step) {
    injector.BeginStep(step);
    try {
      if (prefill) {
        prefill->Step(step, no_faults);
        AddUnexplained(prefill->TakeViolations(), step, report);
        for (TransferPacket& packet : prefill->TakeTransfers()) in_flight.push_back(std::move(packet));
        while (!in_flight.empty()) {
          TransferPacket& packet = in_flight.front();
          injector.BeforeAdmit(packet);
          Request* admitted = engine.AdmitTransfer(packet, step);
          injector.AfterAdmit(engine, packet, admitted);
          if (admitted == nullptr) {
            std::fill(packet.page_dropped.begin(), packet.page_dropped.end(), false);
            break;
          }
          in_flight.pop_front();
        }
      }
      engine.Step(step, injector);
    } catch (const runtime::ViolationError&) {
      stopped = true;
    }
    absorb();
    for (std::unique_ptr<Request>& done : engine.TakeFinished()) {
      finished += 1;
      if (auto follow_up = workload.FollowUp(done->spec, done->output, step + 1)) {
        entry.scheduler().Submit(std::move(*follow_up));
      }
    }
    if (progress) {
      std::ostringstream status;
      status << finished << " requests, " << injector.injections().size() << " faults injected";
      progress(step + 1, options.steps, status.str());
    }
    if (options.num_requests > 0 && finished >= options.num_requests) break;
    if (engine.scheduler().Done() && entry.scheduler().Done() && in_flight.empty()) break;
  }
  // Violations of the last steps are staged, not yet read: run empty steps to report them.
  if (!stopped) {
    for (int i = 0; i < 3; ++i) {
      injector.BeginStep(step++);
      try {
        engine.Drain(1);
        if (prefill) prefill->Drain(1);
      } catch (const runtime::ViolationError&) {
      }
      absorb();
      if (prefill) AddUnexplained(prefill->TakeViolations(), step, report);
    }
  }
  injector.Finish(engine);
  // The recoveries (aborts, recomputes, dropped prefixes) free exactly what nobody else holds.
  engine.CheckUnitOwnership();
  if (prefill) prefill->CheckUnitOwnership();

  report.injections = injector.injections();
  report.oracle_mismatches_total = engine.stats().oracle_mismatches;
  report.oracle_mismatches_unexplained = injector.unexplained_mismatches();
  report.outputs_checked = engine.stats().outputs_checked;
  report.outputs_wrong = engine.stats().outputs_wrong;
  report.hold_back = QuarantineHoldBack(options);
  report.quarantine = engine.quarantine_stats();
  report.tokens_held_at_end = engine.tokens_held();
  report.delivered_corrupted_unexplained = injector.unexplained_delivered();
  report.coverage.steps = engine.stats().steps;
  report.coverage.requests = finished;
  report.coverage.tokens_generated = engine.stats().tokens_generated;
  report.coverage.prefix_hit_rate = entry.scheduler().stats().PrefixHitRate();
  for (Engine* side : {&engine, prefill.get()}) {
    if (side == nullptr || side->canary() == nullptr) continue;
    const runtime::MetricsSnapshot metrics = side->canary()->Metrics();
    report.coverage.protected_tokens +=
        std::accumulate(metrics.protected_tokens.begin(), metrics.protected_tokens.end(), int64_t{0});
    report.coverage.sweeps += side->canary()->sweep_passes();
  }
  if (prefill) report.oracle_mismatches_total += prefill->stats().oracle_mismatches;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.speed.wall_s = wall;
  report.speed.steps_per_s = wall > 0 ? static_cast<double>(report.coverage.steps) / wall : 0;
  report.speed.tokens_per_s = wall > 0 ? static_cast<double>(report.coverage.tokens_generated) / wall : 0;
  report.speed.canary_share =
      engine.stats().step_seconds > 0 ? engine.stats().canary_seconds / engine.stats().step_seconds : 0;
  return report;
}

}  // namespace kvcanary::sim
