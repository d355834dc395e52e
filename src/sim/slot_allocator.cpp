#include "sim/slot_allocator.h"

#include <stdexcept>
#include <string>

namespace kvcanary::sim {

SlotAllocator::SlotAllocator(int64_t num_slots) {
  if (num_slots < 1) {
    throw std::logic_error("kv-canary sim: SlotAllocator needs num_slots >= 1, got " +
                           std::to_string(num_slots));
  }
  is_free_.assign(static_cast<size_t>(num_slots), true);
  is_free_[0] = false;
  // Pushed in reverse so that the first allocation hands out 1, 2, 3, ...
  free_.reserve(static_cast<size_t>(num_slots - 1));
  for (int64_t slot = num_slots - 1; slot >= 1; --slot) free_.push_back(slot);
}

std::optional<std::vector<int64_t>> SlotAllocator::Allocate(int64_t n) {
  if (n < 0) throw std::logic_error("kv-canary sim: Allocate(" + std::to_string(n) + ")");
  if (n > NumFree()) return std::nullopt;
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    slots[i] = free_.back();
    free_.pop_back();
    is_free_[slots[i]] = false;
  }
  return slots;
}

void SlotAllocator::Free(const std::vector<int64_t>& slots) {
  // Validate the whole list first, so a bad call changes nothing (a duplicate inside the list
  // counts as a double free).
  std::vector<int64_t> marked;
  auto fail = [&](const std::string& why) {
    for (int64_t slot : marked) is_free_[slot] = false;
    throw std::logic_error("kv-canary sim: SlotAllocator::Free: " + why);
  };
  for (int64_t slot : slots) {
    if (slot <= 0 || slot >= num_slots()) {
      fail("slot " + std::to_string(slot) + " is not an allocatable slot");
    }
    if (is_free_[slot]) fail("slot " + std::to_string(slot) + " is already free");
    is_free_[slot] = true;
    marked.push_back(slot);
  }
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) free_.push_back(*it);
}

bool SlotAllocator::IsFree(int64_t slot) const {
  return slot > 0 && slot < num_slots() && is_free_[slot];
}

}  // namespace kvcanary::sim
