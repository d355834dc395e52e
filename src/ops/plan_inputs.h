// PlanInputs as the plan ops and FusedVerify see them: their rows in an op's argument table, the
// checks that relate one input to another, and the conversion into backend parameters. Every op
// that reads a forward's batch goes through these, so an input is declared and checked once.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/params.h"
#include "kvcanary/plan.h"
#include "ops/signature.h"

namespace kvcanary {

// req_pool_indices, prefix_lens, extend_seq_lens, the slot table (req_to_token, or block_table
// when given: int32 or int64) and the optional verify_phase ([>= 1] int64), in that order.
// extend_seq_lens is required when `needs_extend`, else checked only when given.
// bs = req_pool_indices.length().
sig::SpecList BatchSpecs(const PlanInputs& in, bool needs_extend);
// The SWA table (optional): int64, 1-D, at least `min_length` entries; `name` is what messages
// call it ("lut_tensor" in SGLang's launchers).
sig::TensorSpec SwaLutSpec(const PlanInputs& in, std::string_view name, int64_t min_length = 1);
// The expected-token pool (int32 2-D) and its valid lengths (int64 [bs]), both optional.
sig::SpecList TokenPoolSpecs(const PlanInputs& in);

// "kv-canary: {op} requires full_to_swa_index_mapping when swa_window_size > 0".
void RequireSwaLutForWindow(const PlanInputs& in, std::string_view op);
// "kv-canary: {op} requires req_to_verify_expected_tokens_valid_lens when ... is set".
void RequireValidLensForPool(const PlanInputs& in, std::string_view op);

// Exactly one of req_to_token and block_table, and a block_size in [1, kMaxBlockSize] that is 1
// with req_to_token, and CheckVerifySample. Runs before the presence checks: it reads no size.
void CheckTableChoice(const PlanInputs& in);
// verify_sample in [1, kMaxVerifySample].
void CheckVerifySample(const PlanInputs& in);
// After the table's shape checks: O18 (an explicit pitch must equal the given table's row
// stride) and a block table's positions per row (max_blocks * block_size) within int64.
void CheckTableSizes(const PlanInputs& in);
// The table that locates the slots: block_table when given, else req_to_token.
const TensorView& SlotTableOf(const PlanInputs& in);

// Pointers and sizes of validated inputs. An absent LUT gives len 0 (identity), `lut_len`
// overriding its length; an absent pool gives data nullptr (every expected token -1).
PlanInputParams InputParamsOf(const PlanInputs& in, std::optional<int64_t> lut_len = std::nullopt);
SwaLutParams SwaLutOf(const TensorView& lut, std::optional<int64_t> lut_len = std::nullopt);

}  // namespace kvcanary
