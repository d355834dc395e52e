// launch_canary_plan_kernels: validation (spec/kernels.md §11, rows P1-P10) and dispatch.
#include "kvcanary/plan.h"

#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/plan_inputs.h"

#if defined(KVC_HAVE_CUDA)
#include "cuda/backend.h"
#endif

namespace kvcanary {
namespace {

bool IsOffsetsOnly(const VerifyPlanView& v) {
  return !v.verify_slot_indices.defined() && !v.verify_expected_tokens.defined() &&
         !v.verify_expected_positions.defined() && !v.verify_prev_slot_indices.defined();
}

void CheckCapacityFitsDeviceCount(int64_t capacity, const char* what) {
  if (capacity > kMaxDeviceCount) {
    ThrowError("kv-canary: ", what, " must be <= ", kMaxDeviceCount, ", got ", capacity);
  }
}

void Validate(const PlanArgs& a) {
  const VerifyPlanView& v = a.verify_plan_out;
  const WritePlanView& w = a.write_plan_out;
  // An offsets-only plan (for FusedVerify) has none of the four entry arrays.
  const bool offsets_only = IsOffsetsOnly(v);
  if (!offsets_only) {
    check::AllPresent({{&v.verify_slot_indices, "out_verify_slot_indices"},
                       {&v.verify_expected_tokens, "out_verify_expected_tokens"},
                       {&v.verify_expected_positions, "out_verify_expected_positions"},
                       {&v.verify_prev_slot_indices, "out_verify_prev_slot_indices"}});
  }
  check::AllPresent({{&v.verify_num_valid, "out_verify_num_valid"},
                     {&v.enable, "out_verify_enable"},
                     {&w.write_offsets, "out_write_offsets"},
                     {&w.write_seed_slot_indices, "out_write_seed_slot_indices"},
                     {&w.write_num_valid_reqs, "out_write_num_valid_reqs"},
                     {&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.extend_seq_lens, "extend_seq_lens"},
                     {&a.req_to_token, "req_to_token"}});
  const TensorView& lut = a.full_to_swa_index_mapping;
  const bool has_lut = lut.defined();
  const bool has_pool = a.req_to_verify_expected_tokens.defined();

  // P1, P3, V12, P4.
  if (a.swa_window_size > 0 && !has_lut) {
    ThrowError("kv-canary: launch_canary_plan_kernels requires full_to_swa_index_mapping when "
               "swa_window_size > 0");
  }
  if (offsets_only && !a.verify_offsets_scratch.defined()) {
    ThrowError("kv-canary: launch_canary_plan_kernels requires verify_offsets_scratch for an "
               "offsets-only plan (no verify entry arrays: fused_verify reads the offsets), got None");
  }
  if (offsets_only && a.verify_capacity < 0) {
    ThrowError("kv-canary: launch_canary_plan_kernels verify_capacity must be non-negative, got ",
               a.verify_capacity);
  }
  if (!offsets_only && a.verify_capacity != v.verify_slot_indices.length()) {
    ThrowError("kv-canary: launch_canary_plan_kernels verify_capacity=", a.verify_capacity,
               " does not match verify_plan_out.verify_slot_indices.shape[0]=",
               v.verify_slot_indices.length());
  }
  CheckCapacityFitsDeviceCount(a.verify_capacity, "VerifyPlan verify_capacity");
  if (has_pool && !a.req_to_verify_expected_tokens_valid_lens.defined()) {
    ThrowError("kv-canary: launch_plan_entries_kernel requires "
               "req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens is set");
  }

  // P5 = O1: contiguity.
  check::Contiguous(a.req_pool_indices, "req_pool_indices");
  check::Contiguous(a.prefix_lens, "prefix_lens");
  check::Contiguous(a.extend_seq_lens, "extend_seq_lens");
  CheckReqToTokenLayout(a.req_to_token, a.require_contiguous_req_to_token);
  if (has_lut) check::Contiguous(lut, "lut_tensor");
  check::Contiguous(w.write_offsets, "out_write_offsets");
  check::Contiguous(w.write_seed_slot_indices, "out_write_seed_slot_indices");
  check::Contiguous(v.verify_num_valid, "out_verify_num_valid");
  check::Contiguous(v.enable, "out_verify_enable");
  check::Contiguous(w.write_num_valid_reqs, "out_write_num_valid_reqs");
  // P5 = O2: dtypes.
  check::HasDType(a.req_pool_indices, DType::kInt64, "req_pool_indices");
  check::HasDType(a.prefix_lens, DType::kInt64, "prefix_lens");
  check::HasDType(a.extend_seq_lens, DType::kInt64, "extend_seq_lens");
  check::HasDType(a.req_to_token, DType::kInt32, "req_to_token");
  if (has_lut) check::HasDType(lut, DType::kInt64, "lut_tensor");
  check::HasDType(w.write_offsets, DType::kInt64, "out_write_offsets");
  check::HasDType(w.write_seed_slot_indices, DType::kInt64, "out_write_seed_slot_indices");
  check::HasDType(v.verify_num_valid, DType::kInt32, "out_verify_num_valid");
  check::HasDType(v.enable, DType::kInt32, "out_verify_enable");
  check::HasDType(w.write_num_valid_reqs, DType::kInt32, "out_write_num_valid_reqs");
  // P5 = O12, O13: batch lengths, table rank.
  check::Is1D(a.req_pool_indices, "req_pool_indices");
  const int64_t bs = a.req_pool_indices.size(0);
  check::Is1D(a.prefix_lens, "prefix_lens");
  check::HasLength(a.prefix_lens, bs, "prefix_lens");
  check::Is1D(a.extend_seq_lens, "extend_seq_lens");
  check::HasLength(a.extend_seq_lens, bs, "extend_seq_lens");
  check::Is2D(a.req_to_token, "req_to_token");
  // P5 = O15-O18: plan scalars and the LUT's rank.
  check::Is1D(w.write_offsets, "out_write_offsets");
  check::Is1D(w.write_seed_slot_indices, "out_write_seed_slot_indices");
  check::Is1D(v.verify_num_valid, "out_verify_num_valid");
  check::HasLength(v.verify_num_valid, 1, "out_verify_num_valid");
  check::Is1D(v.enable, "out_verify_enable");
  check::HasLength(v.enable, 1, "out_verify_enable");
  check::Is1D(w.write_num_valid_reqs, "out_write_num_valid_reqs");
  check::HasLength(w.write_num_valid_reqs, 1, "out_write_num_valid_reqs");
  if (has_lut) check::Is1D(lut, "lut_tensor");
  const int64_t write_offsets_len = w.write_offsets.size(0);
  const int64_t write_req_capacity = w.write_seed_slot_indices.size(0);
  if (write_offsets_len != write_req_capacity + 1) {
    ThrowError("kv-canary: write_offsets_len must equal write_req_capacity + 1, got ",
               write_offsets_len, " and ", write_req_capacity);
  }
  if (bs > write_req_capacity) {
    ThrowError("kv-canary: bs=", bs, " exceeds write_req_capacity=", write_req_capacity);
  }
  CheckReqToTokenStride0(a.req_to_token, a.req_to_token_stride0);
  // P6: the LUT is non-empty.
  if (has_lut) check::HasMinLength(lut, 1, "lut_tensor");
  // P7: the verify arrays.
  if (!offsets_only) {
    for (const auto& [tensor, name] :
         {check::Named{&v.verify_slot_indices, "out_verify_slot_indices"},
          {&v.verify_expected_tokens, "out_verify_expected_tokens"},
          {&v.verify_expected_positions, "out_verify_expected_positions"},
          {&v.verify_prev_slot_indices, "out_verify_prev_slot_indices"}}) {
      check::Contiguous(*tensor, name);
      check::Vector(*tensor, DType::kInt64, a.verify_capacity, name);
    }
  }
  // P8: the expected-token pool.
  if (has_pool) {
    CheckExpectedTokenPool(a.req_to_verify_expected_tokens,
                           a.req_to_verify_expected_tokens_valid_lens, bs);
  }
  // P9: the optional workspace.
  if (a.verify_offsets_scratch.defined()) {
    check::Contiguous(a.verify_offsets_scratch, "verify_offsets_scratch");
    check::HasDType(a.verify_offsets_scratch, DType::kInt64, "verify_offsets_scratch");
    check::Is1D(a.verify_offsets_scratch, "verify_offsets_scratch");
    check::HasMinLength(a.verify_offsets_scratch, bs + 1, "verify_offsets_scratch");
  }
  // P10: one device. G8: outputs writable.
  const bool entries = !offsets_only;
  check::SameDevice(entries ? v.verify_slot_indices : v.verify_num_valid,
                    entries ? "out_verify_slot_indices" : "out_verify_num_valid",
                    {{&v.verify_expected_tokens, "out_verify_expected_tokens"},
                     {&v.verify_expected_positions, "out_verify_expected_positions"},
                     {&v.verify_prev_slot_indices, "out_verify_prev_slot_indices"},
                     {&v.verify_num_valid, "out_verify_num_valid"},
                     {&v.enable, "out_verify_enable"},
                     {&w.write_offsets, "out_write_offsets"},
                     {&w.write_seed_slot_indices, "out_write_seed_slot_indices"},
                     {&w.write_num_valid_reqs, "out_write_num_valid_reqs"},
                     {&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.extend_seq_lens, "extend_seq_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&lut, "lut_tensor"},
                     {&a.req_to_verify_expected_tokens, "req_to_verify_expected_tokens"},
                     {&a.req_to_verify_expected_tokens_valid_lens,
                      "req_to_verify_expected_tokens_valid_lens"},
                     {&a.verify_offsets_scratch, "verify_offsets_scratch"}});
  check::AllWritable({{&v.verify_slot_indices, "out_verify_slot_indices"},
                      {&v.verify_expected_tokens, "out_verify_expected_tokens"},
                      {&v.verify_expected_positions, "out_verify_expected_positions"},
                      {&v.verify_prev_slot_indices, "out_verify_prev_slot_indices"},
                      {&v.verify_num_valid, "out_verify_num_valid"},
                      {&v.enable, "out_verify_enable"},
                      {&w.write_offsets, "out_write_offsets"},
                      {&w.write_seed_slot_indices, "out_write_seed_slot_indices"},
                      {&w.write_num_valid_reqs, "out_write_num_valid_reqs"},
                      {&a.verify_offsets_scratch, "verify_offsets_scratch"}});
}

}  // namespace

int64_t VerifyPlanAllocationBytes(int64_t verify_capacity) {
  if (verify_capacity <= 0) {
    ThrowError("kv-canary: VerifyPlan verify_capacity must be positive, got ", verify_capacity);
  }
  CheckCapacityFitsDeviceCount(verify_capacity, "VerifyPlan verify_capacity");
  return 4 * verify_capacity * 8 + 2 * 4;
}

int64_t WritePlanAllocationBytes(int64_t write_req_capacity) {
  if (write_req_capacity <= 0) {
    ThrowError("kv-canary: WritePlan write_req_capacity must be positive, got ",
               write_req_capacity);
  }
  CheckCapacityFitsDeviceCount(write_req_capacity, "WritePlan write_req_capacity");
  return (2 * write_req_capacity + 1) * 8 + 4;
}

void Plan(const PlanArgs& args, StreamHandle stream) {
  Validate(args);
  const VerifyPlanView& v = args.verify_plan_out;
  const WritePlanView& w = args.write_plan_out;
  PlanParams params;
  params.in = PlanInputParams{args.req_pool_indices.data_as<const int64_t>(),
                              args.prefix_lens.data_as<const int64_t>(),
                              args.extend_seq_lens.data_as<const int64_t>(),
                              args.req_pool_indices.size(0),
                              args.swa_window_size,
                              ReqToTokenOf(args.req_to_token),
                              SwaLutOf(args.full_to_swa_index_mapping),
                              TokenPoolOf(args.req_to_verify_expected_tokens,
                                          args.req_to_verify_expected_tokens_valid_lens,
                                          args.kv_token_id_vs_position_offset)};
  params.verify = VerifyPlanOutParams{v.verify_slot_indices.data_as<int64_t>(),
                                      v.verify_expected_tokens.data_as<int64_t>(),
                                      v.verify_expected_positions.data_as<int64_t>(),
                                      v.verify_prev_slot_indices.data_as<int64_t>(),
                                      v.verify_num_valid.data_as<int32_t>(),
                                      v.enable.data_as<int32_t>(),
                                      args.verify_capacity};
  params.write = WritePlanOutParams{w.write_offsets.data_as<int64_t>(), w.write_offsets.size(0),
                                    w.write_seed_slot_indices.data_as<int64_t>(),
                                    w.write_num_valid_reqs.data_as<int32_t>()};
  params.scratch = args.verify_offsets_scratch.defined()
                       ? args.verify_offsets_scratch.data_as<int64_t>()
                       : nullptr;
  const bool offsets_only = IsOffsetsOnly(v);
  const TensorView& placed = offsets_only ? v.verify_num_valid : v.verify_slot_indices;
  switch (SelectBackend(placed, offsets_only ? "out_verify_num_valid" : "out_verify_slot_indices")) {
    case Backend::kCpu:
      cpu::Plan(params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::Plan(params, placed.device().index, stream), "plan");
#endif
      return;
  }
  (void)stream;
}

}  // namespace kvcanary
