// The GPU's global nanosecond timer (%globaltimer): one clock for every SM, unlike clock64, so a
// wall-clock limit read from it holds wherever a thread runs.
#pragma once

#include <cstdint>

namespace kvcanary::cuda {

__device__ inline uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

}  // namespace kvcanary::cuda
