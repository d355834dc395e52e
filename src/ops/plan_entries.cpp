// launch_plan_entries_kernel: its argument table, validation (E1, E2 and the generic checks of
// docs/validation.md, tensor by tensor) and dispatch.
#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
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

void Validate(const PlanEntriesArgs& a) {
  const int64_t bs = a.inputs.req_pool_indices.length();
  sig::SpecList head = BatchSpecs(a.inputs, /*needs_extend=*/false);
  head.Add(sig::In(a.verify_offsets_scratch, "verify_offsets_scratch", DType::kInt64, 1));
  const VerifyPlanView entries = EntriesOf(a);
  sig::SpecList rest = {
      sig::In(a.verify_enable, "verify_enable", DType::kInt32, 1, sig::Exactly(1))};
  rest.Add(
      VerifyEntrySpecs(entries, PlanNames::kOut, sig::Exactly(a.out_verify_slot_indices.length())));
  rest.Add(SwaLutSpec(a.inputs, "lut_tensor"));
  rest.Add(TokenPoolSpecs(a.inputs));
  sig::CheckPresent(head);
  sig::CheckPresent(rest);
  RequireValidLensForPool(a.inputs, "launch_plan_entries_kernel");  // E1
  sig::CheckEach(head, sig::kWhole);
  if (a.verify_offsets_scratch.size(0) < bs + 1) {  // E2
    ThrowError("kv-canary: verify_offsets_scratch length must be >= bs_padded + 1");
  }
  sig::CheckEach(rest, sig::kWhole);
  CheckReqToTokenStride0(a.inputs);
  sig::CheckSameDevice(a.verify_offsets_scratch, "verify_offsets_scratch", head);
  sig::CheckSameDevice(a.verify_offsets_scratch, "verify_offsets_scratch", rest);
  sig::CheckWritable(rest);
}

}  // namespace

void PlanEntries(const PlanEntriesArgs& args, StreamHandle stream) {
  Validate(args);
  PlanEntriesParams params;
  params.in = InputParamsOf(args.inputs);
  params.scratch = args.verify_offsets_scratch.data_as<const int64_t>();
  params.enable = args.verify_enable.data_as<const int32_t>();
  params.verify = VerifyPlanOutParamsOf(EntriesOf(args), args.out_verify_slot_indices.size(0));
  RunOnBackend(
      args.verify_offsets_scratch, "verify_offsets_scratch", "plan_entries",
      [&] {
        // The offsets/entries contract, checked on the host before anything is written (the
        // CUDA kernel traps instead).
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
