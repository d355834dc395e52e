// The fake engine's MLA and NSA pools (FakeEngineOptions::edit_full_group). An MLA pool keeps one
// latent buffer per layer: the engine's K layers stand for it and its V bytes go unread. An NSA
// pool adds the sparse-attention indexer's key buffer (FakeIndexer), one layer, filled once.
#pragma once

#include <cstdint>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/fake_engine.h"
#include "runtime/mirrored_buffer.h"

namespace kvcanary::runtime::testing {

// `full` as a latent pool of `layout`: its K layers are the latent layers, no V half.
inline void MakeLatent(GroupSpec& full, PoolLayout layout) {
  full.layout = layout;
  full.v_layer0 = TensorView();
  full.v_layers.clear();
}

// The FULL group as an MLA pool.
inline void UseMlaLayout(FakeEngineOptions& options) {
  options.edit_full_group = [](GroupSpec& full) { MakeLatent(full, PoolLayout::kMla); };
}

// The indexer's key buffer of an NSA pool: [num_slots, bytes_per_token] uint8 of fixed bytes
// (the engine never rewrites them), so any later change is a corruption.
class FakeIndexer {
 public:
  FakeIndexer(Device device, int64_t num_slots, int64_t bytes_per_token)
      : num_slots_(num_slots),
        bytes_per_token_(bytes_per_token),
        keys_(device, num_slots * bytes_per_token) {
    for (int64_t i = 0; i < num_slots * bytes_per_token; ++i) {
      keys_.host<uint8_t>()[i] = static_cast<uint8_t>(Splitmix64(static_cast<uint64_t>(i)));
    }
    keys_.UploadAll(nullptr);
    SynchronizeStream(device, nullptr);
  }

  TensorView Layer() const {
    return keys_.device_buffer().View(DType::kUInt8, {num_slots_, bytes_per_token_});
  }
  int64_t bytes_per_token() const { return bytes_per_token_; }

  // Flips one key byte of `slot` on the engine's stream, as a stray write would.
  void FlipByte(const FakeEngine& engine, int64_t slot, int64_t byte) {
    engine.Synchronize();
    const int64_t offset = slot * bytes_per_token_ + byte;
    keys_.host<uint8_t>()[offset] ^= 0xFF;
    keys_.Upload(offset, 1, engine.stream());
    engine.Synchronize();
  }

 private:
  int64_t num_slots_;
  int64_t bytes_per_token_;
  MirroredBuffer keys_;
};

// The FULL group as an NSA pool: MLA plus `indexer` (which must outlive the engine).
inline void UseNsaLayout(FakeEngineOptions& options, const FakeIndexer& indexer) {
  options.edit_full_group = [&indexer](GroupSpec& full) {
    MakeLatent(full, PoolLayout::kNsa);
    full.indexer_layers = {indexer.Layer()};
    full.indexer_bytes_per_token = indexer.bytes_per_token();
  };
}

}  // namespace kvcanary::runtime::testing
