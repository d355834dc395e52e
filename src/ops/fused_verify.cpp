// FusedVerify: its argument table, validation (Verify's context checks around the plan inputs
// that PlanEntries checks; docs/validation.md) and dispatch.
#include "kvcanary/fused_verify.h"

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "ops/launch_context.h"
#include "ops/op_parts.h"
#include "ops/plan_inputs.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

constexpr std::string_view kOp = "fused_verify";

void CheckScalars(const FusedVerifyArgs& a) {
  RequireSwaLutForWindow(a.inputs, kOp);
  RequireValidLensForPool(a.inputs, kOp);
  if (a.verify_capacity < 0 || a.verify_capacity > kMaxDeviceCount) {
    ThrowError("kv-canary: fused_verify verify_capacity must be in [0, ", kMaxDeviceCount,
               "], got ", a.verify_capacity);
  }
}

// A block table addresses the full pool in whole blocks: without an SWA table that pool is the
// canary's slots; with one it is the table's full_pool_size + 1 entries less the padding entry.
void CheckBlocksTilePool(const FusedVerifyArgs& a) {
  if (!a.inputs.block_table.defined()) return;
  const int64_t block_size = a.inputs.block_size;
  const TensorView& lut = a.inputs.full_to_swa_index_mapping;
  if (lut.defined()) {
    const int64_t full_pool = lut.size(0) - 1;
    if (full_pool % block_size != 0) {
      ThrowError("kv-canary: block_size must divide the full pool ",
                 "full_to_swa_index_mapping maps (its length - 1 = ", full_pool,
                 "), got block_size=", block_size);
    }
    return;
  }
  const int64_t num_slots = a.context.canary_buf.size(0);
  if (num_slots % block_size != 0) {
    ThrowError("kv-canary: block_size must divide canary_buf's num_slots=", num_slots,
               ", got block_size=", block_size);
  }
}

StoredEntryParams StoredEntryParamsOf(const std::optional<VerifyPlanView>& stored) {
  if (!stored.has_value()) return {};
  const VerifyPlanOutParams arrays =
      VerifyPlanOutParamsOf(*stored, stored->verify_slot_indices.size(0));
  return StoredEntryParams{arrays.slot_indices, arrays.expected_tokens, arrays.expected_positions,
                           arrays.prev_slot_indices, arrays.capacity};
}

}  // namespace

void ValidateFusedVerify(const FusedVerifyArgs& a) {
  const int64_t bs = a.inputs.req_pool_indices.length();
  sig::SpecList table = {CanaryBufSpec(a.context, /*written=*/false)};
  table.Add(RingSpecs(a.context));
  table.Add(BatchSpecs(a.inputs, /*needs_extend=*/false));
  table.Add(sig::In(a.verify_offsets_scratch, "verify_offsets_scratch", DType::kInt64, 1,
                    sig::AtLeast(SaturatingAdd(bs, 1))));
  table.Add(VerifyCountSpecs(a.verify_num_valid, a.verify_enable, PlanNames::kInput));
  table.Add(SwaLutSpec(a.inputs, "full_to_swa_index_mapping"));
  table.Add(TokenPoolSpecs(a.inputs));
  if (a.stored_entries.has_value()) {
    const VerifyPlanView& stored = *a.stored_entries;
    table.Add(VerifyEntrySpecs(stored, PlanNames::kStored,
                               sig::Exactly(stored.verify_slot_indices.length())));
  }
  CheckTableChoice(a.inputs);
  ValidateLaunch(
      a.context, "canary_verify", table, [&] { CheckScalars(a); },
      [&] {
        CheckTableSizes(a.inputs);
        CheckBlocksTilePool(a);
      });
}

FusedVerifyParams FusedVerifyParamsOf(const FusedVerifyArgs& a, const LaunchContext& context) {
  PlanInputParams in = InputParamsOf(a.inputs);
  in.extend_seq_lens = nullptr;  // not read: the offsets already hold the counts
  return FusedVerifyParams{.launch = LaunchParamsOf(context),
                           .in = in,
                           .scratch = a.verify_offsets_scratch.data_as<const int64_t>(),
                           .num_valid = a.verify_num_valid.data_as<const int32_t>(),
                           .enable = a.verify_enable.data_as<const int32_t>(),
                           .capacity = a.verify_capacity,
                           .check_token = a.check_verify_expected_token,
                           .stored = StoredEntryParamsOf(a.stored_entries)};
}

void FusedVerify(const FusedVerifyArgs& args, StreamHandle stream) {
  RunPairedOp(args, stream, ValidateFusedVerify, FusedVerifyParamsOf, "fused_verify");
}

}  // namespace kvcanary
