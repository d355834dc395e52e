// Decoding fuzz bytes into the argument structs several ops share: the plan inputs of a forward,
// the launch context of verify and write, and the plan views (docs/fuzzing.md).
//
// Sizes are small (a few rows, slots and columns) so that values decoded by ConsumeValue meet the
// bounds of the tables they index; each tensor is decoded by Arena::Tensor, so any of them may
// come out malformed.
#pragma once

#include <cstdint>
#include <optional>

#include "kvcanary/context.h"
#include "kvcanary/plan.h"
#include "tests/fuzz/fuzz_tensors.h"

namespace kvc_fuzz {

inline int64_t ConsumeSize(FuzzedDataProvider& in, int64_t most) {
  return in.ConsumeIntegralInRange<int64_t>(0, most);
}

// The table that locates the slots, of a few rows and columns: req_to_token; for a kind byte of
// 6 mod 8 a paged block table (int32 ids, int64 when bit 3 is set) with a small block size or,
// now and then, one as decoded; for 7 mod 8 both tables or neither; for 0xff req_to_token with a
// block size as decoded. The last three are refused, except a block size that happens to be 1.
inline void ConsumeSlotTable(Arena& arena, FuzzedDataProvider& in, kvcanary::PlanInputs& inputs) {
  const uint8_t kind = in.ConsumeIntegral<uint8_t>();
  const Shape shape = {ConsumeSize(in, 6), ConsumeSize(in, 12)};
  if (kind % 8 != 6 && kind % 8 != 7) {
    inputs.req_to_token = arena.Tensor(DType::kInt32, shape);
    if (kind == 0xff) inputs.block_size = ConsumeValue(in);
    return;
  }
  inputs.block_table = arena.Tensor((kind >> 3) & 1 ? DType::kInt64 : DType::kInt32, shape);
  inputs.block_size = in.ConsumeBool() ? 1 + ConsumeSize(in, 16) : ConsumeValue(in);
  if (kind % 8 == 7) {
    inputs.req_to_token = arena.Tensor(DType::kInt32, shape);
    if ((kind >> 4) & 1) inputs.block_table = kvcanary::TensorView();
  }
}

// The batch of one forward: `bs` rows over a slot table (ConsumeSlotTable).
inline kvcanary::PlanInputs ConsumePlanInputs(Arena& arena, FuzzedDataProvider& in, int64_t bs) {
  kvcanary::PlanInputs inputs;
  inputs.req_pool_indices = arena.Tensor(DType::kInt64, {bs});
  inputs.prefix_lens = arena.Tensor(DType::kInt64, {bs});
  inputs.extend_seq_lens = arena.Tensor(DType::kInt64, {bs});
  ConsumeSlotTable(arena, in, inputs);
  if (in.ConsumeBool()) {
    const kvcanary::TensorView& table =
        inputs.block_table.defined() ? inputs.block_table : inputs.req_to_token;
    inputs.req_to_token_stride0 =
        in.ConsumeBool() && table.ndim() >= 1 ? table.stride(0) : ConsumeValue(in);
  }
  inputs.require_contiguous_req_to_token = in.ConsumeBool();
  inputs.swa_window_size = ConsumeValue(in);
  // The LUT comes with a window and the pool with its lengths; Arena::Tensor may still drop one.
  const Shape lut_shape = {1 + ConsumeSize(in, 15)};
  inputs.full_to_swa_index_mapping = inputs.swa_window_size > 0
                                         ? arena.Tensor(DType::kInt64, lut_shape)
                                         : arena.Optional(DType::kInt64, lut_shape);
  if (in.ConsumeBool()) {
    inputs.req_to_verify_expected_tokens =
        arena.Tensor(DType::kInt32, {ConsumeSize(in, 6), ConsumeSize(in, 12)});
    inputs.req_to_verify_expected_tokens_valid_lens = arena.Tensor(DType::kInt64, {bs});
  }
  inputs.kv_token_id_vs_position_offset = in.ConsumeIntegralInRange<int64_t>(-1, 2);
  // Sampled verify: K of 1, 2, 3, 8 or 16 (1 once the bytes run out), now and then as decoded
  // (refused outside [1, 65536]); a phase per row or one for all, or none.
  constexpr int64_t kSamples[] = {1, 2, 3, 8, 16};
  const uint8_t sample = in.ConsumeIntegral<uint8_t>();
  inputs.verify_sample = sample >= 250 ? ConsumeValue(in) : kSamples[sample % 5];
  inputs.verify_phase = arena.Optional(DType::kInt64, {1 + ConsumeSize(in, 6)});
  return inputs;
}

// A source whose scalars fit its rows (one to three slots a row of 16 to 64 bytes each), or,
// now and then, scalars as decoded.
inline kvcanary::RealKvSource ConsumeRealKvSource(Arena& arena, FuzzedDataProvider& in) {
  kvcanary::RealKvSource source;
  source.page_size = 1 + ConsumeSize(in, 2);
  source.num_bytes_per_token = 16 * (1 + ConsumeSize(in, 3));
  source.read_bytes = 16 * (1 + ConsumeSize(in, source.num_bytes_per_token / 16 - 1));
  if (in.ConsumeIntegral<uint8_t>() >= 224) {
    source.page_size = ConsumeValue(in);
    source.num_bytes_per_token = ConsumeValue(in);
    source.read_bytes = ConsumeValue(in);
  }
  const int64_t row_bytes = source.page_size > 0 && source.page_size <= 3 &&
                                    source.num_bytes_per_token > 0 &&
                                    source.num_bytes_per_token <= 64
                                ? source.page_size * source.num_bytes_per_token
                                : 16 * ConsumeSize(in, 4);
  source.tensor = arena.Tensor(DType::kUInt8, {ConsumeSize(in, 4), row_bytes});
  // Now and then a source spanning layers: a table of up to 1024 addresses (or one a decoded
  // mutation breaks). Every entry, whatever the table's length, is the tensor's own address: the
  // addresses are trusted, so they must be valid whenever the checks pass.
  if (in.ConsumeIntegral<uint8_t>() >= 192) {
    const int64_t layers = in.ConsumeBool() ? 1 + ConsumeSize(in, 6) : ConsumeSize(in, 1100);
    source.layer_addresses = arena.Tensor(DType::kInt64, {layers});
    const TensorView& table = source.layer_addresses;
    // Only a table the checks can pass is filled: longer ones are refused before they are read.
    if (table.dtype() == DType::kInt64 && table.ndim() == 1 && table.data() != nullptr &&
        table.is_contiguous() && table.size(0) <= kvcanary::kMaxRealKvLayers) {
      for (int64_t i = 0; i < table.size(0); ++i) {
        table.data_as<int64_t>()[i] =
            static_cast<int64_t>(reinterpret_cast<uintptr_t>(source.tensor.data()));
      }
    }
  }
  return source;
}

// The canary buffer of a few slots, the ring, the counters and up to the most real-KV sources.
inline kvcanary::LaunchContext ConsumeContext(Arena& arena, FuzzedDataProvider& in) {
  kvcanary::LaunchContext context;
  const int64_t slot_stride_bytes = kvcanary::kCanarySlotBytes + 8 * ConsumeSize(in, 2);
  context.canary_buf = arena.Tensor(DType::kUInt8, {ConsumeSize(in, 10), slot_stride_bytes});
  context.kernel_kind = ConsumeValue(in);
  context.violation_ring = arena.Tensor(DType::kInt64, {ConsumeSize(in, 4), 8});
  context.violation_write_index = arena.Tensor(DType::kInt32, {1});
  context.slot_run_counter = arena.Tensor(DType::kInt64, {1});
  context.kernel_run_counter = arena.Tensor(DType::kInt64, {1});
  // 0 to the most, or one past either end.
  constexpr int kMost = kvcanary::kMaxRealKvSources;
  context.num_real_kv_sources = in.ConsumeIntegralInRange<int>(0, kMost + 2);
  if (context.num_real_kv_sources == kMost + 2) context.num_real_kv_sources = -1;
  for (int s = 0; s < context.num_real_kv_sources && s < kvcanary::kMaxRealKvSources; ++s) {
    context.real_kv_sources[s] = ConsumeRealKvSource(arena, in);
  }
  context.real_kv_hash_mode = in.ConsumeIntegralInRange<int32_t>(0, 3);  // 3: not a mode
  context.enable_chain_position_assert = arena.Tensor(DType::kInt32, {1});
  return context;
}

// A second context for the paired (V) half, present when the next byte is odd.
inline std::optional<kvcanary::LaunchContext> ConsumePairedContext(Arena& arena,
                                                                   FuzzedDataProvider& in) {
  if ((in.ConsumeIntegral<uint8_t>() & 1) == 0) return std::nullopt;
  return ConsumeContext(arena, in);
}

// A verify plan of `capacity` entries.
inline kvcanary::VerifyPlanView ConsumeVerifyPlan(Arena& arena, int64_t capacity) {
  kvcanary::VerifyPlanView plan;
  plan.verify_slot_indices = arena.Tensor(DType::kInt64, {capacity});
  plan.verify_expected_tokens = arena.Tensor(DType::kInt64, {capacity});
  plan.verify_expected_positions = arena.Tensor(DType::kInt64, {capacity});
  plan.verify_prev_slot_indices = arena.Tensor(DType::kInt64, {capacity});
  plan.verify_num_valid = arena.Tensor(DType::kInt32, {1});
  plan.enable = arena.Tensor(DType::kInt32, {1});
  return plan;
}

// A write plan of `rows` rows.
inline kvcanary::WritePlanView ConsumeWritePlan(Arena& arena, int64_t rows) {
  kvcanary::WritePlanView plan;
  plan.write_offsets = arena.Tensor(DType::kInt64, {rows + 1});
  plan.write_seed_slot_indices = arena.Tensor(DType::kInt64, {rows});
  plan.write_num_valid_reqs = arena.Tensor(DType::kInt32, {1});
  return plan;
}

}  // namespace kvc_fuzz
