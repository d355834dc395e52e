// VerifyKernel: one grid-stride pass over the active plan entries (spec/kernels.md §8). Each entry
// is independent: its two record loads and the real-KV fold run in parallel across the grid, and
// the grid fills every SM whatever the batch, so the kernel runs at memory speed.
#pragma once

#include "core/verify_math.h"
#include "core/wrap.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kVerifyThreads = 256;

__global__ void __launch_bounds__(kVerifyThreads) VerifyKernel(const VerifyParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const bool enabled = *p.enable != 0;
  const int64_t n = enabled ? ClampCount(*p.num_valid, p.capacity) : 0;  // D2
  if (first == 0) {
    AddToCounter(p.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (enabled) AddToCounter(p.launch.slot_run_counter, n);
  }
  for (int64_t e = first; e < n; e += stride) {
    ViolationRow row;
    if (CheckVerifyEntry(p, e, &row) != 0) RecordViolation(p.launch, row);
  }
}

// Enqueues the verify of `p` on `stream`. REQUIRES: validated params; the current device is the
// tensors' device.
inline cudaError_t LaunchVerify(const VerifyParams& p, cudaStream_t stream) {
  const int blocks = PersistentGrid(VerifyKernel, kVerifyThreads, p.capacity);
  VerifyKernel<<<blocks, kVerifyThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
