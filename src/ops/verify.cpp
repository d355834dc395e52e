// launch_canary_verify_kernel: its argument table, validation (rows V1-V10 of docs/validation.md)
// and dispatch.
#include "kvcanary/verify.h"

#include "ops/launch_context.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

void Validate(const VerifyArgs& a) {
  const VerifyPlanView& plan = a.plan;
  sig::SpecList table = {CanaryBufSpec(a.context, /*written=*/false)};
  table.Add(
      VerifyEntrySpecs(plan, PlanNames::kPlan, sig::Exactly(plan.verify_slot_indices.length())));
  table.Add(VerifyCountSpecs(plan.verify_num_valid, plan.enable, PlanNames::kPlan));
  table.Add(RingSpecs(a.context));
  ValidateLaunch(
      a.context, "canary_verify", table, [] {}, [] {});
}

VerifyParams ParamsOf(const VerifyArgs& args, const LaunchContext& context) {
  const VerifyPlanView& plan = args.plan;
  return VerifyParams{.launch = LaunchParamsOf(context),
                      .slot_indices = plan.verify_slot_indices.data_as<const int64_t>(),
                      .expected_tokens = plan.verify_expected_tokens.data_as<const int64_t>(),
                      .expected_positions = plan.verify_expected_positions.data_as<const int64_t>(),
                      .prev_slot_indices = plan.verify_prev_slot_indices.data_as<const int64_t>(),
                      .num_valid = plan.verify_num_valid.data_as<const int32_t>(),
                      .enable = plan.enable.data_as<const int32_t>(),
                      .capacity = plan.verify_slot_indices.size(0),
                      .check_token = args.check_verify_expected_token};
}

}  // namespace

void Verify(const VerifyArgs& args, StreamHandle stream) {
  RunPairedOp(args, stream, Validate, ParamsOf, "canary_verify");
}

}  // namespace kvcanary
