// launch_plan_entries_kernel: its argument table, validation (E1, E2 and the generic checks of
// docs/validation.md, tensor by tensor) and dispatch.
#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
#include "ops/op_parts.h"
#include "ops/plan_inputs.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

VerifyPlanView EntriesOf(const PlanEntriesArgs& a) {
  return VerifyPlanView{a.out_verify_slot_indices,
                        a.out_verify_expected_tokens,
                        a.out_verify_expected_positions,
                        a.out_verify_prev_slot_indices,
                        {},
                        {}};
}

}  // namespace

void ValidatePlanEntries(const PlanEntriesArgs& a) {
  const int64_t bs = a.inputs.req_pool_indices.length();
  const VerifyPlanView entries = EntriesOf(a);
  // One table: the inputs and scratch (checked first), then the rest.
  sig::SpecList table = BatchSpecs(a.inputs, /*needs_extend=*/false);
  table.Add(sig::In(a.verify_offsets_scratch, "verify_offsets_scratch", DType::kInt64, 1));
  const std::size_t rest_begin = table.all().size();
  table.Add(sig::In(a.verify_enable, "verify_enable", DType::kInt32, 1, sig::Exactly(1)));
  table.Add(
      VerifyEntrySpecs(entries, PlanNames::kOut, sig::Exactly(a.out_verify_slot_indices.length())));
  table.Add(SwaLutSpec(a.inputs, "lut_tensor"));
  table.Add(TokenPoolSpecs(a.inputs));
  const sig::Specs all = table.all();
  CheckTableChoice(a.inputs);
  sig::CheckPresent(all);
  sig::CheckBounds(all);
  RequireValidLensForPool(a.inputs, "launch_plan_entries_kernel");  // E1
  sig::CheckEach(all.first(rest_begin), sig::kWhole);
  if (a.verify_offsets_scratch.size(0) < bs + 1) {  // E2
    ThrowError("kv-canary: verify_offsets_scratch length must be >= bs_padded + 1");
  }
  sig::CheckEach(all.subspan(rest_begin), sig::kWhole);
  CheckTableSizes(a.inputs);
  sig::CheckPlacement(a.verify_offsets_scratch, "verify_offsets_scratch", all);
}

PlanEntriesParams PlanEntriesParamsOf(const PlanEntriesArgs& args) {
  PlanEntriesParams params;
  params.in = InputParamsOf(args.inputs);
  params.scratch = args.verify_offsets_scratch.data_as<const int64_t>();
  params.enable = args.verify_enable.data_as<const int32_t>();
  params.verify = VerifyPlanOutParamsOf(EntriesOf(args), args.out_verify_slot_indices.size(0));
  return params;
}

void PlanEntries(const PlanEntriesArgs& args, StreamHandle stream) {
  ValidatePlanEntries(args);
  const PlanEntriesParams params = PlanEntriesParamsOf(args);
  RunOnBackend(
      args.verify_offsets_scratch, "verify_offsets_scratch", "plan_entries",
      [&] {
        // The offsets/entries contract, checked on the host before anything is written (the
        // CUDA kernel, which cannot raise, prints this and writes nothing).
        const int64_t total = params.scratch[params.in.bs];
        if (params.enable[0] != 0 && total > params.verify.capacity) {
          ThrowError("kv-canary: plan_entries: total_verify=", total,
                     " exceeds verify_capacity=", params.verify.capacity,
                     " with verify_enable=1 (offsets/entries contract broken)");
        }
        cpu::PlanEntries(params);
      },
      [&](auto device) { return cuda::PlanEntries(params, device, stream); });
}

}  // namespace kvcanary
