// WriteKernel (spec/kernels.md §9): one block per batch row (grid-stride over rows). A row's tokens
// go through shared memory a tile at a time: all threads load the tile's inputs and compute their
// real-KV fingerprints in parallel; thread 0 alone runs the chain over the tile (the one serial
// dependency: each record's prev_hash is the hash of the one before), reading staged values so
// nothing but the chain is on its critical path; then all threads store the records.
#pragma once

#include "core/real_kv.h"
#include "core/write_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kWriteThreads = 256;
inline constexpr int kWriteTile = 512;

__global__ void __launch_bounds__(kWriteThreads) WriteKernel(const WriteParams p) {
  __shared__ int64_t tokens[kWriteTile];
  __shared__ int64_t positions[kWriteTile];
  __shared__ int64_t slots[kWriteTile];
  __shared__ uint64_t real_kv[kWriteTile];
  __shared__ int64_t prev_hashes[kWriteTile];
  if (blockIdx.x == 0 && threadIdx.x == 0) AddToCounter(p.launch.kernel_run_counter, 1);
  const int64_t num_rows = ClampCount(*p.num_valid_reqs, p.capacity);  // D2
  auto record = [&](const ViolationRow& row) { RecordViolation(p.launch, row); };

  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const TokenRange range = RowTokenRange(p, r);
    if (range.end <= range.begin) continue;
    ChainState state;  // lives in thread 0
    int64_t written = 0;
    if (threadIdx.x == 0) state = LoadChainSeed(p, r);
    for (int64_t tile = range.begin; tile < range.end; tile += kWriteTile) {
      const int count = static_cast<int>(min(int64_t{kWriteTile}, range.end - tile));
      for (int k = threadIdx.x; k < count; k += kWriteThreads) {
        const int64_t i = tile + k;
        slots[k] = p.out_cache_loc[i];
        tokens[k] = p.input_ids[i];
        positions[k] = p.positions[i];
        real_kv[k] = IsWrittenToken(p, i) ? RealKvFingerprint(p.launch.real_kv, slots[k]) : 0;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int k = 0; k < count; ++k) {
          const int64_t slot = slots[k];
          if (slot < 0 || slot >= p.launch.num_slots) continue;  // skipped: chain stays
          ++written;
          prev_hashes[k] =
              AdvanceChain(p, tile + k, slot, tokens[k], positions[k], &state, record);
        }
      }
      __syncthreads();
      for (int k = threadIdx.x; k < count; k += kWriteThreads) {
        const int64_t slot = slots[k];
        if (slot < 0 || slot >= p.launch.num_slots) continue;
        StoreRecord(RecordAddress(p.launch, slot),
                    Record{tokens[k], positions[k], prev_hashes[k], ToSigned(real_kv[k])});
      }
      __syncthreads();  // the next tile reuses the staging arrays
    }
    if (threadIdx.x == 0) AddToCounter(p.launch.slot_run_counter, written);
  }
}

inline cudaError_t LaunchWrite(const WriteParams& p, cudaStream_t stream) {
  const int blocks = PersistentGrid(WriteKernel, kWriteThreads, p.capacity * kWriteThreads);
  WriteKernel<<<blocks, kWriteThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
