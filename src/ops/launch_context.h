// What verify and write validate alike about their LaunchContext, and its conversion into backend
// parameters. Each helper is one step of the spec's check order (spec/kernels.md §11).
#pragma once

#include <string_view>

#include "core/params.h"
#include "kvcanary/context.h"

namespace kvcanary {

// V1 / W1: at most kMaxRealKvSources sources.
void CheckSourceCountLimit(const LaunchContext& context);
// V2 / W6: the contiguity of the ring, write index and counters, in that order.
void CheckRingContiguous(const LaunchContext& context);
// V3, V4 per source, then R1-R7 (a hand-built source is checked like a made one).
void CheckSourceLayouts(const LaunchContext& context);
// V5, V6 / W7: uint8 2-D records of at least 32 bytes. op_label: "canary_verify" or "canary_write".
void CheckCanaryBuf(const LaunchContext& context, std::string_view op_label);
// V7 / W10: write index int32 [1], ring int64 [n, 8], counters int64 [1].
void CheckRingAndCounters(const LaunchContext& context);
// V8 / W11: num_sources in [0, 4].
void CheckSourceCountRange(const LaunchContext& context, std::string_view op_label);
// V9 / W12: the mode is 0, 1 or 2.
void CheckRealKvHashMode(const LaunchContext& context);
// V10 / W12: the ring, counters and sources on the canary buffer's device.
void CheckContextDevices(const LaunchContext& context);
// G8: ring, write index and counters writable.
void CheckContextWritable(const LaunchContext& context);

// A paired launch writes or reads two halves at once (concurrently on CUDA): the halves must be
// different canary buffers.
void CheckPairIsDistinct(const LaunchContext& context, const LaunchContext& paired);

// Runs validate(args) and, when args carries a paired context, validate() of the same args with
// the pair as the context, then CheckPairIsDistinct: a paired launch writes nothing unless both
// halves are valid. Args is VerifyArgs or WriteArgs.
template <typename Args, typename Validate>
void ValidateWithPair(const Args& args, Validate&& validate) {
  validate(args);
  if (!args.paired_context.has_value()) return;
  Args paired = args;
  paired.context = *args.paired_context;
  paired.paired_context.reset();
  validate(paired);
  CheckPairIsDistinct(args.context, *args.paired_context);
}

LaunchParams LaunchParamsOf(const LaunchContext& context);

}  // namespace kvcanary
