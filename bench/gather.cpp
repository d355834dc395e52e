#include "bench/gather.h"

#include <cstring>

namespace kvcanary::bench {

uint64_t GatherOnHost(const GatherInputs& in, int64_t prefetch_distance) {
  uint64_t fold = 0;
#pragma omp parallel for reduction(^ : fold) schedule(static)
  for (int64_t e = 0; e < in.entries; ++e) {
    if (e + prefetch_distance < in.entries) {
      const int64_t ahead = in.slots[e + prefetch_distance];
      __builtin_prefetch(in.records + ahead * 32);
      if (in.strips != nullptr) __builtin_prefetch(in.strips + ahead * in.strip_stride);
    }
    const int64_t slot = in.slots[e];
    uint64_t word = 0;
    std::memcpy(&word, in.records + slot * 32, 8);
    if (in.strips != nullptr) {
      uint64_t strip = 0;
      std::memcpy(&strip, in.strips + slot * in.strip_stride, 8);
      word ^= strip;
    }
    fold ^= word;
  }
  return fold;
}

}  // namespace kvcanary::bench
