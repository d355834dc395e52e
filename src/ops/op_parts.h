// The checks and backend parameters of the ops FusedStage is made of, each defined beside its op
// (ops/plan.cpp, ops/plan_entries.cpp, ops/fused_verify.cpp, ops/write.cpp,
// ops/verify_phase.cpp), so a stage checks its parts with exactly the code the separate ops run.
#pragma once

#include "core/params.h"
#include "kvcanary/fused_verify.h"
#include "kvcanary/plan.h"
#include "kvcanary/write.h"

namespace kvcanary {

// Plan: rows P1-P10 of docs/validation.md; whether a plan has no entry arrays; its parameters.
void ValidatePlan(const PlanArgs& args);
bool IsOffsetsOnly(const VerifyPlanView& plan);
PlanParams PlanParamsOf(const PlanArgs& args);

// PlanEntries: rows E1, E2 and the generic checks; its parameters (a fused stage storing its
// entries runs it after the plan).
void ValidatePlanEntries(const PlanEntriesArgs& args);
PlanEntriesParams PlanEntriesParamsOf(const PlanEntriesArgs& args);

// FusedVerify and Write, one half (args.context; the pair is checked by ValidateWithPair).
void ValidateFusedVerify(const FusedVerifyArgs& args);
FusedVerifyParams FusedVerifyParamsOf(const FusedVerifyArgs& args, const LaunchContext& context);
void ValidateWrite(const WriteArgs& args);
WriteParams WriteParamsOf(const WriteArgs& args, const LaunchContext& context);

// AdvanceVerifyPhase (ops/verify_phase.cpp).
void ValidateAdvanceVerifyPhase(const AdvanceVerifyPhaseArgs& args);
AdvancePhaseParams AdvancePhaseParamsOf(const AdvanceVerifyPhaseArgs& args);

}  // namespace kvcanary
