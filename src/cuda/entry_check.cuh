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
//                      offsets (GuessedRowOfEntry: two reads when the rows are equal), then the
//                      req_to_token cells of its position and the one before, coalesced
//                      across the warp (consecutive threads hold consecutive entries); a
//                      predecessor record is the one the neighbouring thread loads
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

// The policy: how many entries a launch checks (none when disabled), and entry e of n.
__device__ inline int64_t EntryCount(const VerifyParams& p) {
  return *p.enable != 0 ? ClampCount(*p.num_valid, p.capacity) : 0;  // D2
}
__device__ inline int64_t EntryCount(const FusedVerifyParams& p) { return FusedEntryCount(p); }
template <bool kHint>
__device__ inline VerifyEntry EntryAt(const VerifyParams& p, int64_t e, int64_t /*n*/) {
  return PlannedEntry(p, e);
}
template <bool kHint>
__device__ inline VerifyEntry EntryAt(const FusedVerifyParams& p, int64_t e, int64_t n) {
  const int64_t r = kHint ? RowOfEntryNear(p.scratch, p.in.bs, e, n)
                          : GuessedRowOfEntry(p.scratch, p.in.bs, e);
  return FusedEntryAt(p, r, EntryPosition(p.in, p.scratch, r, e));
}

// EXPERIMENT: a paired launch derives each entry once for both halves, kPairedEntries entries a
// thread a round, every record load of both halves in flight before any violation is recorded.
template <bool kHint, int kPairedEntries, typename Params>
__device__ void CheckPairedEntries(const Halves<Params>& v, int64_t n, int64_t first,
                                   int64_t stride) {
  for (int64_t base = first; base < n; base += kPairedEntries * stride) {
    VerifyEntry entry[kPairedEntries];
#pragma unroll
    for (int j = 0; j < kPairedEntries; ++j) {
      const int64_t e = base + j * stride;
      if (e < n) entry[j] = EntryAt<kHint>(v.half[0], e, n);
      else entry[j].slot = kTokenToKvSlotPadding;  // skipped
    }
    int64_t bits[2][kPairedEntries];
    ViolationRow unused;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int j = 0; j < kPairedEntries; ++j) {
        bits[h][j] = CheckEntry(v.half[h].launch, v.half[h].check_token, entry[j], &unused);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int j = 0; j < kPairedEntries; ++j) {
        if (bits[h][j] == 0) continue;
        ViolationRow row;
        CheckEntry(v.half[h].launch, v.half[h].check_token, entry[j], &row);
        RecordViolation(v.half[h].launch, row);
      }
    }
  }
}

// EXPERIMENT (run of entries): a thread checks kRun consecutive entries. The fused verify derives
// the row of the first and its positions once; the entries after it in the same row take their
// positions from the row and their predecessor from the entry before when adjacent. Each record
// is loaded once: an entry whose predecessor is the entry before takes its hash from that record.
template <int kRun>
__device__ inline void EntriesFrom(const VerifyParams& p, int64_t e0, int64_t n,
                                   VerifyEntry (&out)[kRun]) {
#pragma unroll
  for (int k = 0; k < kRun; ++k) {
    if (e0 + k < n) out[k] = PlannedEntry(p, e0 + k);
  }
}
template <int kRun>
__device__ inline void EntriesFrom(const FusedVerifyParams& p, int64_t e0, int64_t n,
                                   VerifyEntry (&out)[kRun]) {
  const int64_t r = GuessedRowOfEntry(p.scratch, p.in.bs, e0);
  const int64_t row_first = p.scratch[r];
  const int64_t row_end = p.scratch[r + 1];
  const RowPositions row = RowPositionsOf(p.in, r);
#pragma unroll
  for (int k = 0; k < kRun; ++k) {
    const int64_t e = e0 + k;
    if (e >= n) continue;
    if (e >= row_end || e < row_first) {  // another row: derived on its own
      const int64_t other = GuessedRowOfEntry(p.scratch, p.in.bs, e);
      out[k] = FusedEntryAt(p, other, EntryPosition(p.in, p.scratch, other, e));
      continue;
    }
    const int64_t position = PositionInRow(p.in, row, e - row_first);
    const bool adjacent = k > 0 && e - 1 >= row_first && e - 1 < row_end &&
                          out[k - 1].position == WrapSub(position, 1);
    out[k] = FusedEntryAt(p, r, position, adjacent ? &out[k - 1].slot : nullptr);
  }
}

template <int kRun, typename Params>
__device__ void CheckRunsOfEntries(const Halves<Params>& v, int64_t n, int64_t first,
                                   int64_t stride) {
  for (int64_t base = first * kRun; base < n; base += stride * kRun) {
    for (int h = 0; h < v.num_halves; ++h) {
      const Params& half = v.half[h];
      const LaunchParams& launch = half.launch;
      VerifyEntry entry[kRun];
      EntriesFrom<kRun>(half, base, n, entry);
      Record stored[kRun];
#pragma unroll
      for (int k = 0; k < kRun; ++k) {
        if (IsCheckedSlot(launch, entry[k].slot)) {
          stored[k] = LoadRecord(launch.canary + entry[k].slot * launch.slot_stride_bytes);
        }
      }
      int64_t bits[kRun];
      int64_t expected[kRun];
#pragma unroll
      for (int k = 0; k < kRun; ++k) {
        bits[k] = 0;
        expected[k] = 0;
        if (!IsCheckedSlot(launch, entry[k].slot)) continue;
        const int64_t prev = entry[k].prev_slot;
        const bool reachable = IsReachablePredecessor(launch, prev);
        if (!reachable) {
          expected[k] = stored[k].prev_hash;
        } else if (k > 0 && prev > 0 && prev == entry[k - 1].slot) {
          expected[k] = ToSigned(RecordHash(stored[k - 1]));  // loaded: a checked slot
        } else {
          expected[k] = ToSigned(PredecessorHash(launch, prev));
        }
        bits[k] = EntryFailBits(half.check_token, entry[k], stored[k], reachable, expected[k],
                                RealKvFingerprint(launch.real_kv, entry[k].slot));
      }
#pragma unroll
      for (int k = 0; k < kRun; ++k) {
        if (bits[k] != 0) {
          RecordViolation(launch, EntryViolation(launch, entry[k], stored[k], expected[k], bits[k]));
        }
      }
    }
  }
}

// kPaired (EXPERIMENT): 0 each half derives its entries; 2 or 4 a paired launch derives them once
// (CheckPairedEntries). kHint (EXPERIMENT): the fused row guess from the entry count. kMinBlocks
// (EXPERIMENT): resident blocks an SM the registers are budgeted for.
template <typename Params, int kPaired, bool kHint, int kMinBlocks>
__global__ void __launch_bounds__(kEntryCheckThreads, kMinBlocks)
    EntryCheckKernel(const __grid_constant__ Halves<Params> v) {
  BeginOverlappedKernel();
  const int64_t n = EntryCount(v.half[0]);  // the plan is shared by the halves
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (first < v.num_halves) {
    const Params& half = v.half[first];
    AddToCounter(half.launch.kernel_run_counter, 1);  // every launch, enabled or not
    if (*half.enable != 0) AddToCounter(half.launch.slot_run_counter, n);
  }
  if constexpr (kPaired < 0) {  // EXPERIMENT: runs of -kPaired consecutive entries a thread
    CheckRunsOfEntries<-kPaired>(v, n, first, stride);
  } else {
    if (kPaired > 0 && v.num_halves == 2) {
      CheckPairedEntries<kHint, (kPaired > 0 ? kPaired : 2)>(v, n, first, stride);
      return;
    }
    for (int64_t base = first; base < n; base += kEntriesPerThread * stride) {
      for (int h = 0; h < v.num_halves; ++h) {
        const Params& half = v.half[h];
        int64_t bits[kEntriesPerThread];
        ViolationRow unused;
  #pragma unroll
        for (int j = 0; j < kEntriesPerThread; ++j) {
          const int64_t e = base + j * stride;
          bits[j] = e < n ? CheckEntry(half.launch, half.check_token, EntryAt<kHint>(half, e, n),
                                       &unused)
                          : 0;
        }
  #pragma unroll
        for (int j = 0; j < kEntriesPerThread; ++j) {
          if (bits[j] == 0) continue;
          ViolationRow row;
          CheckEntry(half.launch, half.check_token, EntryAt<kHint>(half, base + j * stride, n),
                     &row);
          RecordViolation(half.launch, row);
        }
      }
    }
  }
}

// EXPERIMENT switch, read once: KVCANARY_EXPERIMENT_ENTRY picks a row of kEntryVariants.
int ExperimentEntryVariant();

template <typename Params, int kPaired, bool kHint, int kMinBlocks>
cudaError_t LaunchEntryCheckVariant(const Halves<Params>& v, cudaStream_t stream) {
  constexpr auto kKernel = EntryCheckKernel<Params, kPaired, kHint, kMinBlocks>;
  const int blocks = PersistentGrid<kKernel>(kEntryCheckThreads, v.half[0].capacity);
  return LaunchOverlapped<kKernel>(blocks, kEntryCheckThreads, stream, v);
}

// Enqueues the entry check of `v` on `stream`. REQUIRES: validated params; the current device is
// the tensors' device. The grid is sized by the capacity, never by device values: small plans
// still spread over many SMs, and a captured graph replays with any count.
template <typename Params>
cudaError_t LaunchEntryCheck(const Halves<Params>& v, cudaStream_t stream) {
  switch (ExperimentEntryVariant()) {
    case 1: return LaunchEntryCheckVariant<Params, 0, true, 4>(v, stream);
    case 2: return LaunchEntryCheckVariant<Params, 2, true, 4>(v, stream);
    case 3: return LaunchEntryCheckVariant<Params, 2, true, 3>(v, stream);
    case 4: return LaunchEntryCheckVariant<Params, 4, true, 2>(v, stream);
    case 5: return LaunchEntryCheckVariant<Params, 2, false, 4>(v, stream);
    case 6: return LaunchEntryCheckVariant<Params, -4, false, 3>(v, stream);
    case 7: return LaunchEntryCheckVariant<Params, -4, false, 2>(v, stream);
    case 8: return LaunchEntryCheckVariant<Params, -2, false, 4>(v, stream);
    case 9: return LaunchEntryCheckVariant<Params, -2, false, 3>(v, stream);
    default: return LaunchEntryCheckVariant<Params, 0, false, 4>(v, stream);
  }
}

}  // namespace kvcanary::cuda
