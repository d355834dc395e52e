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

// HEAD's store of its entries for the stage's verifies: PlanEntries of the plan into
// verify.stored_entries (run only when they fit, checked as that op checks its call).
PlanEntriesArgs StoreOf(const FusedStageArgs& a) {
  const PlanArgs& plan = *a.plan;
  const VerifyPlanView& stored = *a.verify.stored_entries;
  return PlanEntriesArgs{.inputs = plan.inputs,
                         .verify_offsets_scratch = plan.verify_offsets_scratch,
                         .verify_enable = plan.verify_plan_out.enable,
                         .out_verify_slot_indices = stored.verify_slot_indices,
                         .out_verify_expected_tokens = stored.verify_expected_tokens,
                         .out_verify_expected_positions = stored.verify_expected_positions,
                         .out_verify_prev_slot_indices = stored.verify_prev_slot_indices};
}

bool StoresEntries(const FusedStageArgs& a) {
  return a.plan.has_value() && a.verify.stored_entries.has_value();
}

void Validate(const FusedStageArgs& a) {
  if (a.plan.has_value()) {
    if (!IsOffsetsOnly(a.plan->verify_plan_out)) {
      ThrowError(
          "kv-canary: fused_stage plan must be offsets-only (no verify entry arrays: the stage's "
          "verify derives its entries), got verify_plan_out with entry arrays");
    }
    CheckInContext("fused_stage plan", [&] { ValidatePlan(*a.plan); });
  }
  // Each part's messages name its own arguments; the context names the part.
  CheckInContext("fused_stage verify", [&] { ValidateWithPair(a.verify, ValidateFusedVerify); });
  if (StoresEntries(a)) {
    CheckInContext("fused_stage verify.stored_entries, stored after the plan",
                   [&] { ValidatePlanEntries(StoreOf(a)); });
  }
  CheckInContext("fused_stage write", [&] { ValidateWithPair(a.write, ValidateWrite); });
  if (a.advance_phase.has_value()) {
    CheckInContext("fused_stage advance_phase",
                   [&] { ValidateAdvanceVerifyPhase(*a.advance_phase); });
  }
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
  params.has_store = StoresEntries(args);
  if (params.has_store) {
    params.store = PlanEntriesParamsOf(StoreOf(args));
    params.store.only_when_fits = true;
  }
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
