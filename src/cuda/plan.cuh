// The plan kernels: PlanOffsetsKernel (one block: per-row lengths, a block
// scan, seeds and counts; cuda/plan_offsets.cuh) and PlanEntriesKernel (a grid-stride pass over the
// verify entries, each finding its row by binary search over the scratch offsets). Neither has a
// batch-size ceiling: the offsets block walks any number of rows, a chunk per thread.
#pragma once

#include "core/plan_math.h"
#include "cuda/launch.cuh"
#include "cuda/plan_offsets.cuh"

namespace kvcanary::cuda {

inline constexpr int kOffsetsThreads = 1024;
inline constexpr int kEntriesThreads = 256;

// Stage 1, one block.
__global__ void __launch_bounds__(kOffsetsThreads)
    PlanOffsetsKernel(const __grid_constant__ PlanOffsetsParams p, bool zero_write_tail) {
  __shared__ typename PlanOffsetsScan<kOffsetsThreads>::TempStorage scan_storage;
  PlanOffsetsBlock<kOffsetsThreads>(p, zero_write_tail, scan_storage);
}

// Stage 2. A total above the capacity with enable set breaks the offsets/entries contract: the
// separate entries op traps as SGLang does (the fused plan never gets there: it clears enable).
__global__ void __launch_bounds__(kEntriesThreads)
    PlanEntriesKernel(const __grid_constant__ PlanEntriesParams p) {
  const int64_t bs = p.in.bs;
  const int64_t total = p.scratch[bs];
  if (total <= 0 || *p.enable == 0 || bs <= 0) return;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (total > p.verify.capacity) {
    if (first == 0) {
      printf(
          "kv-canary plan_entries: total_verify=%lld exceeds verify_capacity=%lld with "
          "verify_enable=1 (offsets/entries contract broken)\n",
          static_cast<long long>(total), static_cast<long long>(p.verify.capacity));
    }
    __trap();
  }
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t tid = first; tid < total; tid += stride) {
    const int64_t r = RowOfEntry(p.scratch, bs, tid);
    const int64_t position = EntryPosition(p.in, p.scratch, r, tid);
    StoreVerifyEntry(p.in, p.verify, tid, r, p.in.req_pool_indices[r], position);
  }
}

// Sampled verify's rotation: a launch that graphs capture and replays advance.
__global__ void __launch_bounds__(kEntriesThreads)
    AdvancePhaseKernel(const __grid_constant__ AdvancePhaseParams p) {
  AdvancePhases(p, int64_t{blockIdx.x} * blockDim.x + threadIdx.x, int64_t{gridDim.x} * blockDim.x);
}

inline cudaError_t LaunchAdvancePhase(const AdvancePhaseParams& p, cudaStream_t stream) {
  const int64_t n = p.req_pool_indices == nullptr ? p.len : p.bs;
  const int blocks = PersistentGrid(AdvancePhaseKernel, kEntriesThreads, n);
  AdvancePhaseKernel<<<blocks, kEntriesThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

inline cudaError_t LaunchPlanOffsets(const PlanOffsetsParams& p, bool zero_write_tail,
                                     cudaStream_t stream) {
  PlanOffsetsKernel<<<1, kOffsetsThreads, 0, stream>>>(p, zero_write_tail);
  return cudaGetLastError();
}

inline cudaError_t LaunchPlanEntries(const PlanEntriesParams& p, cudaStream_t stream) {
  const int blocks = PersistentGrid(PlanEntriesKernel, kEntriesThreads, p.verify.capacity);
  PlanEntriesKernel<<<blocks, kEntriesThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
