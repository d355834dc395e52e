// The fake engine's compressed pool (DeepSeek-V4 style): one compressed slot per `ratio`
// positions of a request, filled when the token closing the group (position % ratio == ratio - 1)
// is written, a full->compressed table (int64 [full slots + 1], 0 = the full slot closes no
// compressed slot) and a LIFO free list, so a freed compressed slot is the next one handed out.
// The FULL group describes it (Describe); a test steps the engine with CompressedStep.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/fake_engine.h"
#include "runtime/mirrored_buffer.h"

namespace kvcanary::runtime::testing {

class FakeCompressedPool {
 public:
  FakeCompressedPool(Device device, int64_t full_slots, int64_t ratio, int64_t bytes_per_token)
      : full_slots_(full_slots),
        ratio_(ratio),
        slots_(full_slots / ratio + 1),
        bytes_per_token_(bytes_per_token),
        lut_(device, 8 * (full_slots + 1)),
        bytes_(device, slots_ * bytes_per_token) {
    for (int64_t slot = slots_ - 1; slot >= 1; --slot) free_.push_back(slot);
  }

  // Makes `full` the group of this pool: its slots, its one latent-like layer, its table.
  void Describe(GroupSpec& full) const {
    full.compress_ratio = ratio_;
    full.full_to_compressed = lut_.device_buffer().View(DType::kInt64, {full_slots_ + 1});
    full.num_slots = slots_;
    full.k_layer0 = bytes_.device_buffer().View(DType::kUInt8, {slots_, bytes_per_token_});
    full.v_layer0 = TensorView();
    full.bytes_per_token = bytes_per_token_;
  }

  // The model's compression of a step: each token closing a group of `ratio` positions gets the
  // next free compressed slot, mapped from its full slot, and that slot's bytes.
  void Compress(const PreparedStep& step) {
    for (size_t i = 0; i < step.slots.size(); ++i) {
      if ((step.positions[i] + 1) % ratio_ != 0) continue;
      const int64_t slot = free_.back();
      free_.pop_back();
      Lut()[step.slots[i]] = slot;
      for (int64_t b = 0; b < bytes_per_token_; ++b) {
        const uint64_t word = Splitmix64(static_cast<uint64_t>(step.ids[i] * 31 + b));
        Bytes(slot)[b] = static_cast<uint8_t>(word >> (8 * (b % 8)));
      }
    }
  }

  // The stale-mapping bug: frees the compressed slot of `full_slot` but leaves the table pointing
  // at it, so the next closing token's compressed KV lands where this one's is still read.
  int64_t FreeKeepingStaleEntry(int64_t full_slot) {
    const int64_t slot = Lut()[full_slot];
    free_.push_back(slot);
    return slot;
  }
  // The wrong-mapping bug: `full_slot` now names another compressed slot.
  void Remap(int64_t full_slot, int64_t compressed_slot) { Lut()[full_slot] = compressed_slot; }
  int64_t CompressedSlotOf(int64_t full_slot) const { return Lut()[full_slot]; }
  uint8_t* Bytes(int64_t slot) const { return bytes_.host<uint8_t>() + slot * bytes_per_token_; }

  // Enqueues the table and the bytes host -> device (nothing on the CPU).
  void Upload(StreamHandle stream) const {
    lut_.UploadAll(stream);
    bytes_.UploadAll(stream);
  }

 private:
  int64_t* Lut() const { return lut_.host<int64_t>(); }

  int64_t full_slots_;
  int64_t ratio_;
  int64_t slots_;
  int64_t bytes_per_token_;
  MirroredBuffer lut_, bytes_;
  std::vector<int64_t> free_;
};

// One eager step of `engine` with the compressed pool beside its full pool: the compression and
// the table land before phase 1, as the model's writes do before the TAIL.
inline void CompressedStep(FakeEngine& engine, FakeCompressedPool& pool) {
  const PreparedStep step = engine.PrepareStep();
  pool.Compress(step);
  pool.Upload(engine.stream());
  engine.RunStep(step);
}

}  // namespace kvcanary::runtime::testing
