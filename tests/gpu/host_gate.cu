// The kernel behind HostGate. host_gate.h declares its launcher; it is not included here, so nvcc
// never compiles GoogleTest (a mismatch fails at link time).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/global_timer.cuh"

namespace kvcanary::testing {
namespace {

// The volatile load reads the host's memory on every iteration, so the host's store is seen.
__global__ void WaitForHostKernel(const volatile int32_t* open, int32_t* timed_out,
                                  uint64_t limit_ns) {
  const uint64_t start = cuda::GlobalTimerNs();
  while (*open == 0) {
    if (cuda::GlobalTimerNs() - start >= limit_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(200);  // spares the bus; an open gate is still seen within a microsecond
  }
}

}  // namespace

cudaError_t LaunchWaitForHost(const int32_t* open, int32_t* timed_out, int64_t limit_ns,
                              cudaStream_t stream) {
  WaitForHostKernel<<<1, 1, 0, stream>>>(open, timed_out, static_cast<uint64_t>(limit_ns));
  return cudaGetLastError();
}

}  // namespace kvcanary::testing
