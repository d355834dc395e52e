// FusedVerifyKernel: the plan-entries stage and verify in one pass, shaped like VerifyKernel. Each
// thread checks kFusedEntriesPerThread entries per round of a grid-stride pass; instead of reading
// a plan entry it derives it (its row by binary search over the stage-1 offsets, then the
// req_to_token cells of its position and the one before, coalesced across the warp: consecutive
// threads hold consecutive entries). All of a round's loads are issued before any check, so they
// stay in flight together; a predecessor record is the record the neighbouring thread loads, so
// it is served by the same cache line. No per-entry plan array is written or read. A paired
// launch checks the K and V halves against the same derived entries; each half keeps its
// counters and rows.
#pragma once

#include "core/verify_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kFusedVerifyThreads = 256;
inline constexpr int kFusedEntriesPerThread = 4;


__global__ void __launch_bounds__(kFusedVerifyThreads, 4)
    FusedVerifyKernel(const __grid_constant__ FusedVerifyHalves v) {
  const FusedVerifyParams& p = v.half[0];  // the plan inputs are shared by the halves
  const int64_t n = FusedEntryCount(p);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (first < v.num_halves) {
    const FusedVerifyParams& half = v.half[first];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  for (int64_t base = first; base < n; base += kFusedEntriesPerThread * stride) {
    // A paired launch derives each entry once per half: the second derivation's loads hit the
    // cache, and holding the entries across halves would cost the registers that keep loads in
    // flight.
    for (int h = 0; h < v.num_halves; ++h) {
      const FusedVerifyParams& half = v.half[h];
      int64_t bits[kFusedEntriesPerThread];
      ViolationRow unused;
#pragma unroll
      for (int j = 0; j < kFusedEntriesPerThread; ++j) {
        const int64_t e = base + j * stride;
        bits[j] = e < n ? CheckEntry(half.launch, half.check_token, FusedEntry(half, e), &unused)
                        : 0;
      }
#pragma unroll
      for (int j = 0; j < kFusedEntriesPerThread; ++j) {
        if (bits[j] == 0) continue;
        ViolationRow row;
        const VerifyEntry entry = FusedEntry(half, base + j * stride);
        CheckEntry(half.launch, half.check_token, entry, &row);
        RecordViolation(half.launch, row);
      }
    }
  }
}

// Enqueues the fused verify of `v` on `stream`. REQUIRES: validated params; the current device is
// the tensors' device.
inline cudaError_t LaunchFusedVerify(const FusedVerifyHalves& v, cudaStream_t stream) {
  const int blocks = PersistentGrid(FusedVerifyKernel, kFusedVerifyThreads, v.half[0].capacity);
  FusedVerifyKernel<<<blocks, kFusedVerifyThreads, 0, stream>>>(v);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
