// WriteKernel: one block per batch row (grid-stride over rows) and no block
// barrier. Warp h < num_halves runs half h's chain; the other warps fold the real-KV fingerprints.
// The two kinds of warp store disjoint words of each record (the chain warp token, position and
// prev_hash; the fingerprint warps real_kv_hash), so neither waits for the other: SGLang's kernel
// contract lets a backend spread the stores and folds across threads, and on a valid batch each
// slot is written once.
//
// The chain warp takes its row 32 tokens at a time. Each lane loads one token's inputs (coalesced;
// the next chunk's loads are issued before the current chunk's chain, so they arrive while it
// runs), the chunk is staged in shared memory, and all 32 lanes step the same chain in lockstep,
// reading token j by broadcast; lane j keeps the running value before step j, which is its
// record's prev_hash. Only the chain is serial: the asserts are per-lane checks after the chunk.
// A paired launch (K and V halves of a group) runs the two chains in two warps at the same time,
// so writing both costs one chain's latency; each half keeps its own seed, chain, records,
// counters and rows, so the result equals two separate launches.
#pragma once

#include "core/real_kv.h"
#include "core/write_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kWriteThreads = 128;
inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarp = 0xffffffffu;

// One token of a chunk, held by one lane; slot -1 past the row's end (never written).
struct ChunkToken {
  int64_t slot = -1;
  int64_t token = 0;
  int64_t position = 0;
  int64_t expected_token = 0;  // with input_assert only
  int64_t expected_position = 0;
};

__device__ inline ChunkToken LoadChunkToken(const WriteParams& p, int64_t i, int64_t end) {
  ChunkToken t;
  if (i >= end) return t;
  t.slot = p.out_cache_loc[i];
  t.token = p.input_ids[i];
  t.position = p.positions[i];
  if (p.input_assert) {
    t.expected_token = p.expected_tokens[i];
    t.expected_position = p.expected_positions[i];
  }
  return t;
}

// The asserts of one lane's token (SGLang's order: input assert, then chain-position assert).
// `before` is the position of the chain's previous written token; `stored_chain` the token's
// prev_hash.
__device__ inline void CheckTokenAsserts(const WriteParams& half, const ChunkToken& t,
                                         bool chain_assert, int64_t before, int64_t stored_chain) {
  ViolationRow row;
  if (half.input_assert &&
      InputAssertFails(half.launch, t.slot, t.token, t.position, t.expected_token,
                       t.expected_position, stored_chain, &row)) {
    RecordViolation(half.launch, row);
  }
  if (chain_assert &&
      ChainAssertFails(half.launch, t.slot, t.token, t.position, before, stored_chain, &row)) {
    RecordViolation(half.launch, row);
  }
}

// Half `half`'s chain over row r, run by one whole warp. `staging` is the warp's shared memory.
__device__ inline void RunChain(const WriteParams& half, int64_t r, int lane,
                                int64_t (*staging)[kWarpSize]) {
  const ChainState seed = LoadChainSeed(half, r);  // issued before the range: its loads overlap
  const TokenRange range = RowTokenRange(half, r);
  if (range.end <= range.begin) return;
  const int64_t num_slots = half.launch.num_slots;
  uint64_t running = seed.running;
  int64_t last_position = seed.last_position;
  int64_t written = 0;
  ChunkToken next = LoadChunkToken(half, range.begin + lane, range.end);
  for (int64_t chunk = range.begin; chunk < range.end; chunk += kWarpSize) {
    const ChunkToken t = next;
    if (chunk + kWarpSize < range.end) {
      next = LoadChunkToken(half, chunk + kWarpSize + lane, range.end);
    }
    const bool valid = t.slot >= 0 && t.slot < num_slots;  // skipped tokens keep the chain
    const unsigned mask = __ballot_sync(kFullWarp, valid);
    staging[0][lane] = t.token;
    staging[1][lane] = t.position;
    __syncwarp();
    // Every lane steps the same chain up to the chunk's last written token.
    const int steps = kWarpSize - __clz(mask);
    uint64_t prev_hash = running;
#pragma unroll 8
    for (int j = 0; j < steps; ++j) {
      const int64_t token = staging[0][j];
      const int64_t position = staging[1][j];
      prev_hash = lane == j ? running : prev_hash;
      const uint64_t stepped = ChainStep(running, token, position);
      running = (mask >> j) & 1 ? stepped : running;
    }
    __syncwarp();  // the next chunk reuses the staging
    if (valid) {
      StoreChainWords(RecordAddress(half.launch, t.slot), t.token, t.position, ToSigned(prev_hash));
    }
    if (half.input_assert || seed.chain_assert) {
      // The previous written token of the chain: the nearest written lane below, else the
      // previous chunk's last.
      const unsigned below = mask & ((1u << lane) - 1u);
      const int64_t below_position =
          __shfl_sync(kFullWarp, t.position, below != 0 ? kWarpSize - 1 - __clz(below) : 0);
      const int64_t last_in_chunk =
          __shfl_sync(kFullWarp, t.position, mask != 0 ? kWarpSize - 1 - __clz(mask) : 0);
      if (valid) {
        CheckTokenAsserts(half, t, seed.chain_assert, below != 0 ? below_position : last_position,
                          ToSigned(prev_hash));
      }
      last_position = mask != 0 ? last_in_chunk : last_position;
    }
    written += __popc(mask);
  }
  if (lane == 0) AddToCounter(half.launch.slot_run_counter, written);
}

// The real_kv_hash words of row r's records, for every half, spread over `threads` threads.
// Each fold is independent, so even a long prefill row's folds finish well before its chain.
__device__ inline void StoreFingerprints(const WriteHalves& w, int64_t r, int thread, int threads) {
  const WriteParams& p = w.half[0];
  const TokenRange range = RowTokenRange(p, r);
  for (int64_t i = range.begin + thread; i < range.end; i += threads) {
    const int64_t slot = p.out_cache_loc[i];
    for (int h = 0; h < w.num_halves; ++h) {
      const LaunchParams& launch = w.half[h].launch;
      if (slot < 0 || slot >= launch.num_slots) continue;
      StoreLeU64(RecordAddress(launch, slot) + kRecordRealKvHashOffset,
                 RealKvFingerprint(launch.real_kv, slot));
    }
  }
}

__global__ void __launch_bounds__(kWriteThreads)
    WriteKernel(const __grid_constant__ WriteHalves w) {
  __shared__ int64_t staging[kMaxHalves][2][kWarpSize];
  BeginOverlappedKernel();
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (blockIdx.x == 0 && threadIdx.x < w.num_halves) {
    AddToCounter(w.half[threadIdx.x].launch.kernel_run_counter, 1);
  }
  const int64_t num_rows = ClampCount(*w.half[0].num_valid_reqs, w.half[0].capacity);  // D2
  const int fold_threads = kWriteThreads - w.num_halves * kWarpSize;
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    if (warp < w.num_halves) {
      RunChain(w.half[warp], r, lane, staging[warp]);
    } else {
      StoreFingerprints(w, r, threadIdx.x - w.num_halves * kWarpSize, fold_threads);
    }
  }
}

inline cudaError_t LaunchWrite(const WriteHalves& w, cudaStream_t stream) {
  const int blocks = PersistentGrid<WriteKernel>(kWriteThreads, w.half[0].capacity * kWriteThreads);
  return LaunchOverlapped<WriteKernel>(blocks, kWriteThreads, stream, w);
}

}  // namespace kvcanary::cuda
