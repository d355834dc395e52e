// EntryCheckKernel: the one kernel of Verify and FusedVerify, a grid-stride pass over a launch's
// verify entries. Each entry is independent: its record loads and the real-KV fold run in parallel
// across the grid, and the grid fills every SM whatever the batch, so the kernel runs at memory
// speed. Each thread checks kEntriesPerThread entries per round, first all their loads (no store
// can come between them, so the compiler keeps every load in flight at once), then the checks and
// the rare violation rows.
//
// A verify is bound by random 32-byte sectors, so the kernel reads each record once: the lanes of
// a warp hold consecutive entries, and an entry whose predecessor is the record its left lane
// checks (every entry of a row but the first in its warp) takes that lane's record hash by a
// shuffle instead of loading the predecessor again. The loop is warp-uniform for the shuffles.
//
// Where an entry comes from is the policy, chosen by the params type:
//   VerifyParams       the entry is read from the plan arrays (SGLang's verify)
//   FusedVerifyParams  the entry is derived from the plan inputs: its row guessed from the
//                      offsets (GuessedRowOfEntry: two reads when the rows are equal), then the
//                      req_to_token cell of its position, coalesced across the warp; the cell of
//                      the position before is the left lane's when it holds it
// A paired launch checks the K and V halves of a group in the same pass (deriving or reading each
// entry once per half: the second time hits the cache, and holding entries across halves would
// cost the registers that keep loads in flight); each half keeps its own counters and rows, so the
// result equals two separate launches.
#pragma once

#include <cstdlib>

#include "core/verify_math.h"
#include "core/wrap.h"
#include "cuda/entry_check_old.cuh"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kEntryCheckThreads = 256;
inline constexpr int kEntriesPerThread = 4;
inline constexpr int kEntryCheckMinBlocks = 2;

// The policy: how many entries a launch checks (none when disabled), and the entry of index e,
// called by every lane of a warp (lanes past n get an unchecked entry: slot 0).
__device__ inline int64_t EntryCount(const VerifyParams& p) {
  return *p.enable != 0 ? ClampCount(*p.num_valid, p.capacity) : 0;  // D2
}
__device__ inline int64_t EntryCount(const FusedVerifyParams& p) { return FusedEntryCount(p); }

__device__ inline VerifyEntry WarpEntryAt(const VerifyParams& p, int64_t e, int64_t n, int) {
  return e < n ? PlannedEntry(p, e) : VerifyEntry{};
}

__device__ inline VerifyEntry WarpEntryAt(const FusedVerifyParams& p, int64_t e, int64_t n,
                                          int lane) {
  const int64_t at = e < n ? e : n - 1;  // past the end: derive the last entry (clamped), drop it
  const int64_t r = GuessedRowOfEntry(p.scratch, p.in.bs, at);
  const int64_t rp = p.in.req_pool_indices[r];
  const int64_t position = EntryPosition(p.in, p.scratch, r, at);
  const int64_t slot = VerifiedSlot(p.in, rp, position);
  const int64_t left_slot = __shfl_up_sync(kFullWarp, slot, 1);
  const int64_t left_row = __shfl_up_sync(kFullWarp, r, 1);
  const int64_t left_position = __shfl_up_sync(kFullWarp, position, 1);
  const bool follows = lane > 0 && left_row == r && left_position == WrapSub(position, 1);
  VerifyEntry entry;
  entry.slot = e < n ? slot : 0;
  entry.prev_slot = PredecessorSlot(p.in, rp, position, follows, left_slot);
  entry.position = position;
  entry.expected_token = p.check_token ? ExpectedToken(p.in.pool, r, rp, position) : -1;
  return entry;
}

// What one lane loaded for an entry before checking it.
struct LoadedEntry {
  bool checked = false;          // a slot of the pool (IsCheckedSlot)
  bool reachable = false;        // its predecessor is checked against (IsReachablePredecessor)
  bool left_is_prev = false;     // the left lane checks the predecessor's record
  Record stored;                 // the entry's record
  int64_t loaded_prev_hash = 0;  // the predecessor's hash, when loaded here
  uint64_t fingerprint = 0;      // RealKvFingerprint of the slot
};

// Which of the entry's loads it needs (warp-collective: every lane calls it). Slot 0 is never
// checked, so a left slot of 0 never matches a reachable predecessor.
__device__ inline LoadedEntry PlanLoads(const LaunchParams& launch, const VerifyEntry& entry,
                                        int lane) {
  LoadedEntry loaded;
  loaded.checked = IsCheckedSlot(launch, entry.slot);
  const int64_t left_slot = __shfl_up_sync(kFullWarp, loaded.checked ? entry.slot : 0, 1);
  loaded.reachable = loaded.checked && IsReachablePredecessor(launch, entry.prev_slot);
  loaded.left_is_prev = lane > 0 && left_slot != 0 && entry.prev_slot == left_slot;
  return loaded;
}

// Issues them (no shuffle here, so the loads of all a lane's entries stay in flight together).
__device__ inline void IssueLoads(const LaunchParams& launch, const VerifyEntry& entry,
                                  LoadedEntry* loaded) {
  if (!loaded->checked) return;
  loaded->stored = LoadRecord(launch.canary + entry.slot * launch.slot_stride_bytes);
  if (loaded->reachable && !loaded->left_is_prev) {
    loaded->loaded_prev_hash = ToSigned(PredecessorHash(launch, entry.prev_slot));
  }
  loaded->fingerprint = RealKvFingerprint(launch.real_kv, entry.slot);
}

// The predecessor hash entry's check expects, given the left lane's record hash.
__device__ inline int64_t ExpectedHash(const LoadedEntry& loaded, int64_t left_hash) {
  if (!loaded.reachable) return loaded.stored.prev_hash;
  return loaded.left_is_prev ? left_hash : loaded.loaded_prev_hash;
}

// Checks the loaded entry and records its violation, if any. The result equals CheckEntry's.
__device__ inline void CheckLoadedEntry(const LaunchParams& launch, bool check_token,
                                        const VerifyEntry& entry, const LoadedEntry& loaded,
                                        int64_t left_hash) {
  if (!loaded.checked) return;
  const int64_t expected_hash = ExpectedHash(loaded, left_hash);
  const int64_t bits = EntryFailBits(check_token, entry, loaded.stored, loaded.reachable,
                                     expected_hash, loaded.fingerprint);
  if (bits != 0) {
    RecordViolation(launch, EntryViolation(launch, entry, loaded.stored, expected_hash, bits));
  }
}

template <typename Params, int kEntries = kEntriesPerThread, int kMinBlocks = kEntryCheckMinBlocks>
__global__ void __launch_bounds__(kEntryCheckThreads, kMinBlocks)
    EntryCheckKernel(const __grid_constant__ Halves<Params> v) {
  BeginOverlappedKernel();
  const int64_t n = EntryCount(v.half[0]);  // the plan is shared by the halves
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (first < v.num_halves) {
    const Params& half = v.half[first];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  // base - lane is the warp's first entry: the whole warp runs a round while any lane has work,
  // and skips together the entries j whose first lane is already past n (so every lane reaches
  // the same shuffles).
  for (int64_t base = first; base - lane < n; base += kEntries * stride) {
    const int64_t warp_first = base - lane;
    for (int h = 0; h < v.num_halves; ++h) {
      const Params& half = v.half[h];
      VerifyEntry entry[kEntries];
      LoadedEntry loaded[kEntries];
#pragma unroll
      for (int j = 0; j < kEntries; ++j) {
        if (warp_first + j * stride >= n) continue;
        entry[j] = WarpEntryAt(half, base + j * stride, n, lane);
        loaded[j] = PlanLoads(half.launch, entry[j], lane);
      }
#pragma unroll
      for (int j = 0; j < kEntries; ++j) {
        if (warp_first + j * stride < n) IssueLoads(half.launch, entry[j], &loaded[j]);
      }
#pragma unroll
      for (int j = 0; j < kEntries; ++j) {
        if (warp_first + j * stride >= n) continue;
        const int64_t own_hash = ToSigned(RecordHash(loaded[j].stored));
        const int64_t left_hash = __shfl_up_sync(kFullWarp, own_hash, 1);
        CheckLoadedEntry(half.launch, half.check_token, entry[j], loaded[j], left_hash);
      }
    }
  }
}

// Enqueues the entry check of `v` on `stream`. REQUIRES: validated params; the current device is
// the tensors' device. The grid is sized by the capacity, never by device values: small plans
// still spread over many SMs, and a captured graph replays with any count.
template <auto kKernel, typename Params>
cudaError_t LaunchEntryCheckWith(const Halves<Params>& v, cudaStream_t stream) {
  const int blocks = PersistentGrid<kKernel>(kEntryCheckThreads, v.half[0].capacity);
  return LaunchOverlapped<kKernel>(blocks, kEntryCheckThreads, stream, v);
}

// EXPERIMENT ONLY: KVCANARY_EXPERIMENT_ENTRY picks the kernel for an A/B in one binary
// (0: the previous kernel; 1: 4 entries a thread, 2 blocks an SM; 2: 2 and 2; 3: 2 and 3).
inline int EntryVariant() {
  static const int variant = [] {
    const char* value = std::getenv("KVCANARY_EXPERIMENT_ENTRY");
    return value != nullptr ? std::atoi(value) : 1;
  }();
  return variant;
}

template <typename Params>
cudaError_t LaunchEntryCheck(const Halves<Params>& v, cudaStream_t stream) {
  switch (EntryVariant()) {
    case 0:
      return LaunchEntryCheckWith<OldEntryCheckKernel<Params>>(v, stream);
    case 2:
      return LaunchEntryCheckWith<EntryCheckKernel<Params, 2, 2>>(v, stream);
    case 3:
      return LaunchEntryCheckWith<EntryCheckKernel<Params, 2, 3>>(v, stream);
    default:
      return LaunchEntryCheckWith<EntryCheckKernel<Params, 4, 2>>(v, stream);
  }
}

}  // namespace kvcanary::cuda
