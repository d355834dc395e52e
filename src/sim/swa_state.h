// SwaState: the sliding-window half of a hybrid pool (--swa-window W). Sliding-window layers keep
// their own smaller KV pool; a full->SWA table maps each full-pool slot whose token is inside
// some request's window to its SWA slot (0 = not resident). Tokens get an SWA slot when their KV
// is written and give it back when they leave the window, as SGLang's hybrid SWA pool does.
//
// The table lives on the engine's device (the canary's plan and write read it there); the host
// copy is authoritative and Upload() makes the device equal.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "sim/kv_pool.h"
#include "sim/slot_allocator.h"

namespace kvcanary::sim {

class SwaState {
 public:
  SwaState(Device device, int64_t full_slots, int64_t swa_slots, int num_layers,
           int64_t bytes_per_token, int64_t window, StreamHandle stream);

  int64_t window() const { return window_; }
  KvPool& pool() { return *pool_; }
  const KvPool& pool() const { return *pool_; }
  // int64 [full_slots + 1] on the device.
  TensorView LutView() const;
  int64_t SwaSlotOf(int64_t full_slot) const { return lut_[full_slot]; }
  // The SWA slot the full slot mapped to most recently, even after it left the window: violation
  // rows name SWA slots a step after the table mapped them, and the window may have moved since.
  int64_t LastSwaSlotOf(int64_t full_slot) const { return last_lut_[full_slot]; }

  // Gives the token at `position` of request `id` (KV in full slot `full_slot`) an SWA slot and
  // writes its sliding-window KV there, computed at `kv_position` (the position the forward
  // used: different from `position` only when a fault bent it).
  void Assign(int64_t id, int64_t position, int64_t kv_position, int64_t full_slot,
              int64_t token);
  // Returns the SWA slots of request `id`'s positions below `first_kept` (they left the window).
  void ReleaseBefore(int64_t id, int64_t first_kept);
  // Returns every SWA slot of request `id` (finished or aborted), except `keep`.
  void ReleaseAll(int64_t id, const std::vector<int64_t>& keep = {});
  // The swa_lut_stale bug: frees the SWA slot of request `id`'s `position` but leaves the table
  // entry pointing at it. Returns the freed SWA slot, or -1 when the position holds none.
  int64_t FreeKeepingStaleEntry(int64_t id, int64_t position);
  // (token, position) last written into an SWA slot.
  std::pair<int64_t, int64_t> SlotContent(int64_t swa_slot) const { return contents_[swa_slot]; }

  void Upload();

 private:
  struct Entry {
    int64_t position;
    int64_t full_slot;
    int64_t swa_slot;
  };
  void Release(const Entry& entry);

  Device device_;
  int64_t window_;
  StreamHandle stream_;
  std::unique_ptr<KvPool> pool_;
  SlotAllocator allocator_;
  runtime::DeviceBuffer lut_device_;
  std::vector<int64_t> lut_;
  std::vector<int64_t> last_lut_;
  std::vector<std::pair<int64_t, int64_t>> contents_;
  std::map<int64_t, std::deque<Entry>> windows_;  // by request id, ascending positions
};

}  // namespace kvcanary::sim
