// See hold.h. The spin reads the global nanosecond timer, so its length does not depend on the
// SM clock.
#include <cuda_runtime.h>

#include <cstdint>

#include "bench/hold.h"

namespace kvcanary::bench {
namespace {

__global__ void HoldKernel(uint64_t nanoseconds) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  uint64_t now = start;
  while (now - start < nanoseconds) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
}

}  // namespace

int LaunchHold(double microseconds, void* stream) {
  HoldKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint64_t>(microseconds * 1e3));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvcanary::bench
