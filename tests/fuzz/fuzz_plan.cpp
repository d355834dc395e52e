// Plan's argument boundary: the batch inputs, the verify and write plan outputs (full, or
// offsets-only with the four entry arrays absent), the capacity and the optional scratch.
#include "kvcanary/plan.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  const int64_t capacity = kvc_fuzz::ConsumeSize(in, 24);
  kvcanary::PlanArgs args;
  args.inputs = kvc_fuzz::ConsumePlanInputs(arena, in, bs);
  args.verify_plan_out = kvc_fuzz::ConsumeVerifyPlan(arena, capacity);
  if (in.ConsumeBool()) {  // the offsets-only plan
    args.verify_plan_out.verify_slot_indices = kvcanary::TensorView();
    args.verify_plan_out.verify_expected_tokens = kvcanary::TensorView();
    args.verify_plan_out.verify_expected_positions = kvcanary::TensorView();
    args.verify_plan_out.verify_prev_slot_indices = kvcanary::TensorView();
  }
  args.write_plan_out = kvc_fuzz::ConsumeWritePlan(arena, bs);
  args.verify_capacity = in.ConsumeBool() ? kvc_fuzz::ConsumeValue(in) : capacity;
  args.verify_offsets_scratch =
      arena.Optional(kvcanary::DType::kInt64, {bs + 1 + kvc_fuzz::ConsumeSize(in, 2)});
  kvc_fuzz::CallOp(arena, [&] { kvcanary::Plan(args); });
  return 0;
}
