#include "ops/plan_inputs.h"

#include "kvcanary/error.h"

namespace kvcanary {

sig::SpecList BatchSpecs(const PlanInputs& in, bool needs_extend) {
  const int64_t bs = in.req_pool_indices.length();
  sig::TensorSpec extend =
      sig::In(in.extend_seq_lens, "extend_seq_lens", DType::kInt64, 1, sig::Exactly(bs));
  if (!needs_extend) extend = sig::Optional(extend);
  sig::TensorSpec table = sig::In(in.req_to_token, "req_to_token", DType::kInt32, 2);
  table.layout =
      in.require_contiguous_req_to_token ? sig::Layout::kContiguous : sig::Layout::kRowView;
  return {sig::In(in.req_pool_indices, "req_pool_indices", DType::kInt64, 1),
          sig::In(in.prefix_lens, "prefix_lens", DType::kInt64, 1, sig::Exactly(bs)), extend,
          table};
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

void CheckReqToTokenStride0(const PlanInputs& in) {
  const auto& stride0 = in.req_to_token_stride0;
  if (stride0.has_value() && *stride0 != in.req_to_token.stride(0)) {
    ThrowError("kv-canary: req_to_token_stride0=", *stride0,
               " does not match req_to_token.stride(0)=", in.req_to_token.stride(0));
  }
}

SwaLutParams SwaLutOf(const TensorView& lut, std::optional<int64_t> lut_len) {
  if (!lut.defined()) return SwaLutParams{};
  return SwaLutParams{lut.data_as<const int64_t>(), lut_len.value_or(lut.size(0))};
}

PlanInputParams InputParamsOf(const PlanInputs& in, std::optional<int64_t> lut_len) {
  const TensorView& table = in.req_to_token;
  const TensorView& pool = in.req_to_verify_expected_tokens;
  PlanInputParams params;
  params.req_pool_indices = in.req_pool_indices.data_as<const int64_t>();
  params.prefix_lens = in.prefix_lens.data_as<const int64_t>();
  params.extend_seq_lens =
      in.extend_seq_lens.defined() ? in.extend_seq_lens.data_as<const int64_t>() : nullptr;
  params.bs = in.req_pool_indices.size(0);
  params.swa_window_size = in.swa_window_size;
  params.req_to_token = ReqToTokenParams{table.data_as<const int32_t>(), table.size(0),
                                         table.size(1), table.stride(0)};
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
