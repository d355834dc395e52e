// The compressed pool beside the full pool (--compress-ratio R > 1), DeepSeek-V4 style: full slot s
// with (s + 1) % R == 0 closes compressed slot s / R, whose bytes the model writes with that
// token's. The full->compressed table (int64 [full slots + 1], 0 = closes none) lives on the
// device for the canary, whose FULL group is this pool; a fault edits one of its entries.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::sim {

class CompressedState {
 public:
  CompressedState(Device device, int64_t full_slots, int64_t ratio, int64_t bytes_per_token,
                  StreamHandle stream);

  // Makes `full` the group of this pool: its slots, its one layer of bytes, its table.
  void Describe(runtime::GroupSpec& full) const;
  // The model's write of `token` at `position` into full slot `full_slot`: the compressed bytes
  // when the slot closes a compressed slot.
  void Write(int64_t full_slot, int64_t token, int64_t position);

  // The compressed slot full slot `full_slot` closes (0: none), as the table is built.
  int64_t ClosedBy(int64_t full_slot) const;
  // The table's entry now (a fault may have changed it), and its change (host and device).
  int64_t Entry(int64_t full_slot) const { return table_[full_slot]; }
  void SetEntry(int64_t full_slot, int64_t compressed_slot);
  // The full slots whose entry names `compressed_slot` now, ascending (none for the padding slot
  // 0): where a violation at a compressed slot sits in the full pool. The slot that closes it as
  // built, plus the edited entries: no scan of the table, which the fault explainer's per-violation
  // calls would otherwise make once per open injection.
  std::vector<int64_t> FullSlotsNaming(int64_t compressed_slot) const;
  int64_t ratio() const { return ratio_; }
  int64_t num_slots() const { return slots_; }

 private:
  Device device_;
  StreamHandle stream_;
  int64_t full_slots_;
  int64_t ratio_;
  int64_t slots_;
  int64_t bytes_per_token_;
  std::vector<int64_t> table_;
  std::set<int64_t> edited_;  // the full slots whose entry SetEntry changed from ClosedBy's
  std::vector<uint8_t> bytes_;
  runtime::DeviceBuffer table_device_;
  runtime::DeviceBuffer bytes_device_;
};

}  // namespace kvcanary::sim
