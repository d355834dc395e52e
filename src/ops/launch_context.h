// What Verify, Write and FusedVerify validate alike about their LaunchContext (rows V1-V10 and
// W1-W12 of docs/validation.md), and its conversion into backend parameters.
#pragma once

#include <string_view>

#include "core/params.h"
#include "cpu/backend.h"
#include "kvcanary/context.h"
#include "ops/dispatch.h"
#include "ops/signature.h"

namespace kvcanary {

// canary_buf: uint8 2-D (V5 / W7); `written` by Write, only read by the verify ops.
sig::TensorSpec CanaryBufSpec(const LaunchContext& context, bool written);
// The violation ring (int64 [n, 8]), its write index (int32 [1]) and the two counters (int64
// [1]): written by every launch. An op's table ends with these.
sig::SpecList RingSpecs(const LaunchContext& context);

// V1 / W1: at most kMaxRealKvSources sources.
void CheckSourceCountLimit(const LaunchContext& context);
// V3, V4 per source, then R1-R7 (a hand-built source is checked like a made one).
void CheckSourceLayouts(const LaunchContext& context);
// V6 / W7: records of at least 32 bytes. op_label: "canary_verify" or "canary_write".
void CheckCanaryBufWidth(const LaunchContext& context, std::string_view op_label);
// V8 / W11, then V9 / W12: num_sources in [0, 4]; the mode is 0, 1 or 2.
void CheckSourceCountAndMode(const LaunchContext& context, std::string_view op_label);
// V10 / W12 for the sources: on the canary buffer's device.
void CheckSourceDevices(const LaunchContext& context);

// The checks of a launch whose argument table starts with CanaryBufSpec and holds RingSpecs, in
// this order: presence; V1; `scalars()` (the op's checks of scalars and absent tensors); every
// layout; the sources (V3, V4); canary_buf (V5, V6); the dtypes and shapes of the other rows;
// `sizes()` (the op's checks relating sizes); V8, V9; one device (V10); outputs writable (G8);
// outputs with memory of their own. Bounds (sizes, span, alignment) right after presence.
template <typename Scalars, typename Sizes>
void ValidateLaunch(const LaunchContext& context, std::string_view op_label, sig::Specs table,
                    Scalars&& scalars, Sizes&& sizes) {
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  CheckSourceCountLimit(context);
  scalars();
  sig::CheckEach(table, sig::kLayout);
  CheckSourceLayouts(context);
  sig::CheckEach(table.first(1), sig::kDType | sig::kShape);
  CheckCanaryBufWidth(context, op_label);
  sig::CheckEach(table.subspan(1), sig::kDType | sig::kShape);
  sizes();
  CheckSourceCountAndMode(context, op_label);
  sig::CheckPlacement(context.canary_buf, "canary_buf", table);
  CheckSourceDevices(context);
}

// A paired launch writes or reads two halves at once (concurrently on CUDA): the halves must be
// different canary buffers.
void CheckPairIsDistinct(const LaunchContext& context, const LaunchContext& paired);

// Runs validate(args) and, when args carries a paired context, validate() of the same args with
// the pair as the context, then CheckPairIsDistinct: a paired launch writes nothing unless both
// halves are valid. Args is VerifyArgs, WriteArgs or FusedVerifyArgs.
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

// The halves of a paired op: params_of(args, context), then of its pair when it has one.
template <typename Args, typename ParamsOf>
auto HalvesOf(const Args& args, ParamsOf&& params_of) {
  Halves<decltype(params_of(args, args.context))> halves;
  halves.half[0] = params_of(args, args.context);
  if (args.paired_context.has_value()) {
    halves.half[1] = params_of(args, *args.paired_context);
    halves.num_halves = 2;
  }
  return halves;
}

// A verify or write op after its checks: validates args with `validate` (both halves, see
// ValidateWithPair), then runs it on canary_buf's backend over the halves args.context and its
// pair (their parameters built by `params_of(args, context)`): cpu::RunHalves, or
// cuda::LaunchHalves once for both on `stream`.
template <typename Args, typename Validate, typename ParamsOf>
void RunPairedOp(const Args& args, StreamHandle stream, Validate&& validate, ParamsOf&& params_of,
                 std::string_view op_name) {
  ValidateWithPair(args, validate);
  const auto halves = HalvesOf(args, params_of);
  RunOnBackend(
      args.context.canary_buf, "canary_buf", op_name, [&] { cpu::RunHalves(halves); },
      // Generic, so a build without the CUDA backend never instantiates (or links) the launch.
      [&](auto device) { return cuda::LaunchHalves(halves, device, stream); });
}

LaunchParams LaunchParamsOf(const LaunchContext& context);

}  // namespace kvcanary
