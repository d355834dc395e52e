// Argument builders that host tests and the GPU tests share: where a PlanOffsets call writes, and
// the tensors of a Write call. Plan is testutil.h's PlanBuffers or the GPU tests'
// DevicePlanBuffers; Scratch any tensor with a view().
#pragma once

#include "kvcanary/kvcanary.h"

namespace kvcanary::testing {

// Points the outputs of a PlanOffsets call at `plan`'s write plan and counts, and its verify
// offsets at `scratch`.
template <typename Plan, typename Scratch>
void SetPlanOffsetsOutputs(PlanOffsetsArgs& args, const Plan& plan, const Scratch& scratch) {
  args.out_verify_offsets_scratch = scratch.view();
  args.out_write_offsets = plan.offsets.view();
  args.out_write_seed_slot_indices = plan.seeds.view();
  args.out_verify_num_valid = plan.num_valid.view();
  args.out_verify_enable = plan.enable.view();
  args.out_write_num_valid_reqs = plan.num_valid_reqs.view();
}

// A Write of `input_ids` at `positions` into the slots `out_cache_loc` by write plan `plan`; the
// input assert and the paired half are left off for the caller to add.
inline WriteArgs WriteCall(const LaunchContext& context, const WritePlanView& plan,
                           const TensorView& input_ids, const TensorView& positions,
                           const TensorView& out_cache_loc) {
  return WriteArgs{.context = context,
                   .plan = plan,
                   .input_ids = input_ids,
                   .positions = positions,
                   .out_cache_loc = out_cache_loc};
}

}  // namespace kvcanary::testing
