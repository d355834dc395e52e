// FusedVerifyKernel: the plan-entries stage and verify in one pass, shaped like VerifyKernel. Each
// thread checks kFusedEntriesPerThread entries per round; instead of reading a plan entry it
// derives it (its row from the stage-1 offsets, then the req_to_token cells of its position and
// the one before, coalesced across the warp: consecutive lanes hold consecutive entries). All of
// a round's loads are issued before any check, so they stay in flight together; a predecessor record is the record the neighbouring thread loads, so
// it is served by the same cache line. No per-entry plan array is written or read. A paired
// launch checks the K and V halves against the same derived entries; each half keeps its
// counters and rows.
#pragma once

#include "core/verify_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kFusedVerifyThreads = 256;
inline constexpr int kMaxFusedHalves = 2;
inline constexpr int kFusedEntriesPerThread = 4;

struct FusedVerifyHalves {
  FusedVerifyParams half[kMaxFusedHalves];  // half[1] only when num_halves == 2
  int num_halves = 1;
};

// The row of entry e, walking forward from `row` (a row at or before e's). The offsets are
// non-decreasing, so this is the row RowOfEntry finds.
__device__ inline int64_t WalkToRow(const int64_t* scratch, int64_t bs, int64_t row, int64_t e) {
  while (row + 1 < bs && scratch[row + 1] <= e) ++row;
  return row;
}

__global__ void __launch_bounds__(kFusedVerifyThreads, 4)
    FusedVerifyKernel(const __grid_constant__ FusedVerifyHalves v) {
  const FusedVerifyParams& p = v.half[0];  // the plan inputs are shared by the halves
  const int64_t n = FusedEntryCount(p);
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (thread < v.num_halves) {
    const FusedVerifyParams& half = v.half[thread];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  // Each warp takes kWarpBlock consecutive entries per round: one binary search for the block's
  // first entry (the same address in every lane), then each lane walks forward to its entries'
  // rows, rarely more than one step.
  constexpr int64_t kWarpBlock = 32 * kFusedEntriesPerThread;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t block = (thread / 32) * kWarpBlock; block < n; block += warps * kWarpBlock) {
    const int64_t first_row = RowOfEntry(p.scratch, p.in.bs, block);
    for (int h = 0; h < v.num_halves; ++h) {
      const FusedVerifyParams& half = v.half[h];
      int64_t bits[kFusedEntriesPerThread];
      ViolationRow unused;
      int64_t row = first_row;
#pragma unroll
      for (int j = 0; j < kFusedEntriesPerThread; ++j) {
        const int64_t e = block + j * 32 + lane;
        if (e < n) row = WalkToRow(p.scratch, p.in.bs, row, e);
        bits[j] = e < n ? CheckEntry(half.launch, half.check_token, FusedEntryInRow(half, row, e),
                                     &unused)
                        : 0;
      }
#pragma unroll
      for (int j = 0; j < kFusedEntriesPerThread; ++j) {
        if (bits[j] == 0) continue;
        ViolationRow row_out;
        const VerifyEntry entry = FusedEntry(half, block + j * 32 + lane);
        CheckEntry(half.launch, half.check_token, entry, &row_out);
        RecordViolation(half.launch, row_out);
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
