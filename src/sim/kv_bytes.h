// The simulator's "model weights": the fixed KV content of a token. A real engine computes K and V
// from the token and everything before it; the simulator only needs content that is a fixed,
// cheap, deterministic function of (token, position, layer, K or V), so that the same sequence
// always produces the same bytes and the oracle model can recompute them without the cache.
#pragma once

#include <cstdint>
#include <cstring>

#include "kvcanary/hash.h"

namespace kvcanary::sim {

// K or V half of a layer.
inline constexpr int kKeyHalf = 0;
inline constexpr int kValueHalf = 1;

// Writes the `bytes_per_token` KV bytes of `token` at `position` in `layer`, half `kv` (0 = K,
// 1 = V), to `out`. Word w (8 bytes, little-endian) is splitmix64 of a per-row seed plus w times
// the golden-ratio increment, so every byte of every word depends on all four inputs: a changed
// token or position changes the first 16 bytes (the real-data PARTIAL strip) too.
// A trailing partial word takes the low bytes of its value.
inline void FillKvBytes(int64_t token, int64_t position, int layer, int kv, uint8_t* out,
                        int64_t bytes_per_token) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  // Mix3 first, so (token, position) pairs cannot alias through linear combinations; the layer
  // and half share the third input (two bits per layer leave room for K and V).
  const uint64_t seed =
      Splitmix64Mix3(ToUnsigned(token), ToUnsigned(position),
                     (static_cast<uint64_t>(layer) << 1) | static_cast<uint64_t>(kv & 1));
  int64_t offset = 0;
  for (uint64_t w = 1; offset < bytes_per_token; ++w, offset += 8) {
    const uint64_t word = Splitmix64(seed + w * kGolden);
    uint8_t bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<uint8_t>(word >> (8 * b));
    const int64_t n = bytes_per_token - offset < 8 ? bytes_per_token - offset : 8;
    std::memcpy(out + offset, bytes, static_cast<size_t>(n));
  }
}

}  // namespace kvcanary::sim
