// What the three plan ops share: the req_to_token view rule (spec D10) and the conversion of
// validated views into backend parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/params.h"
#include "kvcanary/tensor.h"

namespace kvcanary {

// At the O1 position of req_to_token: the Python launchers keep SGLang's contiguity check; the C++
// API accepts any 2-D view with unit inner stride and row stride >= width (D10). A tensor that is
// not 2-D is left to the rank check (O13), except that it must still be contiguous.
void CheckReqToTokenLayout(const TensorView& req_to_token, bool require_contiguous);

// O18: an explicit pitch must equal the view's row stride.
void CheckReqToTokenStride0(const TensorView& req_to_token, std::optional<int64_t> stride0);

// A present SWA table: contiguous int64, 1-D, at least one entry; `name` is the one messages use.
void CheckSwaLut(const TensorView& lut, std::string_view name);

// A present expected-token pool (int32 2-D, contiguous) and its valid lengths (int64 [bs]).
void CheckExpectedTokenPool(const TensorView& pool, const TensorView& valid_lens, int64_t bs);

// Pointers and sizes of validated views. An absent LUT gives len 0 (identity); an absent pool
// gives data nullptr (every expected token -1).
ReqToTokenParams ReqToTokenOf(const TensorView& req_to_token);
SwaLutParams SwaLutOf(const TensorView& lut, std::optional<int64_t> lut_len = std::nullopt);
TokenPoolParams TokenPoolOf(const TensorView& pool, const TensorView& valid_lens,
                            int64_t position_offset);

}  // namespace kvcanary
