// FusedVerifyKernel: the plan-entries stage and verify in one pass. Each warp takes 32 consecutive
// entries at a time; lane i derives entry e = chunk + i from the plan inputs (its row by binary
// search over the stage-1 offsets, then one coalesced req_to_token read) and checks it. Consecutive
// entries of one row are consecutive positions, so entry e's predecessor is entry e-1's slot, and
// its predecessor record is the record lane i-1 just loaded: both come by warp shuffle, and each
// record is read from memory once (the first lane of a row, or of a chunk, reads its predecessor
// itself). No per-entry plan array is written or read. A paired launch checks the K and V halves
// against the same derived entries; each half keeps its counters and rows.
#pragma once

#include "core/verify_math.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kFusedVerifyThreads = 256;
inline constexpr int kMaxFusedHalves = 2;
inline constexpr int kFusedChunks = 2;  // chunks per warp per round: their loads overlap
inline constexpr unsigned kFusedFullWarp = 0xffffffffu;

struct FusedVerifyHalves {
  FusedVerifyParams half[kMaxFusedHalves];  // half[1] only when num_halves == 2
  int num_halves = 1;
};

// One lane's entry of a chunk.
struct LaneEntry {
  VerifyEntry entry;
  bool active = false;              // e < n
  bool shares_predecessor = false;  // lane i-1 holds entry e-1 of the same row
};

// Derives entry chunk + lane. Every lane of the warp calls it (shuffles); a lane past n derives
// entry n-1 again and is inactive. REQUIRES chunk < n. The row, and so whether the predecessor
// is shared, is known before any req_to_token read, so a lane that needs its predecessor's cell
// reads it together with its own.
__device__ inline LaneEntry DeriveLaneEntry(const FusedVerifyParams& p, int64_t chunk, int64_t n,
                                            int lane) {
  LaneEntry x;
  const int64_t e = chunk + lane;
  x.active = e < n;
  const int64_t own = x.active ? e : n - 1;
  const int64_t r = RowOfEntry(p.scratch, p.in.bs, own);
  const int64_t rp = p.in.req_pool_indices[r];
  const int64_t position = EntryPosition(p.in, p.scratch, r, own);
  const int64_t up_row = __shfl_up_sync(kFusedFullWarp, r, 1);
  // Same row, so lane i-1 holds position - 1: its slot is this entry's predecessor.
  x.shares_predecessor = lane > 0 && up_row == r && position > 0;
  const bool reads_predecessor = position > 0 && !x.shares_predecessor;
  const int64_t cell = ReadReqToToken(p.in.req_to_token, rp, position);
  const int64_t prev_cell =
      reads_predecessor ? ReadReqToToken(p.in.req_to_token, rp, WrapSub(position, 1)) : 0;
  x.entry.slot = TranslateSlot(p.in.lut, cell);
  x.entry.position = position;
  const int64_t up_slot = __shfl_up_sync(kFusedFullWarp, x.entry.slot, 1);
  x.entry.prev_slot = position <= 0              ? -1
                      : x.shares_predecessor ? up_slot
                                             : TranslateSlot(p.in.lut, prev_cell);
  x.entry.expected_token = p.check_token ? ExpectedToken(p.in.pool, r, rp, position) : -1;
  return x;
}

// The fail bits of a lane's entry in one half. Every lane calls it (shuffle). A shared,
// reachable predecessor was checked by lane i-1 (reachable means inside the pool and not the
// padding slot), so its record's hash comes from there; any other predecessor record is loaded
// together with the entry's own.
__device__ inline int64_t LaneFailBits(const FusedVerifyParams& half, const LaneEntry& x) {
  const LaunchParams& launch = half.launch;
  const int64_t prev = x.entry.prev_slot;
  const bool checked = x.active && IsCheckedSlot(launch, x.entry.slot);
  const bool reachable = IsReachablePredecessor(launch, prev);
  const bool loads_predecessor = checked && reachable && prev >= 0 && !x.shares_predecessor;
  Record stored, predecessor;
  if (checked) stored = LoadRecord(launch.canary + x.entry.slot * launch.slot_stride_bytes);
  if (loads_predecessor) predecessor = LoadRecord(launch.canary + prev * launch.slot_stride_bytes);
  const uint64_t own_hash = checked ? RecordHash(stored) : 0;
  const uint64_t up_hash = __shfl_up_sync(kFusedFullWarp, own_hash, 1);
  if (!checked) return 0;
  int64_t expected_hash = stored.prev_hash;
  if (reachable) {
    expected_hash = ToSigned(prev < 0                  ? ChainHeadHash()
                             : x.shares_predecessor ? up_hash
                                                    : RecordHash(predecessor));
  }
  return EntryFailBits(launch, half.check_token, x.entry, stored, reachable, expected_hash);
}

__global__ void __launch_bounds__(kFusedVerifyThreads)
    FusedVerifyKernel(const __grid_constant__ FusedVerifyHalves v) {
  const FusedVerifyParams& p = v.half[0];  // the plan inputs are shared by the halves
  const int64_t n = FusedEntryCount(p);
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (thread < v.num_halves) {
    const FusedVerifyParams& half = v.half[thread];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  const int64_t chunk_stride = 32 * warps;
  // First every chunk's loads and checks (no store between them, and no branch: a chunk past n
  // re-derives entry n-1 inactive), so they stay in flight together; then the rare failures,
  // re-checked with plain loads to build their rows.
  for (int64_t base = (thread / 32) * 32; base < n; base += kFusedChunks * chunk_stride) {
    LaneEntry x[kFusedChunks];
#pragma unroll
    for (int c = 0; c < kFusedChunks; ++c) {
      const int64_t chunk = base + c * chunk_stride;
      x[c] = DeriveLaneEntry(p, chunk < n ? chunk : n - 1, n, lane);
      x[c].active = x[c].active && chunk < n;
    }
    int64_t bits[kFusedChunks][kMaxFusedHalves] = {};
    for (int h = 0; h < v.num_halves; ++h) {
#pragma unroll
      for (int c = 0; c < kFusedChunks; ++c) bits[c][h] = LaneFailBits(v.half[h], x[c]);
    }
#pragma unroll
    for (int c = 0; c < kFusedChunks; ++c) {
      for (int h = 0; h < v.num_halves; ++h) {
        if (bits[c][h] == 0) continue;
        ViolationRow row;
        CheckEntry(v.half[h].launch, v.half[h].check_token, x[c].entry, &row);
        RecordViolation(v.half[h].launch, row);
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
