// The serial floor of the write op on a GPU (see chain_floor.cu).
#pragma once

#include <cstdint>

namespace kvcanary::bench {

// Enqueues one thread that runs `steps` chain steps on registers and stores the result in
// device_out. Returns the cudaError_t of the launch.
int LaunchChainFloor(int64_t steps, uint64_t* device_out, void* stream);

// Enqueues one thread that runs `steps` chain steps over tokens and positions it reads from
// device memory (nothing else), and stores the result in device_out.
int LaunchLoadedChain(const int64_t* tokens, const int64_t* positions, int64_t steps,
                      uint64_t* device_out, void* stream);

}  // namespace kvcanary::bench
