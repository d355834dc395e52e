// Phase 4's host side: the violation pump and reporter, the health
// checker, the stats line, the overflow warner and the metrics they feed. Every device value is
// staged in one step and read in the next, so nothing here waits on work just enqueued,
// except the reporter's ring read, which only runs once a violation is known to exist.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>

#include "kvcanary/error.h"
#include "runtime/canary_impl.h"

namespace kvcanary::runtime {
namespace {

// Layout of the stats staging buffer: slot counters, kernel counters, then the write index.
constexpr int64_t kStatsSlotOffset = 0;
constexpr int64_t kStatsKernelOffset = 8 * kNumLaunchTags;
constexpr int64_t kStatsWriteIndexOffset = 16 * kNumLaunchTags;

// Runs one of the engine's callbacks (its log sink, its listener) and returns what it threw, if it
// threw: a callback's failure is reported, never let through to break the step.
template <typename Call>
std::optional<std::string> ThrownBy(Call&& call) {
  try {
    call();
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "an exception of unknown type";
  }
  return std::nullopt;
}

}  // namespace

void CanaryManager::Impl::PumpRankSignal() {
  if (signal_.read == nullptr) return;
  if (const void* staged = signal_.read->Take()) {
    int32_t global = 0;
    std::memcpy(&global, staged, 4);
    // This rank's own rows are the pump's business; here only "someone else saw one" matters.
    if (global > 0 && reporter_.last_write_index == 0 && reporter_.last_logged == 0 && !signal_.other_rank_reported) {
      signal_.other_rank_reported = true;
      const std::string message =
          "kv-canary: violation reported by another rank (all-reduced violation signal) at step=" +
          std::to_string(step_.outer);
      if (config_.RaisesOnViolation() && !reporter_.raised) {
        reporter_.raised = true;
        throw ViolationError(message);
      }
      Log(LogLevel::kWarning, message);
    }
  }
  CopyBytesAsync(signal_.value.data(), state_.write_index.data(), 4, device_, stream_);
  signal_.reducer->AllReduceMax(signal_.value.View(DType::kInt32, {1}), stream_);
  signal_.read->Stage(signal_.value.data(), stream_);
}

void CanaryManager::Impl::PumpViolations() {
  if (const void* staged = reporter_.pump_read->Take()) {
    int32_t write_index = 0;
    std::memcpy(&write_index, staged, 4);
    const int64_t valid = std::min<int64_t>(write_index, config_.ring_capacity);
    if (valid > reporter_.last_logged && !reporter_.raised) ReportNewRows(write_index);
  }
  reporter_.pump_read->Stage(state_.write_index.data(), stream_);
}

void CanaryManager::Impl::ReportNewRows(int64_t /*staged_write_index*/) {
  // The violation ring is read synchronously, after everything enqueued so far.
  SynchronizeStream(device_, stream_);
  int32_t write_index = 0;
  CopyBytesAsync(&write_index, state_.write_index.data(), 4, device_, stream_);
  SynchronizeStream(device_, stream_);
  reporter_.last_write_index = write_index;
  if (write_index == 0) return;
  const int64_t capacity = config_.ring_capacity;
  const int64_t valid = std::min<int64_t>(write_index, capacity);
  const bool overflow = write_index > capacity;
  const int64_t start = std::min(reporter_.last_logged, valid);
  if (start >= valid) return;
  std::vector<int64_t> rows((valid - start) * kViolationFields);
  CopyBytesAsync(rows.data(), state_.ring.data_as<int64_t>() + start * kViolationFields,
                 8 * static_cast<int64_t>(rows.size()), device_, stream_);
  SynchronizeStream(device_, stream_);
  reporter_.last_logged = valid;

  std::vector<ViolationRow> shown;
  int64_t dropped = 0;
  for (int64_t i = 0; i < valid - start; ++i) {
    const ViolationRow row = ViolationRow::FromArray(&rows[i * kViolationFields]);
    if (!config_.report_untouched_rows && IsUntouchedRow(row)) {
      dropped += 1;
      continue;
    }
    shown.push_back(row);
  }
  if (dropped > 0) {
    reporter_.untouched_rows_dropped += dropped;
    Log(LogLevel::kWarning, FormatDroppedRowsWarning(dropped));
  }
  if (config_.on_violation == OnViolation::kQuarantine) QuarantineRows(shown, overflow);
  if (shown.empty()) return;
  AppendIncidents(shown);
  std::vector<std::string> messages;
  for (const ViolationRow& row : shown) {
    messages.push_back(FormatViolation(row, write_index, overflow, step_.outer));
    reporter_.rows_reported += 1;
    reporter_.last_violation_step = step_.outer;
    if (row.kernel_kind >= 0 && row.kernel_kind < kNumLaunchTags) {
      reporter_.violations_by_tag[row.kernel_kind] += 1;
    }
    NotifyListener(row);
  }
  if (config_.RaisesOnViolation()) {
    reporter_.raised = true;
    std::string text;
    for (size_t i = 0; i < messages.size(); ++i) text += (i ? "\n" : "") + messages[i];
    throw ViolationError(text);
  }
  for (const std::string& message : messages) Log(LogLevel::kWarning, message);
}

void CanaryManager::Impl::Log(LogLevel level, const std::string& message) const {
  if (const auto error = ThrownBy([&] { log_->Log(level, message); })) {
    StderrLogSink().Log(level, message + " (the engine's log sink threw: " + *error + ")");
  }
}

void CanaryManager::Impl::NotifyListener(const ViolationRow& row) {
  if (!reporter_.listener) return;
  // A listener that throws must not cost the rows after it their report (or the step its end).
  if (const auto error = ThrownBy([&] { reporter_.listener(row, step_.outer); })) {
    Log(LogLevel::kError, "kv-canary: the violation listener threw: " + *error);
  }
}

void CanaryManager::Impl::AppendIncidents(const std::vector<ViolationRow>& rows) {
  if (!incident_file_.enabled()) return;
  std::vector<std::string> lines;
  for (const ViolationRow& row : rows) lines.push_back(FormatIncidentJson(row, step_.outer));
  if (const std::optional<std::string> warning = incident_file_.Append(lines)) {
    Log(LogLevel::kWarning, *warning);
  }
}

void CanaryManager::Impl::CheckHealth() {
  if (const void* staged = health_.read->Take()) {
    std::array<int64_t, kNumLaunchTags> counters{};
    std::memcpy(counters.data(), staged, sizeof(counters));
    health_.checks += 1;
    health_.checker->Drain(counters, step_.outer, health_.sweep_since_previous_check);
  }
  if (health_.checker->ShouldStage(step_.outer)) {
    health_.read->Stage(state_.kernel_counters.data(), stream_);
    health_.sweep_since_previous_check = health_.sweep_since_stage;
    health_.sweep_since_stage = false;
  }
}

void CanaryManager::Impl::LogStats() {
  if (const void* staged = stats_.read->Take()) {
    const char* bytes = static_cast<const char*>(staged);
    std::memcpy(health_.last_slot_counters.data(), bytes + kStatsSlotOffset, 8 * kNumLaunchTags);
    std::memcpy(health_.last_kernel_counters.data(), bytes + kStatsKernelOffset, 8 * kNumLaunchTags);
    int32_t write_index = 0;
    std::memcpy(&write_index, bytes + kStatsWriteIndexOffset, 4);
    reporter_.last_write_index = std::max<int64_t>(reporter_.last_write_index, write_index);
    const int64_t period = config_.stats_print_every_n_steps;
    if (StatsDue(stats_.staged_step, period)) {
      const int64_t protected_tokens =
          std::accumulate(health_.last_slot_counters.begin(), health_.last_slot_counters.end(), int64_t{0});
      Log(LogLevel::kInfo,
          FormatStatsLine(stats_.staged_step, protected_tokens, sweep_.passes, write_index,
                          static_cast<int>(active_tags_.size())));
    }
  }
  // Staged every step (a few hundred bytes) so metrics trail the device by one step only.
  char* staging = stats_.staging.data_as<char>();
  CopyBytesAsync(staging + kStatsSlotOffset, state_.slot_counters.data(), 8 * kNumLaunchTags, device_,
                 stream_);
  CopyBytesAsync(staging + kStatsKernelOffset, state_.kernel_counters.data(), 8 * kNumLaunchTags,
                 device_, stream_);
  CopyBytesAsync(staging + kStatsWriteIndexOffset, state_.write_index.data(), 4, device_, stream_);
  stats_.read->Stage(staging, stream_);
  stats_.staged_step = step_.outer;
}

void CanaryManager::Impl::TickOverflowWarner(ForwardState& forward) {
  if (const void* staged = forward.overflow_read->Take()) {
    std::vector<int32_t> enable(groups_.size());
    std::memcpy(enable.data(), staged, 4 * enable.size());
    const int32_t min_enable = *std::min_element(enable.begin(), enable.end());
    if (min_enable == 0 && !forward.staged_step_split) {
      forward.skipped_steps += 1;
      Log(LogLevel::kWarning,
          FormatOverflowSkippedLine(forward.skipped_steps, capacities_.verify_capacity));
    }
  }
  forward.overflow_read->Stage(forward.snapshot_enable.data(), stream_);
  forward.staged_step_split = false;
  for (const ForwardState::PerGroup& per_group : forward.groups) {
    forward.staged_step_split = forward.staged_step_split || per_group.split;
  }
}

MetricsSnapshot CanaryManager::Impl::Snapshot() const {
  MetricsSnapshot metrics;
  metrics.kernel_runs = health_.last_kernel_counters;
  metrics.protected_tokens = health_.last_slot_counters;
  metrics.violations_by_tag = reporter_.violations_by_tag;
  metrics.violations_total = reporter_.last_write_index;
  metrics.rows_reported = reporter_.rows_reported;
  metrics.untouched_rows_dropped = reporter_.untouched_rows_dropped;
  metrics.split_steps = stats_.split_steps;
  int64_t skipped = 0;
  for (const ForwardState& forward : forwards_) skipped += forward.skipped_steps;
  metrics.skipped_steps = skipped;
  metrics.sweep_passes = sweep_.passes;
  metrics.health_checks = health_.checks;
  metrics.last_violation_step = reporter_.last_violation_step;
  metrics.ring_overflow = reporter_.last_write_index > config_.ring_capacity;
  metrics.swa_divergence_reports = swa_divergence_.reports;
  metrics.swa_record_mismatches = swa_divergence_.last.record_mismatches;
  metrics.swa_unmapped_in_window = swa_divergence_.last.unmapped_in_window;
  metrics.swa_remapped = swa_divergence_.last.remapped;
  metrics.swa_out_of_window = swa_divergence_.last.out_of_window;
  metrics.l3_corrupt_loads = reporter_.l3_corrupt_loads;
  return metrics;
}

}  // namespace kvcanary::runtime
