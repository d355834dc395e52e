// FusedStage: its parts' checks (the same code as Plan, FusedVerify and Write run), the checks of
// the whole, and dispatch.
#include "kvcanary/fused_stage.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "ops/check.h"
#include "ops/launch_context.h"
#include "ops/op_parts.h"

namespace kvcanary {
namespace {

void Validate(const FusedStageArgs& a) {
  if (a.plan.has_value()) {
    if (!IsOffsetsOnly(a.plan->verify_plan_out)) {
      ThrowError(
          "kv-canary: fused_stage plan must be offsets-only (no verify entry arrays: the stage's "
          "verify derives its entries), got verify_plan_out with entry arrays");
    }
    ValidatePlan(*a.plan);
  }
  ValidateWithPair(a.verify, ValidateFusedVerify);
  ValidateWithPair(a.write, ValidateWrite);
  if (a.advance_phase.has_value()) ValidateAdvanceVerifyPhase(*a.advance_phase);
  // The parts run on one backend and stream, chosen by the verify's canary_buf: one device.
  const TensorView absent;
  check::SameDevice(a.verify.context.canary_buf, "verify.context.canary_buf",
                    {{&a.write.context.canary_buf, "write.context.canary_buf"},
                     {a.plan.has_value() ? &a.plan->verify_plan_out.verify_num_valid : &absent,
                      "plan.verify_plan_out.verify_num_valid"},
                     {a.advance_phase.has_value() ? &a.advance_phase->verify_phase : &absent,
                      "advance_phase.verify_phase"}});
}

}  // namespace

void FusedStage(const FusedStageArgs& args, StreamHandle stream) {
  Validate(args);
  StageParams params;
  params.has_plan = args.plan.has_value();
  if (params.has_plan) params.plan = PlanParamsOf(*args.plan);
  params.verify = HalvesOf(args.verify, FusedVerifyParamsOf);
  params.write = HalvesOf(args.write, WriteParamsOf);
  params.has_advance = args.advance_phase.has_value();
  if (params.has_advance) params.advance = AdvancePhaseParamsOf(*args.advance_phase);
  RunOnBackend(
      args.verify.context.canary_buf, "verify.context.canary_buf", "fused_stage",
      [&] { cpu::RunStage(params); },
      [&](auto device) { return cuda::RunStage(params, device, stream); });
}

}  // namespace kvcanary
