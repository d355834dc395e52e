// Metrics export: a snapshot of the runtime's counters rendered as
// Prometheus text exposition, and violation incidents as JSON lines. Pure formatting; the runtime
// fills the snapshot from host-side values it already holds (drained counters, reporter totals).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kvcanary/format.h"
#include "kvcanary/runtime/violation_format.h"

namespace kvcanary::runtime {

struct MetricsSnapshot {
  // Per launch tag, indexed by CanaryLaunchTag.
  std::array<int64_t, kNumLaunchTags> kernel_runs{};        // kernel_run_counters
  std::array<int64_t, kNumLaunchTags> protected_tokens{};   // slot_run_counters
  std::array<int64_t, kNumLaunchTags> violations_by_tag{};  // ring rows seen, by column 0
  int64_t violations_total = 0;        // violation_write_index (rows past the ring included)
  int64_t rows_reported = 0;           // rows formatted and logged or raised
  int64_t untouched_rows_dropped = 0;  // never-written rows left out of the report
  int64_t split_steps = 0;             // split-mode (inner forward, group) steps
  int64_t skipped_steps = 0;           // overflow warner count
  int64_t sweep_passes = 0;
  int64_t health_checks = 0;
  int64_t last_violation_step = -1;    // step_when_pumped of the last reported row; -1 = none
  bool ring_overflow = false;
  // The SWA divergence diagnostic (Config::swa_divergence_stats_interval): reports run, and the
  // counts of the last one (0 before the first; src/runtime/swa_divergence.h defines them).
  int64_t swa_divergence_reports = 0;
  int64_t swa_record_mismatches = 0;
  int64_t swa_unmapped_in_window = 0;
  int64_t swa_remapped = 0;
  int64_t swa_out_of_window = 0;
  // LoadFromStore calls that found a corrupt or stale page (reported as CANARY_L3_LOAD).
  int64_t l3_corrupt_loads = 0;
};

// Prometheus text exposition format 0.0.4: for each metric one "# HELP" and one "# TYPE" line,
// then its samples "name{launch_tag=\"HEAD_K_FULL\"} value" (per-tag counters, all 12 tags) or
// "name value". Counters end in _total; kvcanary_last_violation_step, kvcanary_ring_overflow
// (0 or 1) and the last SWA divergence report's counts (kvcanary_swa_*) are gauges. Ends with a newline, as the format requires.
std::string FormatPrometheus(const MetricsSnapshot& snapshot);

// One JSON object for an incident log (JSON lines), no trailing newline:
// {"step":7,"launch_tag":"HEAD_K_FULL","fail_reasons":["verify_chain_hash"],"slot_idx":17,
//  "position":42,"stored_token":111,"expected_token":-1,"stored_chain_hash":"0x...",
//  "expected_aux":"0x...","fail_reason_bits":1}. Unknown tags render as "unknown(<n>)".
std::string FormatIncidentJson(const ViolationRow& row, int64_t step);

// The incident line of a corrupt L3 load (LoadFromStore), no trailing newline:
// {"step":7,"launch_tag":"CANARY_L3_LOAD","group":"FULL","key":"p0","reason":"checksum ..."}.
// `reason` is escaped as a JSON string.
std::string FormatL3LoadIncidentJson(int64_t step, const std::string& group, const std::string& key,
                                     const std::string& reason);

}  // namespace kvcanary::runtime
