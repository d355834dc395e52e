// launch_canary_plan_kernels: its argument table, validation (rows P1-P10 of docs/validation.md)
// and dispatch.
#include "kvcanary/plan.h"

#include "cpu/backend.h"
#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "ops/dispatch.h"
#include "ops/op_parts.h"
#include "ops/plan_inputs.h"
#include "ops/plan_outputs.h"

namespace kvcanary {

bool IsOffsetsOnly(const VerifyPlanView& v) {
  return !v.verify_slot_indices.defined() && !v.verify_expected_tokens.defined() &&
         !v.verify_expected_positions.defined() && !v.verify_prev_slot_indices.defined();
}

namespace {

// The table of one call, and its parts in the order the checks visit them.
struct PlanTables {
  sig::SpecList all;
  sig::Specs entries;  // P7: the four verify entry arrays (none in an offsets-only plan)
  sig::Specs main;     // P5: batch, table, LUT, write plan and counts, pass by pass
  sig::Specs pool;     // P8
  sig::Specs scratch;  // P9
};

// REQUIRES: `t` is not copied afterwards (its parts point into t.all).
void BuildTables(const PlanArgs& a, PlanTables& t) {
  const int64_t bs = a.inputs.req_pool_indices.length();
  if (!IsOffsetsOnly(a.verify_plan_out)) {
    t.all.Add(
        VerifyEntrySpecs(a.verify_plan_out, PlanNames::kOut, sig::Exactly(a.verify_capacity)));
  }
  const std::size_t main_begin = t.all.all().size();
  t.all.Add(BatchSpecs(a.inputs, /*needs_extend=*/true));
  t.all.Add(SwaLutSpec(a.inputs, "lut_tensor"));
  t.all.Add(StageOneOutputSpecs(a.write_plan_out, a.verify_plan_out.verify_num_valid,
                                a.verify_plan_out.enable));
  const std::size_t pool_begin = t.all.all().size();
  t.all.Add(TokenPoolSpecs(a.inputs));
  const std::size_t scratch_begin = t.all.all().size();
  t.all.Add(sig::Optional(sig::Out(a.verify_offsets_scratch, "verify_offsets_scratch",
                                   DType::kInt64, 1, sig::AtLeast(SaturatingAdd(bs, 1)))));
  const sig::Specs all = t.all.all();
  t.entries = all.first(main_begin);
  t.main = all.subspan(main_begin, pool_begin - main_begin);
  t.pool = all.subspan(pool_begin, scratch_begin - pool_begin);
  t.scratch = all.subspan(scratch_begin);
}

// P1, the offsets-only rules, P3, V12 and P4: the checks on scalars and absent tensors.
void CheckScalars(const PlanArgs& a, bool offsets_only) {
  RequireSwaLutForWindow(a.inputs, "launch_canary_plan_kernels");
  if (offsets_only && !a.verify_offsets_scratch.defined()) {
    ThrowError(
        "kv-canary: launch_canary_plan_kernels requires verify_offsets_scratch for an "
        "offsets-only plan (no verify entry arrays: fused_verify reads the offsets), got None");
  }
  if (offsets_only && a.verify_capacity < 0) {
    ThrowError("kv-canary: launch_canary_plan_kernels verify_capacity must be non-negative, got ",
               a.verify_capacity);
  }
  const TensorView& slots = a.verify_plan_out.verify_slot_indices;
  if (!offsets_only && a.verify_capacity != slots.length()) {
    ThrowError("kv-canary: launch_canary_plan_kernels verify_capacity=", a.verify_capacity,
               " does not match verify_plan_out.verify_slot_indices.shape[0]=", slots.length());
  }
  CheckCapacityFitsDeviceCount(a.verify_capacity, "VerifyPlan verify_capacity");
  RequireValidLensForPool(a.inputs, "launch_plan_entries_kernel");
}

}  // namespace

void ValidatePlan(const PlanArgs& a) {
  const bool offsets_only = IsOffsetsOnly(a.verify_plan_out);
  PlanTables t;
  BuildTables(a, t);
  CheckTableChoice(a.inputs);
  sig::CheckPresent(t.entries);
  sig::CheckPresent(t.main);
  sig::CheckBounds(t.all);
  CheckScalars(a, offsets_only);
  for (unsigned pass : {sig::kLayout, sig::kDType, sig::kShape}) sig::CheckEach(t.main, pass);
  CheckWritePlanSizes(a.write_plan_out, a.inputs.req_pool_indices.length());  // O16, O17
  CheckTableSizes(a.inputs);                                                  // O18
  sig::CheckEach(t.entries, sig::kWhole);                                     // P7
  sig::CheckEach(t.pool, sig::kWhole);                                        // P8
  sig::CheckEach(t.scratch, sig::kWhole);                                     // P9
  const VerifyPlanView& v = a.verify_plan_out;
  sig::CheckPlacement(offsets_only ? v.verify_num_valid : v.verify_slot_indices,
                      offsets_only ? "out_verify_num_valid" : "out_verify_slot_indices",
                      t.all);  // P10
}

PlanParams PlanParamsOf(const PlanArgs& args) {
  PlanParams params;
  params.in = InputParamsOf(args.inputs);
  params.verify = VerifyPlanOutParamsOf(args.verify_plan_out, args.verify_capacity);
  params.write = WritePlanOutParamsOf(args.write_plan_out);
  params.scratch = args.verify_offsets_scratch.defined()
                       ? args.verify_offsets_scratch.data_as<int64_t>()
                       : nullptr;
  return params;
}

int64_t VerifyPlanAllocationBytes(int64_t verify_capacity) {
  if (verify_capacity <= 0) {
    ThrowError("kv-canary: VerifyPlan verify_capacity must be positive, got ", verify_capacity);
  }
  CheckCapacityFitsDeviceCount(verify_capacity, "VerifyPlan verify_capacity");
  return 4 * verify_capacity * 8 + 2 * 4;
}

int64_t WritePlanAllocationBytes(int64_t write_req_capacity) {
  if (write_req_capacity <= 0) {
    ThrowError("kv-canary: WritePlan write_req_capacity must be positive, got ",
               write_req_capacity);
  }
  CheckCapacityFitsDeviceCount(write_req_capacity, "WritePlan write_req_capacity");
  return (2 * write_req_capacity + 1) * 8 + 4;
}

void Plan(const PlanArgs& args, StreamHandle stream) {
  ValidatePlan(args);
  const VerifyPlanView& v = args.verify_plan_out;
  const PlanParams params = PlanParamsOf(args);
  const bool offsets_only = IsOffsetsOnly(v);
  RunOnBackend(
      offsets_only ? v.verify_num_valid : v.verify_slot_indices,
      offsets_only ? "out_verify_num_valid" : "out_verify_slot_indices", "plan",
      [&] { cpu::Plan(params); }, [&](auto device) { return cuda::Plan(params, device, stream); });
}

}  // namespace kvcanary
