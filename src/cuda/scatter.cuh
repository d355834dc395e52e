// ScatterKernel: one block per batch row (grid-stride over rows), the row's
// columns spread over the block's threads. SwaTranslateKernel: elementwise.
#pragma once

#include "core/plan_math.h"
#include "core/wrap.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kScatterThreads = 256;

__global__ void __launch_bounds__(kScatterThreads)
    ScatterKernel(const __grid_constant__ ScatterParams p) {
  if (p.bs == 0 || p.total == 0) return;
  for (int64_t r = blockIdx.x; r < p.bs; r += gridDim.x) {
    const int64_t rp = p.req_pool_indices[r * p.req_pool_indices_stride];
    if (rp < 0 || rp >= p.pool_rows) continue;  // D7
    const int64_t start = p.offsets[r * p.offsets_stride];
    const int64_t len = WrapSub(p.offsets[(r + 1) * p.offsets_stride], start);
    const int64_t copied = len < p.pool_width ? len : p.pool_width;
    for (int64_t c = threadIdx.x; c < copied; c += kScatterThreads) {
      const int64_t k = WrapAdd(start, c);
      if (k < 0 || k >= p.total) continue;
      p.pool[rp * p.pool_stride0 + c * p.pool_stride1] =
          static_cast<int32_t>(p.flat_in[k * p.flat_stride]);
    }
  }
}

__global__ void SwaTranslateKernel(const __grid_constant__ SwaTranslateParams p) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < p.n; i += stride) {
    p.out[i] = TranslateSlot(p.lut, p.in[i]);
  }
}

inline cudaError_t LaunchScatter(const ScatterParams& p, cudaStream_t stream) {
  const int blocks = PersistentGrid<ScatterKernel>(kScatterThreads, p.bs * kScatterThreads);
  ScatterKernel<<<blocks, kScatterThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

inline cudaError_t LaunchSwaTranslate(const SwaTranslateParams& p, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int blocks = PersistentGrid<SwaTranslateKernel>(kThreads, p.n);
  SwaTranslateKernel<<<blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
