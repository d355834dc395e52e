// launch_plan_offsets_kernel and launch_plan_entries_kernel (spec/kernels.md §7.4): validation
// (rows O1-O19 and E1-E2) and dispatch.
#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "kvcanary/plan.h"
#include "ops/check.h"
#include "ops/dispatch.h"
#include "ops/plan_inputs.h"

#if defined(KVC_HAVE_CUDA)
#include "cuda/backend.h"
#endif

namespace kvcanary {
namespace {

void ValidateOffsets(const PlanOffsetsArgs& a) {
  check::AllPresent({{&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.extend_seq_lens, "extend_seq_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&a.out_verify_offsets_scratch, "out_verify_offsets_scratch"},
                     {&a.out_write_offsets, "out_write_offsets"},
                     {&a.out_write_seed_slot_indices, "out_write_seed_slot_indices"},
                     {&a.out_verify_num_valid, "out_verify_num_valid"},
                     {&a.out_verify_enable, "out_verify_enable"},
                     {&a.out_write_num_valid_reqs, "out_write_num_valid_reqs"}});
  const TensorView& lut = a.full_to_swa_index_mapping;
  const bool has_lut = lut.defined();
  // O1: contiguity, in SGLang's order.
  check::Contiguous(a.req_pool_indices, "req_pool_indices");
  check::Contiguous(a.prefix_lens, "prefix_lens");
  check::Contiguous(a.extend_seq_lens, "extend_seq_lens");
  CheckReqToTokenLayout(a.req_to_token, a.require_contiguous_req_to_token);
  if (has_lut) check::Contiguous(lut, "lut_tensor");
  check::Contiguous(a.out_verify_offsets_scratch, "out_verify_offsets_scratch");
  check::Contiguous(a.out_write_offsets, "out_write_offsets");
  check::Contiguous(a.out_write_seed_slot_indices, "out_write_seed_slot_indices");
  check::Contiguous(a.out_verify_num_valid, "out_verify_num_valid");
  check::Contiguous(a.out_verify_enable, "out_verify_enable");
  check::Contiguous(a.out_write_num_valid_reqs, "out_write_num_valid_reqs");
  // O2: dtypes.
  check::HasDType(a.req_pool_indices, DType::kInt64, "req_pool_indices");
  check::HasDType(a.prefix_lens, DType::kInt64, "prefix_lens");
  check::HasDType(a.extend_seq_lens, DType::kInt64, "extend_seq_lens");
  check::HasDType(a.req_to_token, DType::kInt32, "req_to_token");
  if (has_lut) check::HasDType(lut, DType::kInt64, "lut_tensor");
  check::HasDType(a.out_verify_offsets_scratch, DType::kInt64, "out_verify_offsets_scratch");
  check::HasDType(a.out_write_offsets, DType::kInt64, "out_write_offsets");
  check::HasDType(a.out_write_seed_slot_indices, DType::kInt64, "out_write_seed_slot_indices");
  check::HasDType(a.out_verify_num_valid, DType::kInt32, "out_verify_num_valid");
  check::HasDType(a.out_verify_enable, DType::kInt32, "out_verify_enable");
  check::HasDType(a.out_write_num_valid_reqs, DType::kInt32, "out_write_num_valid_reqs");
  // O3-O11: the derived (or explicitly passed) scalars.
  const int64_t bs = a.req_pool_indices.length();
  const int64_t write_offsets_len = a.out_write_offsets.length();
  const int64_t write_req_capacity = a.out_write_seed_slot_indices.length();
  const int64_t stride0 = a.req_to_token_stride0.value_or(
      a.req_to_token.ndim() >= 1 ? a.req_to_token.stride(0) : 0);
  const int64_t lut_len = a.lut_len.value_or(has_lut ? lut.length() : 0);
  if (bs < 0 || bs > kPlanBsBlockSize) {
    ThrowError("kv-canary: offsets kernel bs must be in [0, ", kPlanBsBlockSize, "], got ", bs);
  }
  if (write_offsets_len <= 0) {
    ThrowError("kv-canary: write_offsets_len must be positive, got ", write_offsets_len);
  }
  if (write_req_capacity < 0) {
    ThrowError("kv-canary: write_req_capacity must be non-negative, got ", write_req_capacity);
  }
  if (a.verify_capacity < 0) {
    ThrowError("kv-canary: verify_capacity must be non-negative, got ", a.verify_capacity);
  }
  if (stride0 <= 0) ThrowError("kv-canary: req_to_token_stride0 must be positive, got ", stride0);
  if (lut_len < 0) ThrowError("kv-canary: lut_len must be non-negative, got ", lut_len);
  if (has_lut && lut_len <= 0) {
    ThrowError("kv-canary: lut_len must be positive when has_swa_lut is True");
  }
  if (!has_lut && lut_len != 0) ThrowError("kv-canary: lut_len must be 0 when has_swa_lut is False");
  // O12, O13: batch lengths, table rank.
  check::Is1D(a.req_pool_indices, "req_pool_indices");
  check::Is1D(a.prefix_lens, "prefix_lens");
  check::HasLength(a.prefix_lens, bs, "prefix_lens");
  check::Is1D(a.extend_seq_lens, "extend_seq_lens");
  check::HasLength(a.extend_seq_lens, bs, "extend_seq_lens");
  check::Is2D(a.req_to_token, "req_to_token");
  // O14: the LUT covers lut_len; the scratch holds SGLang's fixed block.
  if (has_lut) {
    check::Is1D(lut, "lut_tensor");
    check::HasMinLength(lut, lut_len > 1 ? lut_len : 1, "lut_tensor");
  }
  check::Is1D(a.out_verify_offsets_scratch, "out_verify_offsets_scratch");
  check::HasMinLength(a.out_verify_offsets_scratch, kPlanOffsetsScratchMinLength,
                      "out_verify_offsets_scratch");
  // O15: plan arrays.
  check::Is1D(a.out_write_offsets, "out_write_offsets");
  check::Is1D(a.out_write_seed_slot_indices, "out_write_seed_slot_indices");
  check::Is1D(a.out_verify_num_valid, "out_verify_num_valid");
  check::HasLength(a.out_verify_num_valid, 1, "out_verify_num_valid");
  check::Is1D(a.out_verify_enable, "out_verify_enable");
  check::HasLength(a.out_verify_enable, 1, "out_verify_enable");
  check::Is1D(a.out_write_num_valid_reqs, "out_write_num_valid_reqs");
  check::HasLength(a.out_write_num_valid_reqs, 1, "out_write_num_valid_reqs");
  // O16-O18.
  if (write_offsets_len != write_req_capacity + 1) {
    ThrowError("kv-canary: write_offsets_len must equal write_req_capacity + 1, got ",
               write_offsets_len, " and ", write_req_capacity);
  }
  if (bs > write_req_capacity) {
    ThrowError("kv-canary: bs=", bs, " exceeds write_req_capacity=", write_req_capacity);
  }
  CheckReqToTokenStride0(a.req_to_token, a.req_to_token_stride0);
  // O19: one device. G8: outputs writable.
  check::SameDevice(a.out_verify_offsets_scratch, "out_verify_offsets_scratch",
                    {{&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.extend_seq_lens, "extend_seq_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&lut, "lut_tensor"},
                     {&a.out_write_offsets, "out_write_offsets"},
                     {&a.out_write_seed_slot_indices, "out_write_seed_slot_indices"},
                     {&a.out_verify_num_valid, "out_verify_num_valid"},
                     {&a.out_verify_enable, "out_verify_enable"},
                     {&a.out_write_num_valid_reqs, "out_write_num_valid_reqs"}});
  check::AllWritable({{&a.out_verify_offsets_scratch, "out_verify_offsets_scratch"},
                      {&a.out_write_offsets, "out_write_offsets"},
                      {&a.out_write_seed_slot_indices, "out_write_seed_slot_indices"},
                      {&a.out_verify_num_valid, "out_verify_num_valid"},
                      {&a.out_verify_enable, "out_verify_enable"},
                      {&a.out_write_num_valid_reqs, "out_write_num_valid_reqs"}});
}

void ValidateEntries(const PlanEntriesArgs& a) {
  check::AllPresent({{&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&a.verify_offsets_scratch, "verify_offsets_scratch"},
                     {&a.verify_enable, "verify_enable"},
                     {&a.out_verify_slot_indices, "out_verify_slot_indices"},
                     {&a.out_verify_expected_tokens, "out_verify_expected_tokens"},
                     {&a.out_verify_expected_positions, "out_verify_expected_positions"},
                     {&a.out_verify_prev_slot_indices, "out_verify_prev_slot_indices"}});
  const TensorView& pool = a.req_to_verify_expected_tokens;
  const TensorView& lens = a.req_to_verify_expected_tokens_valid_lens;
  const TensorView& lut = a.full_to_swa_index_mapping;
  // E1.
  if (pool.defined() && !lens.defined()) {
    ThrowError("kv-canary: launch_plan_entries_kernel requires "
               "req_to_verify_expected_tokens_valid_lens when req_to_verify_expected_tokens is set");
  }
  check::Contiguous(a.req_pool_indices, "req_pool_indices");
  check::HasDType(a.req_pool_indices, DType::kInt64, "req_pool_indices");
  check::Is1D(a.req_pool_indices, "req_pool_indices");
  const int64_t bs = a.req_pool_indices.size(0);
  check::Contiguous(a.prefix_lens, "prefix_lens");
  check::Vector(a.prefix_lens, DType::kInt64, bs, "prefix_lens");
  // The scratch, then E2.
  check::Contiguous(a.verify_offsets_scratch, "verify_offsets_scratch");
  check::HasDType(a.verify_offsets_scratch, DType::kInt64, "verify_offsets_scratch");
  check::Is1D(a.verify_offsets_scratch, "verify_offsets_scratch");
  if (a.verify_offsets_scratch.size(0) < bs + 1) {
    ThrowError("kv-canary: verify_offsets_scratch length must be >= bs_padded + 1");
  }
  check::Contiguous(a.verify_enable, "verify_enable");
  check::Vector(a.verify_enable, DType::kInt32, 1, "verify_enable");
  const int64_t capacity = a.out_verify_slot_indices.length();
  for (const auto& [tensor, name] :
       {check::Named{&a.out_verify_slot_indices, "out_verify_slot_indices"},
        {&a.out_verify_expected_tokens, "out_verify_expected_tokens"},
        {&a.out_verify_expected_positions, "out_verify_expected_positions"},
        {&a.out_verify_prev_slot_indices, "out_verify_prev_slot_indices"}}) {
    check::Contiguous(*tensor, name);
    check::Vector(*tensor, DType::kInt64, capacity, name);
  }
  CheckReqToTokenLayout(a.req_to_token, a.require_contiguous_req_to_token);
  check::HasDType(a.req_to_token, DType::kInt32, "req_to_token");
  check::Is2D(a.req_to_token, "req_to_token");
  if (lut.defined()) CheckSwaLut(lut, "lut_tensor");
  if (pool.defined()) CheckExpectedTokenPool(pool, lens, bs);
  check::SameDevice(a.verify_offsets_scratch, "verify_offsets_scratch",
                    {{&a.req_pool_indices, "req_pool_indices"},
                     {&a.prefix_lens, "prefix_lens"},
                     {&a.req_to_token, "req_to_token"},
                     {&lut, "lut_tensor"},
                     {&a.verify_enable, "verify_enable"},
                     {&pool, "req_to_verify_expected_tokens"},
                     {&lens, "req_to_verify_expected_tokens_valid_lens"},
                     {&a.out_verify_slot_indices, "out_verify_slot_indices"},
                     {&a.out_verify_expected_tokens, "out_verify_expected_tokens"},
                     {&a.out_verify_expected_positions, "out_verify_expected_positions"},
                     {&a.out_verify_prev_slot_indices, "out_verify_prev_slot_indices"}});
  check::AllWritable({{&a.out_verify_slot_indices, "out_verify_slot_indices"},
                      {&a.out_verify_expected_tokens, "out_verify_expected_tokens"},
                      {&a.out_verify_expected_positions, "out_verify_expected_positions"},
                      {&a.out_verify_prev_slot_indices, "out_verify_prev_slot_indices"}});
}

PlanInputParams InputOf(const TensorView& req_pool_indices, const TensorView& prefix_lens,
                        const TensorView& extend_seq_lens, const TensorView& req_to_token,
                        int64_t swa_window_size, SwaLutParams lut, TokenPoolParams pool) {
  return PlanInputParams{req_pool_indices.data_as<const int64_t>(),
                         prefix_lens.data_as<const int64_t>(),
                         extend_seq_lens.defined() ? extend_seq_lens.data_as<const int64_t>()
                                                   : nullptr,
                         req_pool_indices.size(0),
                         swa_window_size,
                         ReqToTokenOf(req_to_token),
                         lut,
                         pool};
}

}  // namespace

void PlanOffsets(const PlanOffsetsArgs& args, StreamHandle stream) {
  ValidateOffsets(args);
  PlanOffsetsParams params;
  params.in = InputOf(args.req_pool_indices, args.prefix_lens, args.extend_seq_lens,
                      args.req_to_token, args.swa_window_size,
                      SwaLutOf(args.full_to_swa_index_mapping, args.lut_len), TokenPoolParams{});
  params.scratch = args.out_verify_offsets_scratch.data_as<int64_t>();
  params.verify_num_valid = args.out_verify_num_valid.data_as<int32_t>();
  params.verify_enable = args.out_verify_enable.data_as<int32_t>();
  params.verify_capacity = args.verify_capacity;
  params.write = WritePlanOutParams{args.out_write_offsets.data_as<int64_t>(),
                                    args.out_write_offsets.size(0),
                                    args.out_write_seed_slot_indices.data_as<int64_t>(),
                                    args.out_write_num_valid_reqs.data_as<int32_t>()};
  switch (SelectBackend(args.out_verify_offsets_scratch, "out_verify_offsets_scratch")) {
    case Backend::kCpu:
      cpu::PlanOffsets(params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::PlanOffsets(params, args.out_verify_offsets_scratch.device().index, stream), "plan_offsets");
#endif
      return;
  }
  (void)stream;
}

void PlanEntries(const PlanEntriesArgs& args, StreamHandle stream) {
  ValidateEntries(args);
  PlanEntriesParams params;
  params.in = InputOf(args.req_pool_indices, args.prefix_lens, TensorView(), args.req_to_token,
                      args.swa_window_size, SwaLutOf(args.full_to_swa_index_mapping),
                      TokenPoolOf(args.req_to_verify_expected_tokens,
                                  args.req_to_verify_expected_tokens_valid_lens,
                                  args.kv_token_id_vs_position_offset));
  params.scratch = args.verify_offsets_scratch.data_as<const int64_t>();
  params.enable = args.verify_enable.data_as<const int32_t>();
  params.verify = VerifyPlanOutParams{args.out_verify_slot_indices.data_as<int64_t>(),
                                      args.out_verify_expected_tokens.data_as<int64_t>(),
                                      args.out_verify_expected_positions.data_as<int64_t>(),
                                      args.out_verify_prev_slot_indices.data_as<int64_t>(),
                                      nullptr,
                                      nullptr,
                                      args.out_verify_slot_indices.size(0)};
  switch (SelectBackend(args.verify_offsets_scratch, "verify_offsets_scratch")) {
    case Backend::kCpu: {
      // The offsets/entries contract, checked on the host before anything is written (the CUDA
      // kernel traps instead).
      const int64_t total = params.scratch[params.in.bs];
      if (params.enable[0] != 0 && total > params.verify.capacity) {
        ThrowError("kv-canary: plan_entries: total_verify=", total,
                   " exceeds verify_capacity=", params.verify.capacity,
                   " with verify_enable=1 (offsets/entries contract broken)");
      }
      cpu::PlanEntries(params);
      return;
    }
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::PlanEntries(params, args.verify_offsets_scratch.device().index, stream), "plan_entries");
#endif
      return;
  }
  (void)stream;
}

void SwaTranslate(const SwaTranslateArgs& args, StreamHandle stream) {
  check::AllPresent({{&args.slot_indices, "slot_indices"},
                     {&args.full_to_swa_index_mapping, "full_to_swa_index_mapping"},
                     {&args.out_slot_indices, "out_slot_indices"}});
  for (const auto& [tensor, name] :
       {check::Named{&args.slot_indices, "slot_indices"},
        {&args.full_to_swa_index_mapping, "full_to_swa_index_mapping"},
        {&args.out_slot_indices, "out_slot_indices"}}) {
    check::Contiguous(*tensor, name);
    check::HasDType(*tensor, DType::kInt64, name);
    check::Is1D(*tensor, name);
  }
  const int64_t n = args.slot_indices.size(0);
  check::HasLength(args.out_slot_indices, n, "out_slot_indices");
  check::HasMinLength(args.full_to_swa_index_mapping, 1, "full_to_swa_index_mapping");
  check::SameDevice(args.out_slot_indices, "out_slot_indices",
                    {{&args.slot_indices, "slot_indices"},
                     {&args.full_to_swa_index_mapping, "full_to_swa_index_mapping"}});
  check::Writable(args.out_slot_indices, "out_slot_indices");
  const SwaTranslateParams params{args.slot_indices.data_as<const int64_t>(),
                                  args.out_slot_indices.data_as<int64_t>(), n,
                                  SwaLutOf(args.full_to_swa_index_mapping)};
  switch (SelectBackend(args.out_slot_indices, "out_slot_indices")) {
    case Backend::kCpu:
      cpu::SwaTranslate(params);
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda::SwaTranslate(params, args.out_slot_indices.device().index, stream), "swa_translate");
#endif
      return;
  }
  (void)stream;
}

}  // namespace kvcanary
