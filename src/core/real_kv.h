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

// The byte offset of `slot`'s strip within one layer of a source; -1 when the strip's row lies
// outside the source (D7). A token-granular source (page size 1, the common case) needs no
// division: a 64-bit divide per strip is a visible share of the CPU verify's arithmetic.
// REQUIRES: slot >= 0.
KVC_HOST_DEVICE int64_t StripOffset(const RealKvSourceParams& source, int64_t slot) {
  const bool token_granular = source.page_size == 1;
  const int64_t row = token_granular ? slot : slot / source.page_size;
  if (row >= source.rows) return -1;
  const int64_t in_page = token_granular ? 0 : slot % source.page_size;
  return row * source.row_stride_bytes + in_page * source.num_bytes_per_token;
}

// The fold of one layer's strip for `slot`; 0 when the strip's row lies outside the source (D7).
// REQUIRES: slot >= 0, 0 <= layer < source.num_layers.
KVC_HOST_DEVICE uint64_t SourceHash(const RealKvSourceParams& source, int64_t slot,
                                    int64_t layer = 0) {
  const int64_t offset = StripOffset(source, slot);
  if (offset < 0) return 0;
  const uint8_t* strip = LayerBase(source, layer) + offset;
  uint64_t acc = 0;
  for (int64_t at = 0; at < source.fold_bytes; at += kRealKvBlockBytes) {
    uint64_t lo, hi;
    LoadBlock16(strip + at, &lo, &hi);
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
