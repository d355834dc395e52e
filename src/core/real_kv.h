// The real-KV fingerprint of one slot, shared by both backends.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "core/record.h"
#include "kvcanary/hash.h"

namespace kvcanary {

// The fold of one source's strip for `slot`; 0 when the strip's row lies outside the source (D7).
// REQUIRES: slot >= 0.
KVC_HOST_DEVICE uint64_t SourceHash(const RealKvSourceParams& source, int64_t slot) {
  const int64_t row = slot / source.page_size;
  if (row >= source.rows) return 0;
  const uint8_t* strip = source.data + row * source.row_stride_bytes +
                         (slot % source.page_size) * source.num_bytes_per_token;
  uint64_t acc = 0;
  for (int64_t offset = 0; offset < source.fold_bytes; offset += kRealKvBlockBytes) {
    uint64_t lo, hi;
    LoadBlock16(strip + offset, &lo, &hi);
    acc = FoldRealKvBlock(acc, lo, hi);
  }
  return acc;
}

// real_kv_hash(sources, mode, slot): 0 with no sources (mode NONE is passed as no sources).
KVC_HOST_DEVICE uint64_t RealKvFingerprint(const RealKvParams& real_kv, int64_t slot) {
  if (real_kv.num_sources == 0) return 0;
  uint64_t acc = 0;
  for (int32_t i = 0; i < real_kv.num_sources; ++i) {
    acc = CombineSourceHash(acc, SourceHash(real_kv.sources[i], slot));
  }
  return acc;
}

}  // namespace kvcanary
