// The fake engine's sliding-window pool (FakeEngineOptions::swa_window > 0), the way a hybrid
// SWA engine keeps one: its own slots with one layer of K and V bytes, a full->SWA table (int64
// [full slots + 1], 0 = not resident) and a LIFO free list, so a freed SWA slot is the next one
// handed out. Slot 0 is the padding slot and never handed out.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/mirrored_buffer.h"

namespace kvcanary::runtime::testing {

class FakeSwaPool {
 public:
  FakeSwaPool(Device device, int64_t full_slots, int64_t swa_slots, int64_t bytes_per_token)
      : full_slots_(full_slots),
        swa_slots_(swa_slots),
        bytes_per_token_(bytes_per_token),
        lut_(device, 8 * (full_slots + 1)),
        k_(device, swa_slots * bytes_per_token),
        v_(device, swa_slots * bytes_per_token) {
    for (int64_t slot = swa_slots - 1; slot >= 1; --slot) free_.push_back(slot);
  }

  // The SWA group the runtime installs over this pool.
  GroupSpec Spec() const {
    GroupSpec spec;
    spec.kind = GroupKind::kSwa;
    spec.num_slots = swa_slots_;
    spec.k_layer0 = k_.device_buffer().View(DType::kUInt8, {swa_slots_, bytes_per_token_});
    spec.v_layer0 = v_.device_buffer().View(DType::kUInt8, {swa_slots_, bytes_per_token_});
    spec.bytes_per_token = bytes_per_token_;
    spec.full_to_swa = lut_.device_buffer().View(DType::kInt64, {full_slots_ + 1});
    return spec;
  }

  // Gives the token in `full_slot` the next free SWA slot and maps it.
  int64_t Assign(int64_t full_slot) {
    const int64_t swa_slot = free_.back();
    free_.pop_back();
    Lut()[full_slot] = swa_slot;
    return swa_slot;
  }
  // The token in `full_slot` left the window: its SWA slot returns to the free list.
  void Release(int64_t full_slot) {
    const int64_t swa_slot = Lut()[full_slot];
    if (swa_slot == 0) return;
    Lut()[full_slot] = 0;
    free_.push_back(swa_slot);
  }
  // Releases the SWA slots of positions [0, first_kept) of a req_to_token row.
  void ReleaseBefore(const int32_t* row_slots, int64_t first_kept) {
    for (int64_t pos = 0; pos < first_kept; ++pos) Release(row_slots[pos]);
  }
  // The swa_lut_stale bug: frees the SWA slot of `full_slot` but leaves the table pointing at it.
  int64_t FreeKeepingStaleEntry(int64_t full_slot) {
    const int64_t swa_slot = Lut()[full_slot];
    free_.push_back(swa_slot);
    return swa_slot;
  }
  int64_t SwaSlotOf(int64_t full_slot) const { return Lut()[full_slot]; }

  // The host bytes of an SWA slot's K and V.
  uint8_t* K(int64_t swa_slot) const { return k_.host<uint8_t>() + swa_slot * bytes_per_token_; }
  uint8_t* V(int64_t swa_slot) const { return v_.host<uint8_t>() + swa_slot * bytes_per_token_; }

  // Enqueues the table and the pool host -> device (nothing on the CPU).
  void Upload(StreamHandle stream) const {
    lut_.UploadAll(stream);
    k_.UploadAll(stream);
    v_.UploadAll(stream);
  }

 private:
  int64_t* Lut() const { return lut_.host<int64_t>(); }

  int64_t full_slots_;
  int64_t swa_slots_;
  int64_t bytes_per_token_;
  MirroredBuffer lut_, k_, v_;
  std::vector<int64_t> free_;
};

}  // namespace kvcanary::runtime::testing
