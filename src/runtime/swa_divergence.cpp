// The SWA divergence diagnostic: the counting (pure host arithmetic) and the runtime's report at
// EndStep. The report reads the table rows, the full->SWA table and the two groups' TAIL K
// records back synchronously: it runs only every Config::swa_divergence_stats_interval outer
// steps, on the host, outside any captured graph, so the hot path never waits for it.
#include "runtime/swa_divergence.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "runtime/canary_impl.h"
#include "runtime/token_table.h"

namespace kvcanary::runtime {
namespace {

// Items [lo, hi] of a device array; empty when hi < lo.
struct SlotRange {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = -1;
  void Add(int64_t slot) {
    lo = std::min(lo, slot);
    hi = std::max(hi, slot);
  }
};

// The first position of a row's window (positions before it have left the window).
int64_t WindowBegin(int64_t seq_len, int64_t window) {
  return std::max<int64_t>(0, seq_len - window);
}

// A record is [token, position, prev_hash, real_kv_hash]: the two groups write the same token
// and position for a token; the hashes differ by construction (other chain, other pool).
bool SameTokenAndPosition(const int64_t* a, const int64_t* b) {
  return a[0] == b[0] && a[1] == b[1];
}

// The full slots the rows use, inside [1, bound): slot 0 is the padding slot.
SlotRange FullSlotRange(const std::vector<std::vector<int64_t>>& row_slots, int64_t bound) {
  SlotRange range;
  for (const std::vector<int64_t>& slots : row_slots) {
    for (const int64_t slot : slots) {
      if (slot > 0 && slot < bound) range.Add(slot);
    }
  }
  return range;
}

// The SWA slots the windows map to, inside [1, swa_slots).
SlotRange WindowSwaSlotRange(const std::vector<std::vector<int64_t>>& row_slots, int64_t window,
                             const HostSlice& lut, int64_t swa_slots) {
  SlotRange range;
  for (const std::vector<int64_t>& slots : row_slots) {
    const int64_t length = static_cast<int64_t>(slots.size());
    for (int64_t p = WindowBegin(length, window); p < length; ++p) {
      if (!lut.Contains(slots[p])) continue;
      const int64_t mapped = *lut.At(slots[p]);
      if (mapped > 0 && mapped < swa_slots) range.Add(mapped);
    }
  }
  return range;
}

// Enqueues the copy of `range` of `base` (`words` int64 per item) on `stream`; the caller
// synchronises before reading the slice.
HostSlice EnqueueSlice(const void* base, int64_t words, const SlotRange& range, Device device,
                       StreamHandle stream) {
  HostSlice slice;
  slice.words = words;
  if (range.hi < range.lo) return slice;
  slice.first = range.lo;
  slice.count = range.hi - range.lo + 1;
  slice.data.resize(slice.count * words);
  const int64_t item_bytes = 8 * words;
  CopyBytesAsync(slice.data.data(), static_cast<const char*>(base) + range.lo * item_bytes,
                 slice.count * item_bytes, device, stream);
  return slice;
}

// Counts one in-window position whose table entry is `mapped`.
void CountWindowPosition(int64_t full_slot, int64_t mapped, const HostSlice& full_records,
                         const HostSlice& swa_records, SwaDivergenceCounts& counts) {
  counts.window_positions += 1;
  if (mapped == 0) {
    counts.unmapped_in_window += 1;
  } else if (!swa_records.Contains(mapped) ||
             !SameTokenAndPosition(full_records.At(full_slot), swa_records.At(mapped))) {
    counts.record_mismatches += 1;
  }
}

}  // namespace

SwaDivergenceCounts CountSwaDivergence(const std::vector<std::vector<int64_t>>& row_slots,
                                       int64_t window, const HostSlice& lut,
                                       const HostSlice& full_records,
                                       const HostSlice& swa_records) {
  SwaDivergenceCounts counts;
  for (const std::vector<int64_t>& slots : row_slots) {
    counts.rows += 1;
    const int64_t length = static_cast<int64_t>(slots.size());
    const int64_t window_begin = WindowBegin(length, window);
    for (int64_t p = 0; p < length; ++p) {
      const int64_t slot = slots[p];
      if (slot <= 0 || !lut.Contains(slot) || !full_records.Contains(slot)) continue;
      counts.positions += 1;
      const int64_t mapped = *lut.At(slot);
      if (mapped != 0 && mapped != slot) counts.remapped += 1;
      if (p >= window_begin) {
        CountWindowPosition(slot, mapped, full_records, swa_records, counts);
      } else if (mapped == 0) {
        counts.out_of_window += 1;
      }
    }
  }
  return counts;
}

std::string FormatSwaDivergenceLine(int64_t step, const SwaDivergenceCounts& c) {
  std::ostringstream line;
  line << "kv-canary: swa divergence: step=" << step << " rows=" << c.rows
       << " window_positions=" << c.window_positions << " record_mismatches=" << c.record_mismatches
       << " unmapped_in_window=" << c.unmapped_in_window << " remapped=" << c.remapped
       << " out_of_window=" << c.out_of_window;
  return line.str();
}

void CanaryManager::Impl::ReportSwaDivergence() {
  const int64_t interval = config_.swa_divergence_stats_interval;
  if (interval <= 0 || step_.outer % interval != 0 || step_.num_forwards == 0) return;
  const GroupState* full = nullptr;
  const GroupState* swa = nullptr;
  for (const GroupState& group : groups_) {
    (group.spec.kind == GroupKind::kSwa ? swa : full) = &group;
  }
  if (full == nullptr || swa == nullptr) return;  // nothing to compare without both groups
  // The last inner forward holds the longest rows of the step.
  const ForwardState& forward = forwards_[step_.num_forwards - 1];
  const TokenTable table = ForwardTokenTable(table_, forward.batch);
  const std::vector<std::vector<int64_t>> row_slots =
      ReadTableSlots(table, LiveRowSpans(table, forward.host), stream_);
  const SlotRange fulls =
      FullSlotRange(row_slots, std::min(swa->spec.full_to_swa.length(), full->spec.num_slots));
  const HostSlice lut = EnqueueSlice(swa->spec.full_to_swa.data(), 1, fulls, device_, stream_);
  const HostSlice full_records =
      EnqueueSlice(full->Buffer(Stage::kTail, Half::kK).data(), 4, fulls, device_, stream_);
  SynchronizeStream(device_, stream_);
  const SlotRange mapped = WindowSwaSlotRange(row_slots, swa->window, lut, swa->spec.num_slots);
  const HostSlice swa_records =
      EnqueueSlice(swa->Buffer(Stage::kTail, Half::kK).data(), 4, mapped, device_, stream_);
  SynchronizeStream(device_, stream_);
  swa_divergence_.last = CountSwaDivergence(row_slots, swa->window, lut, full_records, swa_records);
  swa_divergence_.reports += 1;
  Log(LogLevel::kInfo, FormatSwaDivergenceLine(step_.outer, swa_divergence_.last));
}

}  // namespace kvcanary::runtime
