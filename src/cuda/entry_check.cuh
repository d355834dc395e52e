// EntryCheckKernel: the one kernel of Verify and FusedVerify, a grid-stride pass over a launch's
// verify entries. Each entry is independent: its record loads and the real-KV fold run in parallel
// across the grid, and the grid fills every SM whatever the batch, so the kernel runs at memory
// speed. Each thread checks kEntriesPerThread entries per round, first all their loads (no store
// can come between them, so the compiler keeps every load in flight at once), then records the
// rare failures, re-running the check of a failing entry to build its row.
//
// Where an entry comes from is the policy, chosen by the params type:
//   VerifyParams       the entry is read from the plan arrays (SGLang's verify)
//   FusedVerifyParams  the entry is derived from the plan inputs: its row from the stage-1
//                      offsets (LocateRow: the guessed row's bounds and inputs in one step, the
//                      offsets' total loaded once with the entry count), then the
//                      req_to_token cells of its position and the one before, coalesced
//                      across the warp (consecutive threads hold consecutive entries); a
//                      predecessor record is the one the neighbouring thread loads; given
//                      stored entries (a fused stage's HEAD wrote them) that hold the launch's
//                      entries, it reads them as Verify does
// A paired launch checks the K and V halves of a group in the same pass (deriving or reading each
// entry once per half: the second time hits the cache, and holding entries across halves would
// cost the registers that keep loads in flight); each half keeps its own counters and rows, so the
// result equals two separate launches.
#pragma once

#include "core/plan_math.h"
#include "core/verify_math.h"
#include "core/wrap.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

inline constexpr int kEntryCheckThreads = 256;
inline constexpr int kEntriesPerThread = 4;

// The policy: how many entries a launch checks (none when disabled), what it reads once before
// them (the fused verify: the offsets' total, LocateRow's divisor), and entry e. The launch-wide
// values load together, none after another: each dependent read before an entry's record loads
// is a memory latency a small launch cannot hide.
struct NoLaunchState {};
__device__ inline int64_t EntryCount(const VerifyParams& p) {
  const int32_t enable = *p.enable;
  const int32_t num_valid = *p.num_valid;
  return enable != 0 ? ClampCount(num_valid, p.capacity) : 0;  // D2
}
__device__ inline int64_t EntryCount(const FusedVerifyParams& p) { return FusedEntryCount(p); }
__device__ inline NoLaunchState LaunchStateOf(const VerifyParams&) { return {}; }
// A one-row batch (decode-1) has its row's inputs loaded here too, so its entries start at the
// req_to_token read.
struct FusedLaunchState {
  int64_t total = 0;
  LocatedRow only_row;
};
__device__ inline FusedLaunchState LaunchStateOf(const FusedVerifyParams& p) {
  FusedLaunchState state;
  state.total = p.scratch[p.in.bs];
  if (p.in.bs == 1) {
    state.only_row = LocatedRow{0, p.scratch[0], p.in.prefix_lens[0], p.in.req_pool_indices[0]};
  }
  return state;
}
__device__ inline VerifyEntry EntryAt(const VerifyParams& p, NoLaunchState, int64_t e) {
  return PlannedEntry(p, e);
}
__device__ inline VerifyEntry EntryAt(const FusedVerifyParams& p, FusedLaunchState state,
                                      int64_t e) {
  const LocatedRow row =
      p.in.bs == 1 ? state.only_row : LocateRow(p.scratch, p.in, state.total, e);
  const RowPositions positions = RowPositionsOf(p.in, row.prefix_len, row.rp);
  return FusedEntryOfRow(p, row.r, row.rp,
                         PositionInRow(p.in, positions, WrapSub(e, row.begin)));
}

// Counts the launch (every launch, enabled or not) and its n entries (when enabled), once per
// half, on the grid's first threads.
template <typename Params>
__device__ void CountLaunch(const Halves<Params>& v, int64_t n, int64_t first) {
  if (first < v.num_halves) {
    const Params& half = v.half[first];
    AddToCounter(half.launch.kernel_run_counter, 1);
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
}

// The grid-stride pass over entries [0, n) of every half; entry_of(half, e) gives entry e.
template <typename Params, typename EntryOf>
__device__ void CheckLaunchEntries(const Halves<Params>& v, int64_t n, int64_t first,
                                   EntryOf entry_of) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t base = first; base < n; base += kEntriesPerThread * stride) {
    for (int h = 0; h < v.num_halves; ++h) {
      const Params& half = v.half[h];
      int64_t bits[kEntriesPerThread];
      ViolationRow unused;
#pragma unroll
      for (int j = 0; j < kEntriesPerThread; ++j) {
        const int64_t e = base + j * stride;
        bits[j] = e < n ? CheckEntry(half.launch, half.check_token, entry_of(half, e), &unused) : 0;
      }
#pragma unroll
      for (int j = 0; j < kEntriesPerThread; ++j) {
        if (bits[j] == 0) continue;
        ViolationRow row;
        CheckEntry(half.launch, half.check_token, entry_of(half, base + j * stride), &row);
        RecordViolation(half.launch, row);
      }
    }
  }
}

// kReadsStored (fused verify with stored entries only): a launch whose entries fit the stored
// arrays reads them, else derives them. The choice is a flag uniform across the launch, taken per
// entry inside the one loop: two loops behind one branch need more than 64 registers between them,
// and the spills made reading the stored entries 10-15% slower (bench/RESULTS.md, run Q). A
// separate instantiation, so the fused verify without stored entries keeps its own code.
template <typename Params, bool kReadsStored = false>
__global__ void __launch_bounds__(kEntryCheckThreads, 4)
    EntryCheckKernel(const __grid_constant__ Halves<Params> v) {
  BeginOverlappedKernel();
  // The plan, and so the count and the launch-wide state, are shared by the halves (both are
  // built from one call's arguments).
  const int64_t n = EntryCount(v.half[0]);
  [[maybe_unused]] bool stored = false;
  if constexpr (kReadsStored) stored = ReadsStoredEntries(v.half[0], n);
  const auto state = LaunchStateOf(v.half[0]);
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  CountLaunch(v, n, first);
  CheckLaunchEntries(v, n, first, [&](const Params& half, int64_t e) {
    if constexpr (kReadsStored) {
      if (stored) return StoredEntry(half.stored, half.check_token, e);
    }
    return EntryAt(half, state, e);
  });
}

// Enqueues the entry check of `v` on `stream`. REQUIRES: validated params; the current device is
// the tensors' device. The grid is sized by the capacity, never by device values: small plans
// still spread over many SMs, and a captured graph replays with any count.
template <typename Params, bool kReadsStored = false>
cudaError_t LaunchEntryCheck(const Halves<Params>& v, cudaStream_t stream) {
  constexpr auto kernel = EntryCheckKernel<Params, kReadsStored>;
  const int blocks = PersistentGrid<kernel>(kEntryCheckThreads, v.half[0].capacity);
  return LaunchOverlapped<kernel>(blocks, kEntryCheckThreads, stream, v);
}

}  // namespace kvcanary::cuda
