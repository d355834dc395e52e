// The floor of a prefill write: one thread stepping the chain hash over registers, nothing else.
// The chain is the one serial dependency of the write op (each record's prev_hash is the hash of
// the one before), so no write of n tokens can beat n of these steps.
#include <cuda_runtime.h>

#include "bench/chain_floor.h"
#include "kvcanary/hash.h"

namespace kvcanary::bench {
namespace {

__global__ void ChainFloorKernel(uint64_t seed, int64_t steps, uint64_t* out) {
  uint64_t running = seed;
  for (int64_t i = 0; i < steps; ++i) {
    running = ChainStep(running, 1000 + i, i);
  }
  *out = running;  // keeps the loop alive
}

// The same chain over inputs read from memory. Its inputs are kernel parameters above, so the
// compiler runs that chain on the uniform datapath (UIMAD/USHF); inputs from memory put the chain
// on the vector datapath, which is slower per step on Hopper. No write kernel, whose tokens come
// from memory, can beat this loop.
__global__ void LoadedChainKernel(const int64_t* __restrict__ tokens,
                                  const int64_t* __restrict__ positions, int64_t steps,
                                  uint64_t* out) {
  uint64_t running = ChainHeadHash();
  for (int64_t i = 0; i < steps; ++i) {
    running = ChainStep(running, __ldg(tokens + i), __ldg(positions + i));
  }
  *out = running;
}

}  // namespace

int LaunchLoadedChain(const int64_t* tokens, const int64_t* positions, int64_t steps,
                      uint64_t* device_out, void* stream) {
  LoadedChainKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(tokens, positions, steps,
                                                                    device_out);
  return static_cast<int>(cudaGetLastError());
}

int LaunchChainFloor(int64_t steps, uint64_t* device_out, void* stream) {
  ChainFloorKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(ChainHeadHash(), steps,
                                                                   device_out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvcanary::bench
