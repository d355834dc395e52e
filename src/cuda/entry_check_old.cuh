// EXPERIMENT ONLY: the entry-check kernel as it was before the neighbour-shuffle kernel, for an
// A/B in one binary (KVCANARY_EXPERIMENT_ENTRY=0). Removed after the measurement.
#pragma once
#include "core/verify_math.h"
#include "cuda/launch.cuh"
namespace kvcanary::cuda {
inline constexpr int kOldEntriesPerThread = 4;
// The policy: how many entries a launch checks (none when disabled), and entry e.
__device__ inline int64_t OldEntryCount(const VerifyParams& p) {
  return *p.enable != 0 ? ClampCount(*p.num_valid, p.capacity) : 0;  // D2
}
__device__ inline int64_t OldEntryCount(const FusedVerifyParams& p) { return FusedEntryCount(p); }
__device__ inline VerifyEntry OldEntryAt(const VerifyParams& p, int64_t e) { return PlannedEntry(p, e); }
__device__ inline VerifyEntry OldEntryAt(const FusedVerifyParams& p, int64_t e) {
  const int64_t r = RowOfEntry(p.scratch, p.in.bs, e);
  return FusedEntryAt(p, r, EntryPosition(p.in, p.scratch, r, e));
}

template <typename Params>
__global__ void __launch_bounds__(256, 4)
    OldEntryCheckKernel(const __grid_constant__ Halves<Params> v) {
  BeginOverlappedKernel();
  const int64_t n = OldEntryCount(v.half[0]);  // the plan is shared by the halves
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (first < v.num_halves) {
    const Params& half = v.half[first];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  for (int64_t base = first; base < n; base += kOldEntriesPerThread * stride) {
    for (int h = 0; h < v.num_halves; ++h) {
      const Params& half = v.half[h];
      int64_t bits[kOldEntriesPerThread];
      ViolationRow unused;
#pragma unroll
      for (int j = 0; j < kOldEntriesPerThread; ++j) {
        const int64_t e = base + j * stride;
        bits[j] = e < n ? CheckEntry(half.launch, half.check_token, OldEntryAt(half, e), &unused) : 0;
      }
#pragma unroll
      for (int j = 0; j < kOldEntriesPerThread; ++j) {
        if (bits[j] == 0) continue;
        ViolationRow row;
        CheckEntry(half.launch, half.check_token, OldEntryAt(half, base + j * stride), &row);
        RecordViolation(half.launch, row);
      }
    }
  }
}

}  // namespace kvcanary::cuda
