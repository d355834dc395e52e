// FusedVerify: validation (the verify context checks V1-V10, then the plan-input checks of
// PlanEntries) and dispatch.
#include "kvcanary/fused_verify.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/launch_context.h"
#include "ops/plan_inputs.h"

#if defined(KVC_HAVE_CUDA)
#include "cuda/backend.h"
#endif

namespace kvcanary {
namespace {

void ValidateContext(const LaunchContext& c) {
  CheckSourceCountLimit(c);
  check::Contiguous(c.canary_buf, "canary_buf");
  CheckRingContiguous(c);
  CheckSourceLayouts(c);
  CheckCanaryBuf(c, "canary_verify");
  CheckRingAndCounters(c);
  CheckSourceCountRange(c, "canary_verify");
  CheckRealKvHashMode(c);
  CheckContextDevices(c);
}

void ValidateInputs(const FusedVerifyArgs& a) {
  const TensorView& lut = a.full_to_swa_index_mapping;
  const TensorView& pool = a.req_to_verify_expected_tokens;
  const TensorView& lens = a.req_to_verify_expected_tokens_valid_lens;
  if (a.swa_window_size > 0 && !lut.defined()) {
    ThrowError("kv-canary: fused_verify requires full_to_swa_index_mapping when "
               "swa_window_size > 0");
  }
  if (pool.defined() && !lens.defined()) {
    ThrowError("kv-canary: fused_verify requires req_to_verify_expected_tokens_valid_lens when "
               "req_to_verify_expected_tokens is set");
  }
  if (a.verify_capacity < 0 || a.verify_capacity > kMaxDeviceCount) {
    ThrowError("kv-canary: fused_verify verify_capacity must be in [0, ", kMaxDeviceCount,
               "], got ", a.verify_capacity);
  }
  check::Contiguous(a.req_pool_indices, "req_pool_indices");
  check::HasDType(a.req_pool_indices, DType::kInt64, "req_pool_indices");
  check::Is1D(a.req_pool_indices, "req_pool_indices");
  const int64_t bs = a.req_pool_indices.size(0);
  check::Contiguous(a.prefix_lens, "prefix_lens");
  check::Vector(a.prefix_lens, DType::kInt64, bs, "prefix_lens");
  check::Contiguous(a.verify_offsets_scratch, "verify_offsets_scratch");
  check::HasDType(a.verify_offsets_scratch, DType::kInt64, "verify_offsets_scratch");
  check::Is1D(a.verify_offsets_scratch, "verify_offsets_scratch");
  check::HasMinLength(a.verify_offsets_scratch, bs + 1, "verify_offsets_scratch");
  check::Contiguous(a.verify_num_valid, "verify_num_valid");
  check::Vector(a.verify_num_valid, DType::kInt32, 1, "verify_num_valid");
  check::Contiguous(a.verify_enable, "verify_enable");
  check::Vector(a.verify_enable, DType::kInt32, 1, "verify_enable");
  CheckReqToTokenLayout(a.req_to_token, /*require_contiguous=*/false);
  check::HasDType(a.req_to_token, DType::kInt32, "req_to_token");
  check::Is2D(a.req_to_token, "req_to_token");
  CheckReqToTokenStride0(a.req_to_token, a.req_to_token_stride0);
  if (lut.defined()) CheckSwaLut(lut, "full_to_swa_index_mapping");
  if (pool.defined()) CheckExpectedTokenPool(pool, lens, bs);
}

void Validate(const FusedVerifyArgs& a) {
  const LaunchContext& c = a.context;
  check::AllPresent({{&c.canary_buf, "canary_buf"},
                     {&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&a.verify_offsets_scratch, "verify_offsets_scratch"},
                     {&a.verify_num_valid, "verify_num_valid"},
                     {&a.verify_enable, "verify_enable"},
                     {&c.violation_ring, "violation_ring"},
                     {&c.violation_write_index, "violation_write_index"},
                     {&c.slot_run_counter, "slot_run_counter"},
                     {&c.kernel_run_counter, "kernel_run_counter"}});
  ValidateContext(c);
  ValidateInputs(a);
  check::SameDevice(c.canary_buf, "canary_buf",
                    {{&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&a.full_to_swa_index_mapping, "full_to_swa_index_mapping"},
                     {&a.req_to_verify_expected_tokens, "req_to_verify_expected_tokens"},
                     {&a.req_to_verify_expected_tokens_valid_lens,
                      "req_to_verify_expected_tokens_valid_lens"},
                     {&a.verify_offsets_scratch, "verify_offsets_scratch"},
                     {&a.verify_num_valid, "verify_num_valid"},
                     {&a.verify_enable, "verify_enable"}});
  CheckContextWritable(c);
}

FusedVerifyParams ParamsOf(const FusedVerifyArgs& a, const LaunchContext& context) {
  FusedVerifyParams params;
  params.launch = LaunchParamsOf(context);
  params.in.req_pool_indices = a.req_pool_indices.data_as<const int64_t>();
  params.in.prefix_lens = a.prefix_lens.data_as<const int64_t>();
  params.in.bs = a.req_pool_indices.size(0);
  params.in.swa_window_size = a.swa_window_size;
  params.in.req_to_token = ReqToTokenOf(a.req_to_token);
  params.in.lut = SwaLutOf(a.full_to_swa_index_mapping);
  params.in.pool = TokenPoolOf(a.req_to_verify_expected_tokens,
                               a.req_to_verify_expected_tokens_valid_lens,
                               a.kv_token_id_vs_position_offset);
  params.scratch = a.verify_offsets_scratch.data_as<const int64_t>();
  params.num_valid = a.verify_num_valid.data_as<const int32_t>();
  params.enable = a.verify_enable.data_as<const int32_t>();
  params.capacity = a.verify_capacity;
  params.check_token = a.check_verify_expected_token;
  return params;
}

}  // namespace

FusedVerifyArgs FusedVerifyArgsOf(const PlanArgs& plan) {
  FusedVerifyArgs args;
  args.req_pool_indices = plan.req_pool_indices;
  args.prefix_lens = plan.prefix_lens;
  args.req_to_token = plan.req_to_token;
  args.req_to_token_stride0 = plan.req_to_token_stride0;
  args.swa_window_size = plan.swa_window_size;
  args.full_to_swa_index_mapping = plan.full_to_swa_index_mapping;
  args.req_to_verify_expected_tokens = plan.req_to_verify_expected_tokens;
  args.req_to_verify_expected_tokens_valid_lens = plan.req_to_verify_expected_tokens_valid_lens;
  args.kv_token_id_vs_position_offset = plan.kv_token_id_vs_position_offset;
  args.verify_offsets_scratch = plan.verify_offsets_scratch;
  args.verify_num_valid = plan.verify_plan_out.verify_num_valid;
  args.verify_enable = plan.verify_plan_out.enable;
  args.verify_capacity = plan.verify_capacity;
  return args;
}

void FusedVerify(const FusedVerifyArgs& args, StreamHandle stream) {
  ValidateWithPair(args, [](const auto& half) { Validate(half); });
  const FusedVerifyParams params = ParamsOf(args, args.context);
  const bool has_pair = args.paired_context.has_value();
  const FusedVerifyParams paired_params = has_pair ? ParamsOf(args, *args.paired_context) : params;
  switch (SelectBackend(args.context.canary_buf, "canary_buf")) {
    case Backend::kCpu:
      cpu::FusedVerify(params);
      if (has_pair) cpu::FusedVerify(paired_params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::FusedVerify(params, has_pair ? &paired_params : nullptr,
                                        args.context.canary_buf.device().index, stream),
                      "fused_verify");
#endif
      return;
  }
  (void)stream;
}

}  // namespace kvcanary
