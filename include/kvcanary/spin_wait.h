// The spin-wait operation: the timing-jitter fuzzer's delay (docs/integration.md, "Timing-jitter
// fuzzer"). On CUDA one thread spins for min(cycles[0], kMaxSpinWaitCycles) device clock ticks
// (clock64), reading cycles[0] from device memory when the kernel runs, so a captured CUDA graph
// picks up a new value on each replay; cycles[0] <= 0 returns at once. On the CPU it does
// nothing: it validates and returns, counting and changing nothing.
//
// Validation, in this order (kv-canary: jitter: ...): present; addressable; cycles must be int64;
// cycles must live on CUDA (a CPU tensor is accepted too: the no-op); cycles must be contiguous;
// cycles must have shape [1]. A CUDA tensor in a build without the CUDA backend is then refused
// like every op's ("kv-canary: cycles is on unsupported device cuda:N"). CUDA: enqueued on
// `stream`, no synchronisation, graph-capturable.
#pragma once

#include <cstdint>

#include "kvcanary/tensor.h"

namespace kvcanary {

// The longest spin one launch can make, whatever cycles[0] holds: about 50-70 ms at the 1.4-2 GHz
// of current data-centre GPUs, so no input can hang a server.
inline constexpr int64_t kMaxSpinWaitCycles = 100'000'000;

struct SpinWaitArgs {
  TensorView cycles;  // [1] int64: the ticks to spin, read on the device at run time
};

void SpinWait(const SpinWaitArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
