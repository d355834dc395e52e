#include "sim/swa_state.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kvcanary/checked.h"

namespace kvcanary::sim {

SwaState::SwaState(Device device, int64_t full_slots, int64_t swa_slots, int num_layers,
                   int64_t bytes_per_token, int64_t window, StreamHandle stream)
    : device_(device),
      window_(window),
      stream_(stream),
      pool_(std::make_unique<KvPool>(device, swa_slots, num_layers, bytes_per_token, stream)),
      allocator_(swa_slots),
      lut_device_(device,
                  CheckedMul("SWA lookup bytes", 8, CheckedAdd("full slots", full_slots, 1))),
      lut_(full_slots + 1, 0),
      last_lut_(full_slots + 1, 0),
      contents_(swa_slots, {0, 0}) {}

TensorView SwaState::LutView() const {
  return lut_device_.View(DType::kInt64, {static_cast<int64_t>(lut_.size())});
}

void SwaState::Assign(int64_t id, int64_t position, int64_t kv_position, int64_t full_slot,
                      int64_t token) {
  std::optional<std::vector<int64_t>> slot = allocator_.Allocate(1);
  // Options validation sizes the SWA pool for every running window plus a prefill budget.
  if (!slot) throw std::logic_error("kv-canary sim: the SWA pool ran out of slots");
  const int64_t swa_slot = slot->front();
  lut_[full_slot] = swa_slot;
  last_lut_[full_slot] = swa_slot;
  pool_->WriteToken(swa_slot, token, kv_position);
  contents_[swa_slot] = {token, kv_position};
  windows_[id].push_back(Entry{position, full_slot, swa_slot});
}

void SwaState::Release(const Entry& entry) {
  // Another token may own the full slot by now (a fault freed it): leave its mapping alone.
  if (lut_[entry.full_slot] == entry.swa_slot) lut_[entry.full_slot] = 0;
  allocator_.Free({entry.swa_slot});
}

void SwaState::ReleaseBefore(int64_t id, int64_t first_kept) {
  auto it = windows_.find(id);
  if (it == windows_.end()) return;
  std::deque<Entry>& entries = it->second;
  while (!entries.empty() && entries.front().position < first_kept) {
    Release(entries.front());
    entries.pop_front();
  }
}

void SwaState::ReleaseAll(int64_t id, const std::vector<int64_t>& keep) {
  auto it = windows_.find(id);
  if (it == windows_.end()) return;
  for (const Entry& entry : it->second) {
    if (std::find(keep.begin(), keep.end(), entry.swa_slot) != keep.end()) continue;
    Release(entry);
  }
  windows_.erase(it);
}

int64_t SwaState::FreeKeepingStaleEntry(int64_t id, int64_t position) {
  auto it = windows_.find(id);
  if (it == windows_.end()) return -1;
  std::deque<Entry>& entries = it->second;
  for (auto entry = entries.begin(); entry != entries.end(); ++entry) {
    if (entry->position != position) continue;
    const int64_t swa_slot = entry->swa_slot;
    allocator_.Free({swa_slot});  // the bug: the table entry still points here
    entries.erase(entry);
    return swa_slot;
  }
  return -1;
}

void SwaState::Upload() {
  runtime::CopyBytesAsync(lut_device_.data(), lut_.data(), 8 * static_cast<int64_t>(lut_.size()),
                          device_, stream_);
}

}  // namespace kvcanary::sim
