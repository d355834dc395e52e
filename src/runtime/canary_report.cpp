// Phase 4's host side (spec/runtime.md §6-§8): the violation pump and reporter, the health
// checker, the stats line, the overflow warner and the metrics they feed. Every device value is
// staged in one step and read in the next (§5), so nothing here waits on work just enqueued,
// except the reporter's ring read, which only runs once a violation is known to exist.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>

#include "kvcanary/error.h"
#include "runtime/canary_impl.h"

namespace kvcanary::runtime {
namespace {

// Layout of the stats staging buffer: slot counters, kernel counters, then the write index.
constexpr int64_t kStatsSlotOffset = 0;
constexpr int64_t kStatsKernelOffset = 8 * kNumLaunchTags;
constexpr int64_t kStatsWriteIndexOffset = 16 * kNumLaunchTags;

}  // namespace

void CanaryManager::Impl::PumpRankSignal() {
  if (signal_read_ == nullptr) return;
  if (const void* staged = signal_read_->Take()) {
    int32_t global = 0;
    std::memcpy(&global, staged, 4);
    // This rank's own rows are the pump's business; here only "someone else saw one" matters.
    if (global > 0 && last_write_index_ == 0 && last_logged_ == 0 && !other_rank_reported_) {
      other_rank_reported_ = true;
      const std::string message =
          "kv-canary: violation reported by another rank (all-reduced violation signal) at step=" +
          std::to_string(outer_step_);
      if (config_.mode == Mode::kRaise && !raised_) {
        raised_ = true;
        throw ViolationError(message);
      }
      Log(LogLevel::kWarning, message);
    }
  }
  CopyBytesAsync(signal_value_.data(), write_index_.data(), 4, device_, stream_);
  signal_reducer_->AllReduceMax(signal_value_.View(DType::kInt32, {1}), stream_);
  signal_read_->Stage(signal_value_.data(), stream_);
}

void CanaryManager::Impl::PumpViolations() {
  if (const void* staged = pump_read_->Take()) {
    int32_t write_index = 0;
    std::memcpy(&write_index, staged, 4);
    const int64_t valid = std::min<int64_t>(write_index, config_.ring_capacity);
    if (valid > last_logged_ && !raised_) ReportNewRows(write_index);
  }
  pump_read_->Stage(write_index_.data(), stream_);
}

void CanaryManager::Impl::ReportNewRows(int64_t /*staged_write_index*/) {
  // §6.2: the ring is read synchronously, after everything enqueued so far.
  SynchronizeStream(device_, stream_);
  int32_t write_index = 0;
  CopyBytesAsync(&write_index, write_index_.data(), 4, device_, stream_);
  SynchronizeStream(device_, stream_);
  last_write_index_ = write_index;
  if (write_index == 0) return;
  const int64_t capacity = config_.ring_capacity;
  const int64_t valid = std::min<int64_t>(write_index, capacity);
  const bool overflow = write_index > capacity;
  const int64_t start = std::min(last_logged_, valid);
  if (start >= valid) return;
  std::vector<int64_t> rows((valid - start) * kViolationFields);
  CopyBytesAsync(rows.data(), ring_.data_as<int64_t>() + start * kViolationFields,
                 8 * static_cast<int64_t>(rows.size()), device_, stream_);
  SynchronizeStream(device_, stream_);
  last_logged_ = valid;

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
    untouched_rows_dropped_ += dropped;
    Log(LogLevel::kWarning, FormatDroppedRowsWarning(dropped));
  }
  if (shown.empty()) return;
  AppendIncidents(shown);
  std::vector<std::string> messages;
  for (const ViolationRow& row : shown) {
    messages.push_back(FormatViolation(row, write_index, overflow, outer_step_));
    rows_reported_ += 1;
    last_violation_step_ = outer_step_;
    if (row.kernel_kind >= 0 && row.kernel_kind < kNumLaunchTags) {
      violations_by_tag_[row.kernel_kind] += 1;
    }
    if (listener_) listener_(row, outer_step_);
  }
  if (config_.mode == Mode::kRaise) {
    raised_ = true;
    std::string text;
    for (size_t i = 0; i < messages.size(); ++i) text += (i ? "\n" : "") + messages[i];
    throw ViolationError(text);
  }
  for (const std::string& message : messages) Log(LogLevel::kWarning, message);
}

void CanaryManager::Impl::AppendIncidents(const std::vector<ViolationRow>& rows) {
  if (config_.incident_file.empty()) return;
  // Opened per report (rare) in append mode, so an external rotation or truncation is honoured
  // and several ranks may share one file line by line.
  std::ofstream out(config_.incident_file, std::ios::app);
  for (const ViolationRow& row : rows) out << FormatIncidentJson(row, outer_step_) << '\n';
  out.flush();
  if (!out) {
    Log(LogLevel::kWarning, "kv-canary: could not append " + std::to_string(rows.size()) +
                                " incident(s) to incident_file '" + config_.incident_file + "'");
  }
}

void CanaryManager::Impl::CheckHealth() {
  if (const void* staged = health_read_->Take()) {
    std::array<int64_t, kNumLaunchTags> counters{};
    std::memcpy(counters.data(), staged, sizeof(counters));
    health_checks_ += 1;
    health_->Drain(counters, outer_step_, sweep_since_previous_check_);
  }
  if (health_->ShouldStage(outer_step_)) {
    health_read_->Stage(kernel_counters_.data(), stream_);
    sweep_since_previous_check_ = sweep_since_health_stage_;
    sweep_since_health_stage_ = false;
  }
}

void CanaryManager::Impl::LogStats() {
  if (const void* staged = stats_read_->Take()) {
    const char* bytes = static_cast<const char*>(staged);
    std::memcpy(last_slot_counters_.data(), bytes + kStatsSlotOffset, 8 * kNumLaunchTags);
    std::memcpy(last_kernel_counters_.data(), bytes + kStatsKernelOffset, 8 * kNumLaunchTags);
    int32_t write_index = 0;
    std::memcpy(&write_index, bytes + kStatsWriteIndexOffset, 4);
    last_write_index_ = std::max<int64_t>(last_write_index_, write_index);
    const int64_t period = config_.stats_print_every_n_steps;
    if (StatsDue(stats_staged_step_, period)) {
      const int64_t protected_tokens =
          std::accumulate(last_slot_counters_.begin(), last_slot_counters_.end(), int64_t{0});
      Log(LogLevel::kInfo,
          FormatStatsLine(stats_staged_step_, protected_tokens, sweep_passes_, write_index,
                          static_cast<int>(active_tags_.size())));
    }
  }
  // Staged every step (a few hundred bytes) so metrics trail the device by one step only.
  char* staging = stats_staging_.data_as<char>();
  CopyBytesAsync(staging + kStatsSlotOffset, slot_counters_.data(), 8 * kNumLaunchTags, device_,
                 stream_);
  CopyBytesAsync(staging + kStatsKernelOffset, kernel_counters_.data(), 8 * kNumLaunchTags,
                 device_, stream_);
  CopyBytesAsync(staging + kStatsWriteIndexOffset, write_index_.data(), 4, device_, stream_);
  stats_read_->Stage(staging, stream_);
  stats_staged_step_ = outer_step_;
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
  metrics.kernel_runs = last_kernel_counters_;
  metrics.protected_tokens = last_slot_counters_;
  metrics.violations_by_tag = violations_by_tag_;
  metrics.violations_total = last_write_index_;
  metrics.rows_reported = rows_reported_;
  metrics.untouched_rows_dropped = untouched_rows_dropped_;
  metrics.split_steps = split_steps_;
  int64_t skipped = 0;
  for (const ForwardState& forward : forwards_) skipped += forward.skipped_steps;
  metrics.skipped_steps = skipped;
  metrics.sweep_passes = sweep_passes_;
  metrics.health_checks = health_checks_;
  metrics.last_violation_step = last_violation_step_;
  metrics.ring_overflow = last_write_index_ > config_.ring_capacity;
  return metrics;
}

}  // namespace kvcanary::runtime
