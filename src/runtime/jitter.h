// The timing-jitter fuzzer (Config::jitter_*; docs/integration.md, "Timing-jitter fuzzer"). Four
// fixed points of every forward launch the spin-wait op (kvcanary/spin_wait.h) on their own
// element of one static device int64[4] buffer; the host draws the four tick counts before each
// step and copies them in, so the launches, captured into a graph once, spin for new amounts on
// every replay. Delays at these points shift the canary's launches against the engine's KV writes
// on other streams, which is what exposes a missing dependency between them.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kvcanary/runtime/config.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/perturbation.h"

namespace kvcanary::runtime {

// Where a forward spins: before the HEAD plan and verify, after the HEAD write, after the model
// (the runtime has no finer hook than PostForward, so this stands for "after attention"), after
// the TAIL write. The values index the device buffer.
enum class JitterPoint : int { kPreHead = 0, kPostHead = 1, kPostAttn = 2, kPostTail = 3 };
inline constexpr int kNumJitterPoints = 4;
using JitterCycles = std::array<int64_t, kNumJitterPoints>;

// "pre_head", "post_head", "post_attn", "post_tail".
const char* JitterPointName(JitterPoint point);

// The host draw, seeded and identical on every platform (PerturbRng). Per point in order: fire
// when a uniform [0, 1) draw is below fire_prob (0: never, 1: always); a firing point gets
// floor(exp(u * ln(max_cycles + 1))) ticks for a second uniform u, log-uniform in [1, max_cycles]
// (short and long delays equally likely per decade); a point that does not fire gets 0.
class JitterDraw {
 public:
  // REQUIRES: fire_prob in [0, 1], max_cycles >= 1 (Config::Validate).
  JitterDraw(double fire_prob, int64_t max_cycles, uint64_t seed);
  JitterCycles Next();

 private:
  double fire_prob_;
  int64_t max_cycles_;
  PerturbRng rng_;
};

// The device buffer and its per-step upload. The host writes a step's values into one of two
// pinned slots and enqueues its copy on the compute stream; the slot is written again two steps
// later, after the event behind its copy (long complete: the step between them read its results
// back), so the compute stream is never synchronised.
class JitterFuzzer {
 public:
  // REQUIRES: config validated with jitter_enabled.
  JitterFuzzer(const Config& config, Device device);

  // Phase 1: draws the step's four tick counts and enqueues their copy into the device buffer.
  const JitterCycles& StageStep(StreamHandle stream);
  // Phases 2-3: the spin-wait op on `point`'s element (a no-op on the CPU).
  void Launch(JitterPoint point, StreamHandle stream) const;

  // The tick counts the last StageStep drew.
  const JitterCycles& step_cycles() const { return step_cycles_; }
  // The [1] view of `point`'s element of the device buffer.
  TensorView Cycles(JitterPoint point) const;
  int64_t device_bytes() const { return cycles_.bytes(); }

 private:
  JitterDraw draw_;
  Device device_;
  DeviceBuffer cycles_;                      // [4] int64 on the device
  DeviceBuffer staging_[2];                  // [4] int64 each, pinned host memory
  std::unique_ptr<DeviceEvent> copied_[2];   // the copy out of each slot
  int next_slot_ = 0;
  JitterCycles step_cycles_{};
};

}  // namespace kvcanary::runtime
