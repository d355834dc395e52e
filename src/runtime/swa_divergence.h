// The SWA divergence diagnostic (Config::swa_divergence_stats_interval): every N outer steps, how
// far the SWA group's state has drifted from what the FULL group says about the live rows of the
// step. The counting is pure host arithmetic over copies read from the device, so it is tested
// without a runtime; CanaryManager::Impl::ReportSwaDivergence (swa_divergence.cpp) reads the
// copies at EndStep and logs the line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary::runtime {

// One report. Positions are those of the live rows, [0, seq_len) each; the window of a row is
// its last W positions [seq_len - W, seq_len), the ones the SWA group's next verify reads.
struct SwaDivergenceCounts {
  int64_t rows = 0;              // live rows examined
  int64_t positions = 0;         // their positions with a full slot (slot 0 is padding)
  int64_t window_positions = 0;  // of those, inside the window
  // Inside the window, mapped, and the SWA record at the mapped slot disagrees with the FULL
  // record at the full slot on token or position (or the mapped slot lies outside the SWA pool):
  // the table points at an SWA slot that holds another token. 0 in a healthy engine.
  int64_t record_mismatches = 0;
  // Inside the window but mapped to 0: positions the SWA group's verify silently skips.
  int64_t unmapped_in_window = 0;
  // Mapped to an SWA slot whose number differs from the full slot's: the two allocators have
  // drifted apart (normal once slots recycle; SGLang's swa_full_idx_divergence).
  int64_t remapped = 0;
  // Before the window and mapped to 0: evicted as expected.
  int64_t out_of_window = 0;
};

// Items [first, first + count) of a device array, copied to the host: `words` int64 per item.
struct HostSlice {
  int64_t first = 0;
  int64_t count = 0;
  int64_t words = 1;
  std::vector<int64_t> data;

  bool Contains(int64_t index) const { return index >= first && index < first + count; }
  // REQUIRES: Contains(index).
  const int64_t* At(int64_t index) const { return data.data() + (index - first) * words; }
};

// Counts one report. `row_slots` holds each live row's full slot per position; `lut` the
// full->SWA table over (at least) those slots; `full_records` / `swa_records` the TAIL K records
// (words = 4: token, position, ...) over the full slots and over the mapped SWA slots of the
// window. A full slot outside `lut` or `full_records` is not counted.
SwaDivergenceCounts CountSwaDivergence(const std::vector<std::vector<int64_t>>& row_slots,
                                       int64_t window, const HostSlice& lut,
                                       const HostSlice& full_records, const HostSlice& swa_records);

// "kv-canary: swa divergence: step=12 rows=3 window_positions=24 record_mismatches=0
//  unmapped_in_window=0 remapped=5 out_of_window=10" (one line).
std::string FormatSwaDivergenceLine(int64_t step, const SwaDivergenceCounts& counts);

}  // namespace kvcanary::runtime
