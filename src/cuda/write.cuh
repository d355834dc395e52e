// WriteKernel (spec/kernels.md §9): one block per batch row (grid-stride over rows). A row's tokens
// go through shared memory a tile at a time: all threads load the tile's inputs and compute the
// real-KV fingerprints in parallel; one thread per half runs the chain over the tile (the one serial
// dependency: each record's prev_hash is the hash of the one before), reading staged values so
// only the chain is on its critical path; then all threads store the records.
//
// A paired launch (K and V halves of a group) runs the two halves' chains in two different warps
// at the same time, so writing both costs one chain's latency. Each half keeps its own seed, chain
// state, records, counters and violation rows, so the result equals two separate launches.
#pragma once

#include "core/real_kv.h"
#include "core/write_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kWriteThreads = 256;
inline constexpr int kWriteTile = 512;
inline constexpr int kMaxWriteHalves = 2;

struct WriteHalves {
  WriteParams half[kMaxWriteHalves];  // half[1] only when num_halves == 2
  int num_halves = 1;
};

__global__ void __launch_bounds__(kWriteThreads) WriteKernel(const __grid_constant__ WriteHalves w) {
  __shared__ int64_t tokens[kWriteTile];
  __shared__ int64_t positions[kWriteTile];
  __shared__ int64_t slots[kWriteTile];
  __shared__ uint64_t real_kv[kMaxWriteHalves][kWriteTile];
  __shared__ int64_t prev_hashes[kMaxWriteHalves][kWriteTile];
  const WriteParams& p = w.half[0];  // plan and inputs are shared by the halves
  // The chain of half h runs in lane 0 of warp h.
  const int chain_half = threadIdx.x % 32 == 0 ? threadIdx.x / 32 : kMaxWriteHalves;
  const bool runs_chain = chain_half < w.num_halves;
  if (blockIdx.x == 0 && runs_chain) AddToCounter(w.half[chain_half].launch.kernel_run_counter, 1);
  const int64_t num_rows = ClampCount(*p.num_valid_reqs, p.capacity);  // D2

  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const TokenRange range = RowTokenRange(p, r);
    if (range.end <= range.begin) continue;
    ChainState state;  // meaningful in the chain threads only
    int64_t written = 0;
    if (runs_chain) state = LoadChainSeed(w.half[chain_half], r);
    for (int64_t tile = range.begin; tile < range.end; tile += kWriteTile) {
      const int count = static_cast<int>(min(int64_t{kWriteTile}, range.end - tile));
      for (int k = threadIdx.x; k < count; k += kWriteThreads) {
        const int64_t i = tile + k;
        const int64_t slot = p.out_cache_loc[i];
        slots[k] = slot;
        tokens[k] = p.input_ids[i];
        positions[k] = p.positions[i];
        for (int h = 0; h < w.num_halves; ++h) {  // each half has its own slot count
          real_kv[h][k] =
              IsWrittenToken(w.half[h], i) ? RealKvFingerprint(w.half[h].launch.real_kv, slot) : 0;
        }
      }
      __syncthreads();
      if (runs_chain) {
        const WriteParams& half = w.half[chain_half];
        const int64_t num_slots = half.launch.num_slots;
        int64_t* prev = prev_hashes[chain_half];
        if (half.input_assert || state.chain_assert) {
          auto record = [&](const ViolationRow& row) { RecordViolation(half.launch, row); };
          for (int k = 0; k < count; ++k) {
            const int64_t slot = slots[k];
            if (slot < 0 || slot >= num_slots) continue;  // skipped: the chain stays
            ++written;
            prev[k] = AdvanceChain(half, tile + k, slot, tokens[k], positions[k], &state, record);
          }
        } else {
          // No assert can fire: only the chain itself is serial. A group of staged tokens is
          // loaded into registers before any of its chain steps, so shared-memory latency is
          // paid once per group instead of once per token (the stores to `prev` may alias the
          // staging arrays as far as the compiler knows, so it would not hoist the loads itself).
          constexpr int kGroup = 8;
          uint64_t running = state.running;
          for (int base = 0; base < count; base += kGroup) {
            int64_t group_slots[kGroup], group_tokens[kGroup], group_positions[kGroup];
#pragma unroll
            for (int j = 0; j < kGroup; ++j) {
              const bool in_tile = base + j < count;
              group_slots[j] = in_tile ? slots[base + j] : -1;
              group_tokens[j] = in_tile ? tokens[base + j] : 0;
              group_positions[j] = in_tile ? positions[base + j] : 0;
            }
            // Branch-free, so the compiler may interleave the group's loads and stores with the
            // chain: a skipped token's step is computed and discarded (the chain stays), and its
            // prev entry is never stored to a record.
#pragma unroll
            for (int j = 0; j < kGroup; ++j) {
              const bool valid = group_slots[j] >= 0 && group_slots[j] < num_slots;
              prev[base + j] = ToSigned(running);
              const uint64_t stepped = ChainStep(running, group_tokens[j], group_positions[j]);
              running = valid ? stepped : running;
              written += valid ? 1 : 0;
            }
          }
          state.running = running;
        }
      }
      __syncthreads();
      for (int k = threadIdx.x; k < count; k += kWriteThreads) {
        const int64_t slot = slots[k];
        for (int h = 0; h < w.num_halves; ++h) {
          const LaunchParams& launch = w.half[h].launch;
          if (slot < 0 || slot >= launch.num_slots) continue;
          StoreRecord(RecordAddress(launch, slot), Record{tokens[k], positions[k],
                                                          prev_hashes[h][k], ToSigned(real_kv[h][k])});
        }
      }
      __syncthreads();  // the next tile reuses the staging arrays
    }
    if (runs_chain) AddToCounter(w.half[chain_half].launch.slot_run_counter, written);
  }
}

inline cudaError_t LaunchWrite(const WriteHalves& w, cudaStream_t stream) {
  const int blocks =
      PersistentGrid(WriteKernel, kWriteThreads, w.half[0].capacity * kWriteThreads);
  WriteKernel<<<blocks, kWriteThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

}  // namespace kvcanary::cuda
