// The plan arrays as rows of an op's argument table: written by the plan ops, read by Verify,
// Write and FusedVerify. One declaration each, named as the op that meets them calls them.
#pragma once

#include <cstdint>

#include "core/params.h"
#include "kvcanary/plan.h"
#include "ops/signature.h"

namespace kvcanary {

// How an op names the plan arrays in its messages.
enum class PlanNames {
  kOut,     // the plan ops' outputs: "out_verify_slot_indices", "out_verify_enable", ...
  kPlan,    // Verify and Write read them: "plan.verify_slot_indices", "plan.enable", ...
  kInput,   // PlanEntries and FusedVerify read the counts: "verify_num_valid", "verify_enable"
  kStored,  // FusedVerify reads its stored entries: "stored_entries.verify_slot_indices", ...
};

// The four verify entry arrays: int64, 1-D, `length` each.
sig::SpecList VerifyEntrySpecs(const VerifyPlanView& plan, PlanNames names, sig::Extent length);
sig::SpecList VerifyEntrySpecs(const VerifyPlanView&& plan, PlanNames, sig::Extent) = delete;
// verify_num_valid and enable: int32 [1] each.
sig::SpecList VerifyCountSpecs(const TensorView& num_valid, const TensorView& enable,
                               PlanNames names);
// write_offsets, write_seed_slot_indices (int64 1-D; their lengths are the op's own check) and
// write_num_valid_reqs (int32 [1]).
sig::SpecList WritePlanSpecs(const WritePlanView& plan, PlanNames names);

// What stage 1 writes, in SGLang's order: write_offsets, write_seed_slot_indices,
// verify_num_valid, verify_enable, write_num_valid_reqs (out_ names).
sig::SpecList StageOneOutputSpecs(const WritePlanView& write, const TensorView& verify_num_valid,
                                  const TensorView& verify_enable);

sig::SpecList StageOneOutputSpecs(const WritePlanView&& write, const TensorView&,
                                  const TensorView&) = delete;
sig::SpecList WritePlanSpecs(const WritePlanView&& plan, PlanNames names) = delete;

// O16, O17: write_offsets holds one more entry than the seeds, and the seeds hold a batch row each.
void CheckWritePlanSizes(const WritePlanView& plan, int64_t bs);
// V12 / W14: a capacity the int32 device counts can hold.
void CheckCapacityFitsDeviceCount(int64_t capacity, const char* what);

// Pointers of validated plan arrays (absent ones give nullptr).
VerifyPlanOutParams VerifyPlanOutParamsOf(const VerifyPlanView& plan, int64_t capacity);
WritePlanOutParams WritePlanOutParamsOf(const WritePlanView& plan);

}  // namespace kvcanary
