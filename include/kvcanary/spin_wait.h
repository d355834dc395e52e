// The spin-wait operation: the timing-jitter fuzzer's delay (docs/integration.md, "Timing-jitter
// fuzzer"). On CUDA one thread spins for min(cycles[0], kMaxSpinWaitCycles) device clock ticks
// (clock64), and never longer than kMaxSpinWaitNanoseconds of wall-clock time, reading cycles[0]
// from device memory when the kernel runs, so a captured CUDA graph picks up a new value on each
// replay; cycles[0] <= 0 returns at once. On the CPU it does
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

// The most ticks one launch spins, whatever cycles[0] holds: at least ~50 ms at the peak clock of
// current data-centre GPUs (about 2 GHz), longer at lower clocks, and never beyond the wall-clock
// limit below.
inline constexpr int64_t kMaxSpinWaitCycles = 100'000'000;
// The wall-clock limit of one launch (the GPU's global nanosecond timer, %globaltimer): a spin
// stops here even if its ticks are not spent, so a low clock, a counter that does not advance as
// expected or a thread moved between SMs can never stretch it without bound and no input can hang
// a server. At any clock of 500 MHz or more kMaxSpinWaitCycles are spent before it.
inline constexpr int64_t kMaxSpinWaitNanoseconds = 200'000'000;

struct SpinWaitArgs {
  TensorView cycles;  // [1] int64: the ticks to spin, read on the device at run time
};

void SpinWait(const SpinWaitArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
