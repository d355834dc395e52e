// launch_plan_offsets_kernel: its argument table, validation (rows O1-O19 of docs/validation.md)
// and dispatch.
#include "cpu/backend.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
#include "ops/plan_inputs.h"
#include "ops/plan_outputs.h"

namespace kvcanary {
namespace {

int64_t LutLenOf(const PlanOffsetsArgs& a) {
  const TensorView& lut = a.inputs.full_to_swa_index_mapping;
  return a.lut_len.value_or(lut.defined() ? lut.length() : 0);
}

WritePlanView WritePlanOf(const PlanOffsetsArgs& a) {
  return WritePlanView{a.out_write_offsets, a.out_write_seed_slot_indices,
                       a.out_write_num_valid_reqs};
}

// REQUIRES: `write` outlives the table (its rows point into it).
sig::SpecList TableOf(const PlanOffsetsArgs& a, const WritePlanView& write) {
  const int64_t lut_len = LutLenOf(a);
  sig::SpecList table = BatchSpecs(a.inputs, /*needs_extend=*/true);
  table.Add(SwaLutSpec(a.inputs, "lut_tensor", lut_len > 1 ? lut_len : 1));
  table.Add(sig::Out(a.out_verify_offsets_scratch, "out_verify_offsets_scratch", DType::kInt64, 1,
                     sig::AtLeast(kPlanOffsetsScratchMinLength)));
  table.Add(StageOneOutputSpecs(write, a.out_verify_num_valid, a.out_verify_enable));
  return table;
}

// O3-O11: the derived (or explicitly passed) scalars.
void CheckScalars(const PlanOffsetsArgs& a) {
  const PlanInputs& in = a.inputs;
  const int64_t bs = in.req_pool_indices.length();
  const int64_t write_offsets_len = a.out_write_offsets.length();
  const int64_t write_req_capacity = a.out_write_seed_slot_indices.length();
  const TensorView& table = SlotTableOf(in);
  const int64_t stride0 = in.req_to_token_stride0.value_or(table.ndim() >= 1 ? table.stride(0) : 0);
  const int64_t lut_len = LutLenOf(a);
  const bool has_lut = in.full_to_swa_index_mapping.defined();
  if (bs < 0 || bs > kPlanBsBlockSize) {
    ThrowError("kv-canary: offsets kernel bs must be in [0, ", kPlanBsBlockSize, "], got ", bs);
  }
  if (write_offsets_len <= 0) {
    ThrowError("kv-canary: write_offsets_len must be positive, got ", write_offsets_len);
  }
  if (write_req_capacity < 0) {
    ThrowError("kv-canary: write_req_capacity must be non-negative, got ", write_req_capacity);
  }
  if (a.verify_capacity < 0) {
    ThrowError("kv-canary: verify_capacity must be non-negative, got ", a.verify_capacity);
  }
  // The device counts are int32: a larger capacity would let num_valid wrap (kvcanary).
  CheckCapacityFitsDeviceCount(a.verify_capacity, "verify_capacity");
  if (stride0 <= 0) ThrowError("kv-canary: req_to_token_stride0 must be positive, got ", stride0);
  if (lut_len < 0) ThrowError("kv-canary: lut_len must be non-negative, got ", lut_len);
  if (has_lut && lut_len <= 0) {
    ThrowError("kv-canary: lut_len must be positive when has_swa_lut is True");
  }
  if (!has_lut && lut_len != 0)
    ThrowError("kv-canary: lut_len must be 0 when has_swa_lut is False");
}

void Validate(const PlanOffsetsArgs& a) {
  const WritePlanView write = WritePlanOf(a);
  const sig::SpecList table = TableOf(a, write);
  CheckTableChoice(a.inputs);
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  sig::CheckEach(table, sig::kLayout);                             // O1
  sig::CheckEach(table, sig::kDType);                              // O2
  CheckScalars(a);                                                 // O3-O11
  sig::CheckEach(table, sig::kShape);                              // O12-O15
  CheckWritePlanSizes(write, a.inputs.req_pool_indices.length());  // O16, O17
  CheckTableSizes(a.inputs);                                       // O18
  sig::CheckPlacement(a.out_verify_offsets_scratch, "out_verify_offsets_scratch", table);  // O19
}

}  // namespace

void PlanOffsets(const PlanOffsetsArgs& args, StreamHandle stream) {
  Validate(args);
  PlanOffsetsParams params;
  params.in = InputParamsOf(args.inputs, args.lut_len);
  params.in.pool = TokenPoolParams{};  // stage 1 never reads the pool
  params.scratch = args.out_verify_offsets_scratch.data_as<int64_t>();
  params.verify_num_valid = args.out_verify_num_valid.data_as<int32_t>();
  params.verify_enable = args.out_verify_enable.data_as<int32_t>();
  params.verify_capacity = args.verify_capacity;
  params.write = WritePlanOutParamsOf(WritePlanOf(args));
  RunOnBackend(
      args.out_verify_offsets_scratch, "out_verify_offsets_scratch", "plan_offsets",
      [&] { cpu::PlanOffsets(params); },
      [&](auto device) { return cuda::PlanOffsets(params, device, stream); });
}

}  // namespace kvcanary
