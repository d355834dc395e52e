#include "runtime/affected_requests.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace kvcanary::runtime {
namespace {

// Launch tags are 6 * group + 2 * stage + half (stage 2 = sweep, group 1 = SWA).
bool IsSweepRow(const ViolationRow& row) { return row.kernel_kind % 6 >= 4; }
bool IsSwaRow(const ViolationRow& row) { return row.kernel_kind >= 6; }

}  // namespace

void AffectedRequestTracker::Record(RecordedForward forward) {
  while (!history_.empty() && history_.front().step <= forward.step - kHistorySteps) {
    history_.pop_front();
  }
  RecordedForward live;
  live.step = forward.step;
  live.table = std::move(forward.table);
  for (size_t r = 0; r < forward.req_pool_indices.size() && r < forward.lengths.size(); ++r) {
    const int64_t req = forward.req_pool_indices[r];
    if (req == kReqPoolIdxPadding || req < 0 || req >= live.table.rows) continue;
    live.req_pool_indices.push_back(req);
    live.lengths.push_back(std::min(forward.lengths[r], live.table.max_seq_len));
  }
  history_.push_back(std::move(live));
}

void AffectedRequestTracker::MatchSlots(const std::vector<ViolationRow>& rows,
                                        std::vector<bool>& matched, StreamHandle stream) {
  // SWA rows name SWA slots, which the full table does not hold: they are never matched here.
  if (!full_slots_in_table_) return;
  std::unordered_map<int64_t, std::vector<size_t>> violations_of_slot;
  for (size_t v = 0; v < rows.size(); ++v) {
    if (!IsSwaRow(rows[v])) violations_of_slot[rows[v].slot_idx].push_back(v);
  }
  if (violations_of_slot.empty()) return;
  for (const RecordedForward& forward : history_) {
    std::vector<TableRowSpan> spans;
    for (size_t r = 0; r < forward.req_pool_indices.size(); ++r) {
      spans.push_back(TableRowSpan{forward.req_pool_indices[r], forward.lengths[r]});
    }
    const std::vector<std::vector<int64_t>> slots = ReadTableSlots(forward.table, spans, stream);
    for (size_t r = 0; r < slots.size(); ++r) {
      for (int64_t p = 0; p < static_cast<int64_t>(slots[r].size()); ++p) {
        const auto it = violations_of_slot.find(slots[r][p]);
        if (it == violations_of_slot.end()) continue;
        for (const size_t v : it->second) {
          Add(forward, r, rows[v], p);
          matched[v] = true;
        }
      }
    }
  }
}

std::vector<int64_t> AffectedRequestTracker::Match(const std::vector<ViolationRow>& rows,
                                                   bool ring_overflow, StreamHandle stream) {
  touched_.clear();
  std::vector<bool> matched(rows.size(), false);
  MatchSlots(rows, matched, stream);
  for (size_t v = 0; v < rows.size(); ++v) {
    // A HEAD/TAIL row came from a row of these batches, yet no table names its slot now (an SWA
    // slot, or an entry changed since the forward read it): every recorded row is taken. A
    // sweep row touches only the requests that hold its slot.
    if (!matched[v] && !IsSweepRow(rows[v])) AddEveryRow(&rows[v], false);
  }
  if (ring_overflow) AddEveryRow(nullptr, true);
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  return touched_;
}

void AffectedRequestTracker::Add(const RecordedForward& forward, size_t row,
                                 const ViolationRow& violation, int64_t position) {
  const int64_t req = forward.req_pool_indices[row];
  AffectedRequest& affected = pending_[req];
  affected.req_pool_idx = req;
  affected.step = std::max(affected.step, forward.step);
  affected.fail_reason_bits |= violation.fail_reason_bits;
  bool seen = false;
  for (size_t i = 0; i < affected.slots.size(); ++i) {
    seen = seen || (affected.slots[i] == violation.slot_idx && affected.positions[i] == position);
  }
  if (!seen) {
    affected.slots.push_back(violation.slot_idx);
    affected.positions.push_back(position);
  }
  touched_.push_back(req);
}

void AffectedRequestTracker::AddEveryRow(const ViolationRow* violation, bool ring_overflow) {
  for (const RecordedForward& forward : history_) {
    for (const int64_t req : forward.req_pool_indices) {
      AffectedRequest& affected = pending_[req];
      affected.req_pool_idx = req;
      affected.step = std::max(affected.step, forward.step);
      if (violation != nullptr) affected.fail_reason_bits |= violation->fail_reason_bits;
      affected.ring_overflow = affected.ring_overflow || ring_overflow;
      touched_.push_back(req);
    }
  }
}

std::vector<AffectedRequest> AffectedRequestTracker::Take() {
  std::vector<AffectedRequest> out;
  out.reserve(pending_.size());
  for (auto& [req, affected] : pending_) out.push_back(std::move(affected));
  pending_.clear();
  return out;
}

}  // namespace kvcanary::runtime
