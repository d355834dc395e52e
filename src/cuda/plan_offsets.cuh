// Stage 1 of the plan as one block's work (per-row lengths, a block scan, seeds and counts), and
// sampled verify's phase advance as a grid's: what the offsets and advance kernels run, written
// for any block size and grid so that another kernel can run them as one of its passes.
#pragma once

#include <cub/block/block_scan.cuh>

#include "core/params.h"
#include "core/plan_math.h"

namespace kvcanary::cuda {

template <int kThreads>
using PlanOffsetsScan = cub::BlockScan<unsigned long long, kThreads>;

// The offsets stage of an offsets-only fused plan (zero_write_tail as the fused plan sets it).
__host__ __device__ inline PlanOffsetsParams OffsetsParamsOf(const PlanParams& plan,
                                                             int64_t* scratch) {
  return PlanOffsetsParams{
      plan.in,   scratch, plan.verify.num_valid, plan.verify.enable, plan.verify.capacity,
      plan.write};
}

// Run by every thread of one block of kThreads threads. zero_write_tail: also zero
// write_offsets[bs+1 ..] (the fused plan does; SGLang's separate offsets stage leaves them to the
// caller). Rows are taken in chunks per thread, so any bs fits one block.
template <int kThreads>
__device__ inline void PlanOffsetsBlock(const PlanOffsetsParams& p, bool zero_write_tail,
                                        typename PlanOffsetsScan<kThreads>::TempStorage& storage) {
  using Scan = PlanOffsetsScan<kThreads>;
  const int64_t bs = p.in.bs;
  const int64_t rows_per_thread = (bs + kThreads - 1) / kThreads;
  const int64_t begin = min(bs, int64_t{threadIdx.x} * rows_per_thread);
  const int64_t end = min(bs, begin + rows_per_thread);

  unsigned long long verify_sum = 0, write_sum = 0;  // wrap like the CPU's int64 sums
  for (int64_t r = begin; r < end; ++r) {
    const RowPlan row = PlanRow(p.in, r);
    verify_sum += static_cast<unsigned long long>(row.verify_len);
    write_sum += static_cast<unsigned long long>(row.write_len);
  }
  unsigned long long verify_prefix, write_prefix, verify_total, write_total;
  Scan(storage).ExclusiveSum(verify_sum, verify_prefix, verify_total);
  __syncthreads();
  Scan(storage).ExclusiveSum(write_sum, write_prefix, write_total);

  for (int64_t r = begin; r < end; ++r) {
    const RowPlan row = PlanRow(p.in, r);
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
    for (int64_t i = bs + 1 + threadIdx.x; i < p.write.offsets_len; i += kThreads) {
      p.write.offsets[i] = 0;
    }
  }
}

// Sampled verify's rotation, the items thread `first` of `stride` threads takes: rows that share
// an entry (a clamped or repeated index) each add one, atomically, as the CPU's loop does.
__device__ inline void AdvancePhases(const AdvancePhaseParams& p, int64_t first, int64_t stride) {
  const int64_t n = p.req_pool_indices == nullptr ? p.len : p.bs;
  for (int64_t i = first; i < n; i += stride) {
    int64_t index = i;
    if (p.req_pool_indices != nullptr) {
      if (p.req_pool_indices[i] == kReqPoolIdxPadding) continue;
      index = ClampIndex(p.req_pool_indices[i], p.len);
    }
    atomicAdd(reinterpret_cast<unsigned long long*>(p.phase + index), 1ull);  // wraps
  }
}

}  // namespace kvcanary::cuda
