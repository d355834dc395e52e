// launch_canary_verify_kernel: validation (spec/kernels.md §11, rows V1-V10) and dispatch.
#include "kvcanary/verify.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/launch_context.h"

#if defined(KVC_HAVE_CUDA)
#include "cuda/backend.h"
#endif

namespace kvcanary {
namespace {

void Validate(const VerifyArgs& a) {
  const LaunchContext& c = a.context;
  const VerifyPlanView& p = a.plan;
  check::AllPresent({{&c.canary_buf, "canary_buf"},
                     {&p.verify_slot_indices, "plan.verify_slot_indices"},
                     {&p.verify_expected_tokens, "plan.verify_expected_tokens"},
                     {&p.verify_expected_positions, "plan.verify_expected_positions"},
                     {&p.verify_prev_slot_indices, "plan.verify_prev_slot_indices"},
                     {&p.verify_num_valid, "plan.verify_num_valid"},
                     {&p.enable, "plan.enable"},
                     {&c.violation_ring, "violation_ring"},
                     {&c.violation_write_index, "violation_write_index"},
                     {&c.slot_run_counter, "slot_run_counter"},
                     {&c.kernel_run_counter, "kernel_run_counter"}});
  CheckSourceCountLimit(c);  // V1
  // V2.
  check::Contiguous(c.canary_buf, "canary_buf");
  check::Contiguous(p.verify_slot_indices, "plan.verify_slot_indices");
  check::Contiguous(p.verify_expected_tokens, "plan.verify_expected_tokens");
  check::Contiguous(p.verify_expected_positions, "plan.verify_expected_positions");
  check::Contiguous(p.verify_prev_slot_indices, "plan.verify_prev_slot_indices");
  check::Contiguous(p.verify_num_valid, "plan.verify_num_valid");
  check::Contiguous(p.enable, "plan.enable");
  CheckRingContiguous(c);
  CheckSourceLayouts(c);                // V3, V4
  CheckCanaryBuf(c, "canary_verify");  // V5, V6
  // V7.
  check::HasDType(p.verify_slot_indices, DType::kInt64, "plan.verify_slot_indices");
  check::Is1D(p.verify_slot_indices, "plan.verify_slot_indices");
  const int64_t capacity = p.verify_slot_indices.size(0);
  check::Vector(p.verify_expected_tokens, DType::kInt64, capacity, "plan.verify_expected_tokens");
  check::Vector(p.verify_expected_positions, DType::kInt64, capacity,
                "plan.verify_expected_positions");
  check::Vector(p.verify_prev_slot_indices, DType::kInt64, capacity,
                "plan.verify_prev_slot_indices");
  check::Vector(p.verify_num_valid, DType::kInt32, 1, "plan.verify_num_valid");
  check::Vector(p.enable, DType::kInt32, 1, "plan.enable");
  CheckRingAndCounters(c);
  CheckSourceCountRange(c, "canary_verify");  // V8
  CheckRealKvHashMode(c);                     // V9
  // V10, then G8.
  CheckContextDevices(c);
  check::SameDevice(c.canary_buf, "canary_buf",
                    {{&p.verify_slot_indices, "plan.verify_slot_indices"},
                     {&p.verify_expected_tokens, "plan.verify_expected_tokens"},
                     {&p.verify_expected_positions, "plan.verify_expected_positions"},
                     {&p.verify_prev_slot_indices, "plan.verify_prev_slot_indices"},
                     {&p.verify_num_valid, "plan.verify_num_valid"},
                     {&p.enable, "plan.enable"}});
  CheckContextWritable(c);
}

VerifyParams ParamsOf(const VerifyArgs& args, const LaunchContext& context) {
  const VerifyPlanView& plan = args.plan;
  VerifyParams params;
  params.launch = LaunchParamsOf(context);
  params.slot_indices = plan.verify_slot_indices.data_as<const int64_t>();
  params.expected_tokens = plan.verify_expected_tokens.data_as<const int64_t>();
  params.expected_positions = plan.verify_expected_positions.data_as<const int64_t>();
  params.prev_slot_indices = plan.verify_prev_slot_indices.data_as<const int64_t>();
  params.num_valid = plan.verify_num_valid.data_as<const int32_t>();
  params.enable = plan.enable.data_as<const int32_t>();
  params.capacity = plan.verify_slot_indices.size(0);
  params.check_token = args.check_verify_expected_token;
  return params;
}

}  // namespace

void Verify(const VerifyArgs& args, StreamHandle stream) {
  ValidateWithPair(args, [](const auto& half) { Validate(half); });
  const VerifyParams params = ParamsOf(args, args.context);
  const bool has_pair = args.paired_context.has_value();
  const VerifyParams paired_params = has_pair ? ParamsOf(args, *args.paired_context) : params;
  switch (SelectBackend(args.context.canary_buf, "canary_buf")) {
    case Backend::kCpu:
      cpu::Verify(params);
      if (has_pair) cpu::Verify(paired_params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::Verify(params, has_pair ? &paired_params : nullptr,
                                   args.context.canary_buf.device().index, stream),
                      "canary_verify");
#endif
      return;
  }
  (void)stream;
}

}  // namespace kvcanary
