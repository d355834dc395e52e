// The KV pool's slot allocator: a LIFO free list over slots 1..num_slots-1 (slot 0 is padding).
//
// LIFO reuse is deliberate: the slot freed last is the next one handed out, as in SGLang's token
// allocator (freed slots go to the front of its free list), so a request that keeps using a slot
// after it was freed sees it overwritten at once; that is the bug class `stale_slot_reuse` models.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kvcanary::sim {

// Thread safety: none.
//
// Invariants: every slot in 1..num_slots-1 is either free (in the free list, once) or handed out;
// slot 0 is never either. Misuse that would break this (freeing a free slot, slot 0, or a slot
// out of range) is an engine bug and throws std::logic_error without changing anything.
class SlotAllocator {
 public:
  // REQUIRES: num_slots >= 1 (one slot is only the padding slot: nothing to hand out).
  explicit SlotAllocator(int64_t num_slots);

  // `n` slots, or nullopt (and nothing taken) when fewer than `n` are free. A fresh allocator
  // hands out 1, 2, 3, ...; after Free({a, b, c}), Allocate(3) returns {a, b, c}.
  // REQUIRES: n >= 0.
  std::optional<std::vector<int64_t>> Allocate(int64_t n);
  // Returns the slots to the front of the free list, the first of `slots` first.
  // REQUIRES: every slot is handed out and appears once.
  void Free(const std::vector<int64_t>& slots);

  int64_t NumFree() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_slots() const { return static_cast<int64_t>(is_free_.size()); }
  // Whether `slot` is in the free list (false for slot 0 and for slots out of range).
  bool IsFree(int64_t slot) const;

 private:
  // A stack: the back is handed out next.
  std::vector<int64_t> free_;
  std::vector<bool> is_free_;
};

}  // namespace kvcanary::sim
