// The real-KV fingerprint of one slot, shared by both backends.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/record.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// The base of layer `layer` of a source: `data` for a single-layer source.
KVC_HOST_DEVICE const uint8_t* LayerBase(const RealKvSourceParams& source, int64_t layer) {
  if (source.layer_addresses == nullptr) return source.data;
  return reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(source.layer_addresses[layer]));
}

// The fold of one layer's strip for `slot`; 0 when the strip's row lies outside the source (D7).
// REQUIRES: slot >= 0, 0 <= layer < source.num_layers.
KVC_HOST_DEVICE uint64_t SourceHash(const RealKvSourceParams& source, int64_t slot,
                                    int64_t layer = 0) {
  const int64_t row = slot / source.page_size;
  if (row >= source.rows) return 0;
  const uint8_t* strip = LayerBase(source, layer) + row * source.row_stride_bytes +
                         (slot % source.page_size) * source.num_bytes_per_token;
  uint64_t acc = 0;
  for (int64_t offset = 0; offset < source.fold_bytes; offset += kRealKvBlockBytes) {
    uint64_t lo, hi;
    LoadBlock16(strip + offset, &lo, &hi);
    acc = FoldRealKvBlock(acc, lo, hi);
  }
  return acc;
}

// real_kv_hash(sources, mode, slot): 0 with no sources (mode NONE is passed as no sources). Each
// layer of a source is combined as a source of its own, so one source of N layers gives exactly
// the hash of N single-layer sources listed in the same order.
KVC_HOST_DEVICE uint64_t RealKvFingerprint(const RealKvParams& real_kv, int64_t slot) {
  if (real_kv.num_sources == 0) return 0;
  uint64_t acc = 0;
  for (int32_t i = 0; i < real_kv.num_sources; ++i) {
    const RealKvSourceParams& source = real_kv.sources[i];
    for (int64_t layer = 0; layer < source.num_layers; ++layer) {
      acc = CombineSourceHash(acc, SourceHash(source, slot, layer));
    }
  }
  return acc;
}

}  // namespace kvcanary
