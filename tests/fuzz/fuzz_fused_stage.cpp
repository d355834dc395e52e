// FusedStage's argument boundary: a HEAD or TAIL stage whose parts (an optional offsets-only plan,
// the fused verify with optional stored entries, the write, an optional phase advance) are each
// fuzzed as their own ops' are, over one batch; whatever the parts say, the stage must validate
// them all or run memory-safely.
#include <limits>

#include "kvcanary/fused_stage.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  const int64_t num_tokens = kvc_fuzz::ConsumeSize(in, 16);
  kvcanary::FusedStageArgs args;
  const kvcanary::PlanInputs inputs = kvc_fuzz::ConsumePlanInputs(arena, in, bs);
  const kvcanary::WritePlanView write_plan = kvc_fuzz::ConsumeWritePlan(arena, bs);
  const kvcanary::TensorView scratch =
      arena.Tensor(kvcanary::DType::kInt64, {bs + 1 + kvc_fuzz::ConsumeSize(in, 2)});
  const kvcanary::TensorView num_valid = arena.Tensor(kvcanary::DType::kInt32, {1});
  const kvcanary::TensorView enable = arena.Tensor(kvcanary::DType::kInt32, {1});
  // The capacity bounds the verify's work (a fuzzed count is clamped to it), so an accepted one
  // stays small; the others are ones the stage must refuse.
  constexpr int64_t kRefused[] = {-1, int64_t{1} << 31, std::numeric_limits<int64_t>::max()};
  const int64_t capacity =
      in.ConsumeBool() ? kRefused[kvc_fuzz::ConsumeSize(in, 2)] : kvc_fuzz::ConsumeSize(in, 24);
  if (in.ConsumeBool()) {  // HEAD: the offsets-only plan writes what the verify and write read
    kvcanary::PlanArgs plan;
    plan.inputs = inputs;
    plan.verify_plan_out.verify_num_valid = num_valid;
    plan.verify_plan_out.enable = enable;
    plan.write_plan_out = write_plan;
    plan.verify_capacity = capacity;
    plan.verify_offsets_scratch = in.ConsumeBool() ? scratch : kvcanary::TensorView();
    args.plan = plan;
  }
  args.verify.context = kvc_fuzz::ConsumeContext(arena, in);
  args.verify.paired_context = kvc_fuzz::ConsumePairedContext(arena, in);
  args.verify.check_verify_expected_token = in.ConsumeBool();
  args.verify.inputs = inputs;
  args.verify.verify_offsets_scratch = scratch;
  args.verify.verify_num_valid = num_valid;
  args.verify.verify_enable = enable;
  args.verify.verify_capacity = capacity;
  // The write shares the verify's context or has its own.
  args.write.context = in.ConsumeBool() ? args.verify.context : kvc_fuzz::ConsumeContext(arena, in);
  args.write.paired_context = args.verify.paired_context;
  args.write.plan = write_plan;
  args.write.input_ids = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  args.write.positions = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  args.write.out_cache_loc = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  if (in.ConsumeBool()) {
    args.advance_phase = kvcanary::AdvanceVerifyPhaseArgs{
        arena.Tensor(kvcanary::DType::kInt64, {1 + kvc_fuzz::ConsumeSize(in, 8)}),
        in.ConsumeBool() ? inputs.req_pool_indices : kvcanary::TensorView()};
  }
  // Stored entries: a HEAD stores into them when its total fits, both stages read them then.
  if (in.ConsumeBool()) {
    args.verify.stored_entries = kvc_fuzz::ConsumeVerifyPlan(arena, kvc_fuzz::ConsumeSize(in, 24));
  }
  kvc_fuzz::CallOp(arena, [&] { kvcanary::FusedStage(args); });
  return 0;
}
