// SpinWaitKernel: one thread, one block. It reads the tick count when it runs (never at launch),
// so a graph that captured it spins for whatever the host copied in before the replay.
#pragma once

#include "cuda/global_timer.cuh"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

__global__ void SpinWaitKernel(const __grid_constant__ SpinWaitParams p) {
  int64_t ticks = *p.cycles;
  if (ticks <= 0) return;
  if (ticks > p.max_cycles) ticks = p.max_cycles;  // the bound no input can exceed
  // clock64 is this SM's cycle counter; one thread reads it before and after, so the difference
  // is the ticks spent. The volatile-free loop is kept by the asm volatile inside clock64. The
  // global timer bounds the spin in wall-clock time as well (kMaxSpinWaitNanoseconds): the tick
  // count alone would stretch with a low clock or a counter that does not advance as expected.
  const long long start = clock64();
  const uint64_t start_ns = GlobalTimerNs();
  const uint64_t max_ns = static_cast<uint64_t>(p.max_nanoseconds);
  while (clock64() - start < ticks) {
    if (GlobalTimerNs() - start_ns >= max_ns) return;
  }
}

inline cudaError_t LaunchSpinWait(const SpinWaitParams& p, cudaStream_t stream) {
  SpinWaitKernel<<<1, 1, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
