// launch_canary_write_kernel: its argument table, validation (rows W1-W12 of docs/validation.md)
// and dispatch.
#include "kvcanary/write.h"

#include "kvcanary/error.h"
#include "ops/launch_context.h"
#include "ops/op_parts.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

// W3, W5: the expected tensors exactly when the input assert is on.
void CheckExpectedInputs(const WriteArgs& a) {
  const bool has_expected =
      a.expected_input_tokens.defined() || a.expected_input_positions.defined();
  const bool has_both = a.expected_input_tokens.defined() && a.expected_input_positions.defined();
  if (a.enable_write_input_assert && !has_both) {
    ThrowError(
        "kv-canary: expected input tensors are required when "
        "enable_write_input_assert=True");
  }
  if (!a.enable_write_input_assert && has_expected) {
    ThrowError(
        "kv-canary: expected input tensors must be None when "
        "enable_write_input_assert=False");
  }
}

// W8: write_offsets holds one more entry than the seeds.
void CheckWriteOffsetsLength(const WritePlanView& plan) {
  const int64_t capacity = plan.write_seed_slot_indices.size(0);
  if (plan.write_offsets.size(0) != capacity + 1) {
    ThrowError("kv-canary: canary_write: write_offsets.size(0) must equal write_req_capacity + 1 (",
               capacity + 1, "), got ", plan.write_offsets.size(0));
  }
}

}  // namespace

void ValidateWrite(const WriteArgs& a) {
  const LaunchContext& c = a.context;
  const int64_t num_tokens = a.input_ids.length();
  const auto token_row = [&](const TensorView& view, std::string_view name) {
    return sig::In(view, name, DType::kInt64, 1, sig::Exactly(num_tokens));
  };
  sig::SpecList table = {CanaryBufSpec(c, /*written=*/true)};
  table.Add(WritePlanSpecs(a.plan, PlanNames::kPlan));
  table.Add({token_row(a.input_ids, "input_ids"), token_row(a.positions, "positions"),
             token_row(a.out_cache_loc, "out_cache_loc"),
             sig::Optional(token_row(a.expected_input_tokens, "expected_input_tokens")),
             sig::Optional(token_row(a.expected_input_positions, "expected_input_positions"))});
  table.Add(RingSpecs(c));
  table.Add(sig::In(c.enable_chain_position_assert, "enable_chain_position_assert", DType::kInt32,
                    1, sig::Exactly(1)));
  ValidateLaunch(
      c, "canary_write", table, [&] { CheckExpectedInputs(a); },
      [&] { CheckWriteOffsetsLength(a.plan); });
}

WriteParams WriteParamsOf(const WriteArgs& args, const LaunchContext& context) {
  WriteParams params;
  params.launch = LaunchParamsOf(context);
  params.offsets = args.plan.write_offsets.data_as<const int64_t>();
  params.seeds = args.plan.write_seed_slot_indices.data_as<const int64_t>();
  params.num_valid_reqs = args.plan.write_num_valid_reqs.data_as<const int32_t>();
  params.capacity = args.plan.write_seed_slot_indices.size(0);
  params.input_ids = args.input_ids.data_as<const int64_t>();
  params.positions = args.positions.data_as<const int64_t>();
  params.out_cache_loc = args.out_cache_loc.data_as<const int64_t>();
  params.num_tokens = args.input_ids.size(0);
  params.input_assert = args.enable_write_input_assert;
  if (args.enable_write_input_assert) {
    params.expected_tokens = args.expected_input_tokens.data_as<const int64_t>();
    params.expected_positions = args.expected_input_positions.data_as<const int64_t>();
  }
  params.enable_chain_position_assert =
      context.enable_chain_position_assert.data_as<const int32_t>();
  return params;
}

void Write(const WriteArgs& args, StreamHandle stream) {
  RunPairedOp(args, stream, ValidateWrite, WriteParamsOf, "canary_write");
}

}  // namespace kvcanary
