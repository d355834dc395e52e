// The plan kernels: PlanOffsetsKernel (one block: per-row lengths, a block
// scan, seeds and counts) and PlanEntriesKernel (a grid-stride pass over the verify entries, each
// finding its row by binary search over the scratch offsets). Neither has a batch-size ceiling:
// the offsets block walks any number of rows, a chunk per thread.
#pragma once

#include <cub/block/block_scan.cuh>

#include "core/plan_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

// 512, not 1024: a block of 1024 threads caps a thread at 64 registers and the offsets loop
// spills; 512 measured a microsecond faster on a decode-1 step, the same on larger batches.
inline constexpr int kOffsetsThreads = 512;
inline constexpr int kEntriesThreads = 256;

// Stage 1. zero_write_tail: also zero write_offsets[bs+1 ..] (the fused plan does; SGLang's
// separate offsets stage leaves them to the caller).
__global__ void __launch_bounds__(kOffsetsThreads)
    PlanOffsetsKernel(const __grid_constant__ PlanOffsetsParams p, bool zero_write_tail) {
  BeginOverlappedKernel();
  using Scan = cub::BlockScan<unsigned long long, kOffsetsThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const int64_t bs = p.in.bs;
  const int64_t rows_per_thread = (bs + kOffsetsThreads - 1) / kOffsetsThreads;
  const int64_t begin = min(bs, int64_t{threadIdx.x} * rows_per_thread);
  const int64_t end = min(bs, begin + rows_per_thread);

  unsigned long long verify_sum = 0, write_sum = 0;  // wrap like the CPU's int64 sums
  // A batch of at most a block's rows (every decode batch up to 512) gives a thread one row: it
  // is kept for the stores below, not derived again behind the scans.
  RowPlan first_row;
  for (int64_t r = begin; r < end; ++r) {
    const RowPlan row = PlanRow(p.in, r);
    if (r == begin) first_row = row;
    verify_sum += static_cast<unsigned long long>(row.verify_len);
    write_sum += static_cast<unsigned long long>(row.write_len);
  }
  unsigned long long verify_prefix, write_prefix, verify_total, write_total;
  Scan(scan_storage).ExclusiveSum(verify_sum, verify_prefix, verify_total);
  __syncthreads();
  Scan(scan_storage).ExclusiveSum(write_sum, write_prefix, write_total);

  for (int64_t r = begin; r < end; ++r) {
    const RowPlan row = r == begin ? first_row : PlanRow(p.in, r);
    p.scratch[r] = static_cast<int64_t>(verify_prefix);
    p.write.offsets[r] = static_cast<int64_t>(write_prefix);
    p.write.seeds[r] = row.seed_slot;
    verify_prefix += static_cast<unsigned long long>(row.verify_len);
    write_prefix += static_cast<unsigned long long>(row.write_len);
  }
  if (threadIdx.x == 0) {
    const auto total = static_cast<int64_t>(verify_total);
    const bool overflow = total > p.verify_capacity;
    p.scratch[bs] = total;
    p.write.offsets[bs] = static_cast<int64_t>(write_total);
    *p.verify_num_valid = static_cast<int32_t>(overflow ? p.verify_capacity : total);
    *p.verify_enable = overflow ? 0 : 1;
    *p.write.num_valid_reqs = static_cast<int32_t>(bs);
  }
  if (zero_write_tail) {
    for (int64_t i = bs + 1 + threadIdx.x; i < p.write.offsets_len; i += kOffsetsThreads) {
      p.write.offsets[i] = 0;
    }
  }
}

// Stage 2. A total above the capacity with enable set breaks the offsets/entries contract (the
// fused plan never gets there: it clears enable). SGLang's kernel traps, which would end the
// engine's CUDA context; this one writes nothing and prints the CPU backend's message (the host
// cannot see the device total to raise it). A fused stage storing its entries (only_when_fits)
// writes nothing then either, silently: its verifies derive.
__global__ void __launch_bounds__(kEntriesThreads)
    PlanEntriesKernel(const __grid_constant__ PlanEntriesParams p) {
  BeginOverlappedKernel();
  const int64_t bs = p.in.bs;
  const int64_t total = p.scratch[bs];
  if (total <= 0 || *p.enable == 0 || bs <= 0) return;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (total > p.verify.capacity) {
    if (!p.only_when_fits && first == 0) {
      printf(
          "kv-canary: plan_entries: total_verify=%lld exceeds verify_capacity=%lld with "
          "verify_enable=1 (offsets/entries contract broken); nothing written\n",
          static_cast<long long>(total), static_cast<long long>(p.verify.capacity));
    }
    return;
  }
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t tid = first; tid < total; tid += stride) {
    const int64_t r = RowOfEntry(p.scratch, bs, tid);
    const int64_t position = EntryPosition(p.in, p.scratch, r, tid);
    StoreVerifyEntry(p.in, p.verify, tid, r, p.in.req_pool_indices[r], position);
  }
}

// Sampled verify's rotation: a launch that graphs capture and replays advance. Rows that share
// an entry (a clamped or repeated index) each add one, atomically, as the CPU's loop does.
__global__ void __launch_bounds__(kEntriesThreads)
    AdvancePhaseKernel(const __grid_constant__ AdvancePhaseParams p) {
  BeginOverlappedKernel();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t n = p.req_pool_indices == nullptr ? p.len : p.bs;
  for (int64_t i = first; i < n; i += stride) {
    int64_t index = i;
    if (p.req_pool_indices != nullptr) {
      if (p.req_pool_indices[i] == kReqPoolIdxPadding) continue;
      index = ClampIndex(p.req_pool_indices[i], p.len);
    }
    AddToCounter(p.phase + index, 1);
  }
}

inline cudaError_t LaunchAdvancePhase(const AdvancePhaseParams& p, cudaStream_t stream) {
  const int64_t n = p.req_pool_indices == nullptr ? p.len : p.bs;
  const int blocks = PersistentGrid<AdvancePhaseKernel>(kEntriesThreads, n);
  return LaunchOverlapped<AdvancePhaseKernel>(blocks, kEntriesThreads, stream, p);
}

inline cudaError_t LaunchPlanOffsets(const PlanOffsetsParams& p, bool zero_write_tail,
                                     cudaStream_t stream) {
  return LaunchOverlapped<PlanOffsetsKernel>(1, kOffsetsThreads, stream, p, zero_write_tail);
}

inline cudaError_t LaunchPlanEntries(const PlanEntriesParams& p, cudaStream_t stream) {
  const int blocks = PersistentGrid<PlanEntriesKernel>(kEntriesThreads, p.verify.capacity);
  return LaunchOverlapped<PlanEntriesKernel>(blocks, kEntriesThreads, stream, p);
}

}  // namespace kvcanary::cuda
