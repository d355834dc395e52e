// Quarantine's host side: which requests a reported violation touched. The runtime keeps the
// live rows of the last two steps' batches (the rows a report can come from: a report at the end
// of step N reads the rows of steps N - 1 and N) and matches each shown violation row to the rows
// whose table holds its slot among the positions they read or write; an SWA group's rows, and a
// compressed FULL group's, are matched through the group's slot table (full_to_swa,
// full_to_compressed), as its plan reads them (docs/quarantine.md states the rule).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/token_table.h"

namespace kvcanary::runtime {

// One forward of a step as the tracker keeps it: the table it read and its live rows.
struct RecordedForward {
  int64_t step = 0;
  TokenTable table;
  std::vector<int64_t> req_pool_indices;
  std::vector<int64_t> lengths;  // prefix_len + extend_len: the positions the row reads or writes
};

class AffectedRequestTracker {
 public:
  // Steps kept: the reported step and the one before it.
  static constexpr int64_t kHistorySteps = 2;

  // Keeps `forward`'s live rows (padding rows, req_pool_idx 0, are skipped) and drops the
  // forwards of steps older than kHistorySteps before `forward.step`.
  void Record(RecordedForward forward);
  // Adds the requests `rows` touch to the pending list; with `ring_overflow`, every recorded row.
  // Reads the recorded rows' table entries on `stream` (one synchronisation per recorded
  // forward). Returns the req_pool_idx of each request it added to, ascending, no repeats.
  std::vector<int64_t> Match(const std::vector<ViolationRow>& rows, bool ring_overflow,
                             StreamHandle stream);
  // The pending requests, ascending by req_pool_idx; the list is then empty.
  std::vector<AffectedRequest> Take();
  // The slot table of the FULL group (swa_group false: a compressed group's full_to_compressed)
  // or of the SWA group (full_to_swa), whose rows name slots of their own: each table slot is then
  // translated through it before matching, with the SwaTranslate op the plan's translation shares
  // (0 = no slot in the group, never matched). Without one, a FULL row matches the table's slots
  // as they are and an SWA row matches nothing (so it takes every recorded row). The view must
  // stay valid while rows are matched.
  void SetSlotTable(bool swa_group, const TensorView& full_to_group) {
    slot_tables_[swa_group ? 1 : 0] = full_to_group;
  }

 private:
  // Adds every row whose table holds the slot of a row of one group (FULL or SWA), translated
  // through the group's slot table when it has one; marks the rows matched.
  void MatchGroup(const std::vector<ViolationRow>& rows, bool swa, std::vector<bool>& matched,
                  StreamHandle stream);
  // Adds `violation` to the recorded row `row` of forward `forward`, with the table's `slot` at
  // `position` (a full-pool slot: for a compressed group, the one whose entry names the row's).
  void Add(const RecordedForward& forward, size_t row, const ViolationRow& violation, int64_t slot,
           int64_t position);
  // Every recorded row: for a violation no table names (null with a ring overflow).
  void AddEveryRow(const ViolationRow* violation, bool ring_overflow);

  std::deque<RecordedForward> history_;
  std::map<int64_t, AffectedRequest> pending_;
  std::vector<int64_t> touched_;  // req_pool_idx added to by the current Match
  TensorView slot_tables_[2];     // FULL, SWA
};

}  // namespace kvcanary::runtime
