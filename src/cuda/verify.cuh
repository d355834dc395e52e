// VerifyKernel: one grid-stride pass over the active plan entries (spec/kernels.md §8). Each entry
// is independent: its record loads and the real-KV fold run in parallel across the grid, and the
// grid fills every SM whatever the batch, so the kernel runs at memory speed. A paired launch
// checks the K and V halves of a group in the same pass, reading each plan entry once; each half
// keeps its own counters and rows, so the result equals two separate launches.
#pragma once

#include "core/verify_math.h"
#include "core/wrap.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kVerifyThreads = 256;
inline constexpr int kEntriesPerThread = 4;


__global__ void __launch_bounds__(kVerifyThreads, 4) VerifyKernel(const __grid_constant__ VerifyHalves v) {
  const VerifyParams& p = v.half[0];  // the plan is shared by the halves
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const bool enabled = *p.enable != 0;
  const int64_t n = enabled ? ClampCount(*p.num_valid, p.capacity) : 0;  // D2
  if (first < v.num_halves) {
    AddToCounter(v.half[first].launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (enabled) AddToCounter(v.half[first].launch.slot_run_counter, n);
  }
  // Each thread checks kEntriesPerThread entries per round, first all their loads (no store can
  // come between them, so the compiler keeps every load in flight at once), then records the rare
  // failures, re-running the check of a failing entry to build its row.
  for (int64_t base = first; base < n; base += kEntriesPerThread * stride) {
    for (int h = 0; h < v.num_halves; ++h) {
      int64_t bits[kEntriesPerThread];
#pragma unroll
      for (int j = 0; j < kEntriesPerThread; ++j) {
        const int64_t e = base + j * stride;
        ViolationRow unused;
        bits[j] = e < n ? CheckVerifyEntry(v.half[h], e, &unused) : 0;
      }
#pragma unroll
      for (int j = 0; j < kEntriesPerThread; ++j) {
        if (bits[j] == 0) continue;
        ViolationRow row;
        CheckVerifyEntry(v.half[h], base + j * stride, &row);
        RecordViolation(v.half[h].launch, row);
      }
    }
  }
}

// Enqueues the verify of `v` on `stream`. REQUIRES: validated params; the current device is the
// tensors' device.
inline cudaError_t LaunchVerify(const VerifyHalves& v, cudaStream_t stream) {
  // Sized by entries, not rounds: small plans still spread over many SMs.
  const int blocks = PersistentGrid(VerifyKernel, kVerifyThreads, v.half[0].capacity);
  VerifyKernel<<<blocks, kVerifyThreads, 0, stream>>>(v);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
