#include "ops/plan_inputs.h"

#include <bit>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

namespace kvcanary {

sig::SpecList BatchSpecs(const PlanInputs& in, bool needs_extend) {
  const int64_t bs = in.req_pool_indices.length();
  sig::TensorSpec extend =
      sig::In(in.extend_seq_lens, "extend_seq_lens", DType::kInt64, 1, sig::Exactly(bs));
  if (!needs_extend) extend = sig::Optional(extend);
  sig::TensorSpec table = in.block_table.defined()
                              ? sig::In(in.block_table, "block_table", DType::kInt32, 2)
                              : sig::In(in.req_to_token, "req_to_token", DType::kInt32, 2);
  table.int32_or_int64 = in.block_table.defined();
  table.layout =
      in.require_contiguous_req_to_token ? sig::Layout::kContiguous : sig::Layout::kRowView;
  return {sig::In(in.req_pool_indices, "req_pool_indices", DType::kInt64, 1),
          sig::In(in.prefix_lens, "prefix_lens", DType::kInt64, 1, sig::Exactly(bs)), extend,
          table,
          sig::Optional(sig::In(in.verify_phase, "verify_phase", DType::kInt64, 1,
                                sig::AtLeast(1)))};
}

sig::TensorSpec SwaLutSpec(const PlanInputs& in, std::string_view name, int64_t min_length) {
  return sig::Optional(
      sig::In(in.full_to_swa_index_mapping, name, DType::kInt64, 1, sig::AtLeast(min_length)));
}

sig::SpecList TokenPoolSpecs(const PlanInputs& in) {
  const int64_t bs = in.req_pool_indices.length();
  return {sig::Optional(sig::In(in.req_to_verify_expected_tokens, "req_to_verify_expected_tokens",
                                DType::kInt32, 2)),
          sig::Optional(sig::In(in.req_to_verify_expected_tokens_valid_lens,
                                "req_to_verify_expected_tokens_valid_lens", DType::kInt64, 1,
                                sig::Exactly(bs)))};
}

void RequireSwaLutForWindow(const PlanInputs& in, std::string_view op) {
  if (in.swa_window_size > 0 && !in.full_to_swa_index_mapping.defined()) {
    ThrowError("kv-canary: ", op, " requires full_to_swa_index_mapping when swa_window_size > 0");
  }
}

void RequireValidLensForPool(const PlanInputs& in, std::string_view op) {
  if (in.req_to_verify_expected_tokens.defined() &&
      !in.req_to_verify_expected_tokens_valid_lens.defined()) {
    ThrowError("kv-canary: ", op,
               " requires req_to_verify_expected_tokens_valid_lens when "
               "req_to_verify_expected_tokens is set");
  }
}

const TensorView& SlotTableOf(const PlanInputs& in) {
  return in.block_table.defined() ? in.block_table : in.req_to_token;
}

void CheckTableChoice(const PlanInputs& in) {
  const bool per_token = in.req_to_token.defined();
  const bool paged = in.block_table.defined();
  if (!per_token && !paged) {
    ThrowError("kv-canary: req_to_token or block_table is required, got neither");
  }
  if (per_token && paged) {
    ThrowError("kv-canary: req_to_token or block_table is required, not both");
  }
  if (per_token && in.block_size != 1) {
    ThrowError("kv-canary: block_size must be 1 with req_to_token, got ", in.block_size);
  }
  CheckInRange<int64_t>("block_size", in.block_size, 1, kMaxBlockSize);
  CheckVerifySample(in);
}

void CheckVerifySample(const PlanInputs& in) {
  CheckInRange<int64_t>("verify_sample", in.verify_sample, 1, kMaxVerifySample);
}

void CheckTableSizes(const PlanInputs& in) {
  const auto& stride0 = in.req_to_token_stride0;
  const TensorView& table = SlotTableOf(in);
  const std::string_view name = in.block_table.defined() ? "block_table" : "req_to_token";
  if (stride0.has_value() && *stride0 != table.stride(0)) {
    ThrowError("kv-canary: req_to_token_stride0=", *stride0, " does not match ", name,
               ".stride(0)=", table.stride(0));
  }
  if (in.block_table.defined()) {
    CheckedMul("block_table positions per row (max_blocks * block_size)", table.size(1),
               in.block_size);
  }
}

SwaLutParams SwaLutOf(const TensorView& lut, std::optional<int64_t> lut_len) {
  if (!lut.defined()) return SwaLutParams{};
  return SwaLutParams{lut.data_as<const int64_t>(), lut_len.value_or(lut.size(0))};
}

ReqToTokenParams SlotTableParamsOf(const PlanInputs& in) {
  const TensorView& table = SlotTableOf(in);
  const bool wide = table.dtype() == DType::kInt64;
  ReqToTokenParams params;
  params.data = wide ? nullptr : table.data_as<const int32_t>();
  params.data64 = wide ? table.data_as<const int64_t>() : nullptr;
  params.rows = table.size(0);
  params.width = table.size(1) * in.block_size;  // no overflow: CheckTableSizes
  params.row_stride = table.stride(0);
  params.paged = wide || in.block_size > 1;
  params.block_size = in.block_size;
  const auto block_size = static_cast<uint64_t>(in.block_size);
  params.block_shift =
      std::has_single_bit(block_size) ? static_cast<int32_t>(std::countr_zero(block_size)) : -1;
  return params;
}

PlanInputParams InputParamsOf(const PlanInputs& in, std::optional<int64_t> lut_len) {
  const TensorView& pool = in.req_to_verify_expected_tokens;
  PlanInputParams params;
  params.req_pool_indices = in.req_pool_indices.data_as<const int64_t>();
  params.prefix_lens = in.prefix_lens.data_as<const int64_t>();
  params.extend_seq_lens =
      in.extend_seq_lens.defined() ? in.extend_seq_lens.data_as<const int64_t>() : nullptr;
  params.bs = in.req_pool_indices.size(0);
  params.swa_window_size = in.swa_window_size;
  params.verify_sample = in.verify_sample;
  if (in.verify_phase.defined()) {
    params.verify_phase = in.verify_phase.data_as<const int64_t>();
    params.verify_phase_len = in.verify_phase.size(0);
  }
  params.req_to_token = SlotTableParamsOf(in);
  params.lut = SwaLutOf(in.full_to_swa_index_mapping, lut_len);
  if (pool.defined()) {
    params.pool =
        TokenPoolParams{pool.data_as<const int32_t>(),
                        pool.size(0),
                        pool.size(1),
                        pool.stride(0),
                        in.req_to_verify_expected_tokens_valid_lens.data_as<const int64_t>(),
                        in.kv_token_id_vs_position_offset};
  }
  return params;
}

}  // namespace kvcanary
