#include "runtime/affected_requests.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "kvcanary/plan.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime {
namespace {

// Launch tags are 6 * group + 2 * stage + half (stage 2 = sweep, group 1 = SWA).
bool IsSweepRow(const ViolationRow& row) { return row.kernel_kind % 6 >= 4; }
bool IsSwaRow(const ViolationRow& row) { return row.kernel_kind >= 6; }

// The recorded live rows' spans: the positions each reads or writes.
std::vector<TableRowSpan> SpansOf(const RecordedForward& forward) {
  std::vector<TableRowSpan> spans;
  for (size_t r = 0; r < forward.req_pool_indices.size(); ++r) {
    spans.push_back(TableRowSpan{forward.req_pool_indices[r], forward.lengths[r]});
  }
  return spans;
}

// `slots` translated through `slot_table` on its device by SwaTranslate, the translation the
// plan applies to the slots it verifies: one copy each way and one synchronisation, as many
// entries as were read.
std::vector<std::vector<int64_t>> TranslateSlots(const TensorView& slot_table,
                                                 const std::vector<std::vector<int64_t>>& slots,
                                                 StreamHandle stream) {
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& row : slots) flat.insert(flat.end(), row.begin(), row.end());
  std::vector<std::vector<int64_t>> translated(slots.size());
  if (!flat.empty()) {
    const Device device = slot_table.device();
    const auto count = static_cast<int64_t>(flat.size());
    const DeviceBuffer staged(device, 8 * count);
    CopyBytesAsync(staged.data(), flat.data(), 8 * count, device, stream);
    const TensorView view = staged.View(DType::kInt64, {count});
    SwaTranslate(SwaTranslateArgs{view, slot_table, view}, stream);
    CopyBytesAsync(flat.data(), staged.data(), 8 * count, device, stream);
    SynchronizeStream(device, stream);
  }
  auto next = flat.begin();
  for (size_t r = 0; r < slots.size(); ++r) {
    translated[r].assign(next, next + static_cast<std::ptrdiff_t>(slots[r].size()));
    next += static_cast<std::ptrdiff_t>(slots[r].size());
  }
  return translated;
}

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

void AffectedRequestTracker::MatchGroup(const std::vector<ViolationRow>& rows, bool swa,
                                        std::vector<bool>& matched, StreamHandle stream) {
  const TensorView& slot_table = slot_tables_[swa ? 1 : 0];
  // SWA rows name SWA slots, which only the SWA table leads to from the full slots.
  if (swa && !slot_table.defined()) return;
  std::unordered_map<int64_t, std::vector<size_t>> violations_of_slot;
  for (size_t v = 0; v < rows.size(); ++v) {
    if (IsSwaRow(rows[v]) == swa) violations_of_slot[rows[v].slot_idx].push_back(v);
  }
  // Through a slot table, 0 stands for every full slot without a slot in the group (the padding
  // slot a write of such a token goes to): it names no request.
  const bool translate = slot_table.defined();
  if (translate) violations_of_slot.erase(0);
  if (violations_of_slot.empty()) return;
  for (const RecordedForward& forward : history_) {
    const std::vector<std::vector<int64_t>> slots =
        ReadTableSlots(forward.table, SpansOf(forward), stream);
    std::vector<std::vector<int64_t>> translated;
    if (translate) translated = TranslateSlots(slot_table, slots, stream);
    const std::vector<std::vector<int64_t>>& group_slots = translate ? translated : slots;
    for (size_t r = 0; r < slots.size(); ++r) {
      for (int64_t p = 0; p < static_cast<int64_t>(slots[r].size()); ++p) {
        const auto it = violations_of_slot.find(group_slots[r][p]);
        if (it == violations_of_slot.end()) continue;
        for (const size_t v : it->second) {
          Add(forward, r, rows[v], slots[r][p], p);
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
  MatchGroup(rows, /*swa=*/false, matched, stream);
  MatchGroup(rows, /*swa=*/true, matched, stream);
  for (size_t v = 0; v < rows.size(); ++v) {
    // A HEAD/TAIL row came from a row of these batches, yet no table names its slot now (an entry
    // changed since the forward read it, or an SWA slot without the SWA table): every recorded
    // row is taken. A sweep row touches only the requests that hold its slot.
    if (!matched[v] && !IsSweepRow(rows[v])) AddEveryRow(&rows[v], false);
  }
  if (ring_overflow) AddEveryRow(nullptr, true);
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  return touched_;
}

void AffectedRequestTracker::Add(const RecordedForward& forward, size_t row,
                                 const ViolationRow& violation, int64_t slot, int64_t position) {
  const int64_t req = forward.req_pool_indices[row];
  AffectedRequest& affected = pending_[req];
  affected.req_pool_idx = req;
  affected.step = std::max(affected.step, forward.step);
  affected.fail_reason_bits |= violation.fail_reason_bits;
  bool seen = false;
  for (size_t i = 0; i < affected.slots.size(); ++i) {
    seen = seen || (affected.slots[i] == slot && affected.positions[i] == position);
  }
  if (!seen) {
    affected.slots.push_back(slot);
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
