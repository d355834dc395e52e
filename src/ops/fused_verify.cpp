// FusedVerify: its argument table, validation (Verify's context checks around the plan inputs
// that PlanEntries checks; docs/validation.md) and dispatch.
#include "kvcanary/fused_verify.h"

#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "ops/launch_context.h"
#include "ops/plan_inputs.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

constexpr std::string_view kOp = "fused_verify";

void CheckScalars(const FusedVerifyArgs& a) {
  RequireSwaLutForWindow(a.inputs, kOp);
  RequireValidLensForPool(a.inputs, kOp);
  if (a.verify_capacity < 0 || a.verify_capacity > kMaxDeviceCount) {
    ThrowError("kv-canary: fused_verify verify_capacity must be in [0, ", kMaxDeviceCount,
               "], got ", a.verify_capacity);
  }
}

void Validate(const FusedVerifyArgs& a) {
  const int64_t bs = a.inputs.req_pool_indices.length();
  sig::SpecList table = {CanaryBufSpec(a.context, /*written=*/false)};
  table.Add(RingSpecs(a.context));
  table.Add(BatchSpecs(a.inputs, /*needs_extend=*/false));
  table.Add(sig::In(a.verify_offsets_scratch, "verify_offsets_scratch", DType::kInt64, 1,
                    sig::AtLeast(bs + 1)));
  table.Add(VerifyCountSpecs(a.verify_num_valid, a.verify_enable, PlanNames::kInput));
  table.Add(SwaLutSpec(a.inputs, "full_to_swa_index_mapping"));
  table.Add(TokenPoolSpecs(a.inputs));
  ValidateLaunch(
      a.context, "canary_verify", table, [&] { CheckScalars(a); },
      [&] { CheckReqToTokenStride0(a.inputs); });
}

FusedVerifyParams ParamsOf(const FusedVerifyArgs& a, const LaunchContext& context) {
  PlanInputParams in = InputParamsOf(a.inputs);
  in.extend_seq_lens = nullptr;  // not read: the offsets already hold the counts
  return FusedVerifyParams{.launch = LaunchParamsOf(context),
                           .in = in,
                           .scratch = a.verify_offsets_scratch.data_as<const int64_t>(),
                           .num_valid = a.verify_num_valid.data_as<const int32_t>(),
                           .enable = a.verify_enable.data_as<const int32_t>(),
                           .capacity = a.verify_capacity,
                           .check_token = a.check_verify_expected_token};
}

}  // namespace

void FusedVerify(const FusedVerifyArgs& args, StreamHandle stream) {
  RunPairedOp(args, stream, Validate, ParamsOf, "fused_verify");
}

}  // namespace kvcanary
