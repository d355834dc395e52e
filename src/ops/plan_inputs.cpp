#include "ops/plan_inputs.h"

#include "kvcanary/error.h"
#include "ops/check.h"

namespace kvcanary {

void CheckReqToTokenLayout(const TensorView& req_to_token, bool require_contiguous) {
  if (require_contiguous || req_to_token.ndim() != 2) {
    check::Contiguous(req_to_token, "req_to_token");
    return;
  }
  const int64_t rows = req_to_token.size(0);
  const int64_t width = req_to_token.size(1);
  const bool inner_ok = width <= 1 || req_to_token.stride(1) == 1;
  const bool rows_ok = rows <= 1 || width == 0 || req_to_token.stride(0) >= width;
  if (!inner_ok || !rows_ok) {
    ThrowError("kv-canary: req_to_token must have stride 1 in its last dimension and a row stride "
               ">= its width, got shape ",
               req_to_token.ShapeString(), " strides ", req_to_token.StridesString());
  }
}

void CheckReqToTokenStride0(const TensorView& req_to_token, std::optional<int64_t> stride0) {
  if (stride0.has_value() && *stride0 != req_to_token.stride(0)) {
    ThrowError("kv-canary: req_to_token_stride0=", *stride0,
               " does not match req_to_token.stride(0)=", req_to_token.stride(0));
  }
}

void CheckSwaLut(const TensorView& lut, std::string_view name) {
  check::Contiguous(lut, name);
  check::HasDType(lut, DType::kInt64, name);
  check::Is1D(lut, name);
  check::HasMinLength(lut, 1, name);
}

void CheckExpectedTokenPool(const TensorView& pool, const TensorView& valid_lens, int64_t bs) {
  check::Contiguous(pool, "req_to_verify_expected_tokens");
  check::HasDType(pool, DType::kInt32, "req_to_verify_expected_tokens");
  check::Is2D(pool, "req_to_verify_expected_tokens");
  check::Contiguous(valid_lens, "req_to_verify_expected_tokens_valid_lens");
  check::Vector(valid_lens, DType::kInt64, bs, "req_to_verify_expected_tokens_valid_lens");
}

ReqToTokenParams ReqToTokenOf(const TensorView& req_to_token) {
  return ReqToTokenParams{req_to_token.data_as<const int32_t>(), req_to_token.size(0),
                          req_to_token.size(1), req_to_token.stride(0)};
}

SwaLutParams SwaLutOf(const TensorView& lut, std::optional<int64_t> lut_len) {
  if (!lut.defined()) return SwaLutParams{};
  return SwaLutParams{lut.data_as<const int64_t>(), lut_len.value_or(lut.size(0))};
}

TokenPoolParams TokenPoolOf(const TensorView& pool, const TensorView& valid_lens,
                            int64_t position_offset) {
  if (!pool.defined()) return TokenPoolParams{};
  return TokenPoolParams{pool.data_as<const int32_t>(), pool.size(0),          pool.size(1),
                         pool.stride(0),                valid_lens.data_as<const int64_t>(),
                         position_offset};
}

}  // namespace kvcanary
