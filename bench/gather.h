// The random-gather ceiling and the launch floor: the limits a verify and a step are measured
// against besides the copy bandwidth.
//
// A verify entry costs one random 32-byte record read (its predecessor's record is usually a
// neighbour's, already in cache) and, in `partial`, one random 16-byte strip of the real KV: two
// 32-byte sectors from anywhere in pool-sized buffers, which no access pattern streams. The
// gather reads exactly that for `entries` random slots, their indices read in order (as a verify
// reads its table cells), with nothing else: no verify of the same entries can beat it.
#pragma once

#include <cstdint>

namespace kvcanary::bench {

struct GatherInputs {
  const int64_t* slots = nullptr;  // [entries] random slots in [0, num_slots)
  int64_t entries = 0;
  const uint8_t* records = nullptr;  // [num_slots, 32]
  const uint8_t* strips = nullptr;   // [num_slots, strip_stride], or null: records only
  int64_t strip_stride = 0;
  uint64_t* out = nullptr;  // [1]: the fold of everything read, so no read is dead
};

// Folds the first 8 bytes of every record (and strip) read, as the kernel does; on every core,
// each asking for the record (and strip) `prefetch_distance` entries ahead, so that misses of
// independent entries overlap. Which distance is best depends on the CPU (on the 2-core EPYC
// development machine 64 beat 16 by a third for records alone): the bench times each of
// kGatherPrefetchDistances and keeps the fastest, as it keeps the best grid on CUDA.
uint64_t GatherOnHost(const GatherInputs& in, int64_t prefetch_distance);
inline constexpr int64_t kGatherPrefetchDistances[] = {16, 32, 64};

#ifdef KVC_HAVE_CUDA
// Enqueues the gather over `blocks` blocks of kGatherThreads threads. Returns a cudaError_t.
int LaunchGather(const GatherInputs& in, int blocks, void* stream);
// Enqueues one empty kernel of one thread.
int LaunchEmpty(void* stream);
inline constexpr int kGatherThreads = 256;
#endif

}  // namespace kvcanary::bench
