// PlanEntries' argument boundary: the batch inputs, stage 1's scratch and enable flag, and the
// four entry arrays of the verify plan.
#include "kvcanary/plan.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  const int64_t capacity = kvc_fuzz::ConsumeSize(in, 24);
  kvcanary::PlanEntriesArgs args;
  args.inputs = kvc_fuzz::ConsumePlanInputs(arena, in, bs);
  args.verify_offsets_scratch =
      arena.Tensor(kvcanary::DType::kInt64, {bs + 1 + kvc_fuzz::ConsumeSize(in, 2)});
  args.verify_enable = arena.Tensor(kvcanary::DType::kInt32, {1});
  const kvcanary::VerifyPlanView plan = kvc_fuzz::ConsumeVerifyPlan(arena, capacity);
  args.out_verify_slot_indices = plan.verify_slot_indices;
  args.out_verify_expected_tokens = plan.verify_expected_tokens;
  args.out_verify_expected_positions = plan.verify_expected_positions;
  args.out_verify_prev_slot_indices = plan.verify_prev_slot_indices;
  kvc_fuzz::CallOp(arena, [&] { kvcanary::PlanEntries(args); });
  return 0;
}
