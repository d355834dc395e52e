// The hashes of the record format (docs/format.md): splitmix64, the three-input mix, the slot hash of a record and
// the 16-byte real-KV fold step. One formula for every backend: the CPU loops and the CUDA kernels
// call these same inline functions, so a differential test compares two schedules of one
// arithmetic. All arithmetic is on uint64_t, mod 2^64.
#pragma once

#include <cstdint>

#include "kvcanary/format.h"

#if defined(__CUDACC__)
#define KVC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KVC_HOST_DEVICE inline
#endif

namespace kvcanary {

// The stored form of a u64 hash (two's-complement bit pattern) and back.
KVC_HOST_DEVICE constexpr int64_t ToSigned(uint64_t x) { return static_cast<int64_t>(x); }
KVC_HOST_DEVICE constexpr uint64_t ToUnsigned(int64_t x) { return static_cast<uint64_t>(x); }

KVC_HOST_DEVICE constexpr uint64_t Splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * kSplitmix64Multiplier1;
  x = (x ^ (x >> 27)) * kSplitmix64Multiplier2;
  return x ^ (x >> 31);
}

// Order matters: a, then b, then c.
KVC_HOST_DEVICE constexpr uint64_t Splitmix64Mix3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = Splitmix64(a);
  h = Splitmix64(h ^ b);
  return Splitmix64(h ^ c);
}

// What a position-0 record stores, and what a seed of -1 starts the running hash at.
KVC_HOST_DEVICE constexpr uint64_t ChainHeadHash() { return Splitmix64(kCanaryChainAnchor); }

// slot_hash of a record: the value its successor stores as prev_hash. real_kv_hash is not an
// input (radix sharing may repoint a row to a slot of another request with equal tokens).
KVC_HOST_DEVICE constexpr uint64_t RecordHash(int64_t token, int64_t position, int64_t prev_hash) {
  return Splitmix64Mix3(ToUnsigned(prev_hash), ToUnsigned(token), ToUnsigned(position));
}

// One step of the running chain hash: R <- mix3(R, token, position).
KVC_HOST_DEVICE constexpr uint64_t ChainStep(uint64_t running, int64_t token, int64_t position) {
  return Splitmix64Mix3(running, ToUnsigned(token), ToUnsigned(position));
}

// Folds one 16-byte block (two little-endian words) of a source strip into its accumulator.
KVC_HOST_DEVICE constexpr uint64_t FoldRealKvBlock(uint64_t acc, uint64_t lo, uint64_t hi) {
  acc = Splitmix64(acc ^ lo);
  return Splitmix64(acc ^ hi);
}

// Combines one source's hash into the fingerprint of all sources (in source order).
KVC_HOST_DEVICE constexpr uint64_t CombineSourceHash(uint64_t acc, uint64_t source_hash) {
  return Splitmix64(acc ^ source_hash);
}

static_assert(Splitmix64(0) == 0, "splitmix64 has 0 as a fixed point");
static_assert(ChainHeadHash() == 0xDE7FAE23A9A1B716ull, "the published chain head hash");

}  // namespace kvcanary
