// The fused stage (a kvcanary addition, not an SGLang op): one stage of a forward for one group,
// HEAD or TAIL, in one call. With `plan` (HEAD), the forward's offsets-only plan first; then the
// fused verify of the prefix; then the write of the forward's tokens; then, with `advance_phase`
// (the TAIL of a sampled forward), sampled verify's rotation.
//
// With `plan` and verify.stored_entries (HEAD of a step that stores its entries), the plan's
// entries are stored into those arrays right after the plan, as PlanEntries of the plan's
// inputs, scratch and enable would store them, when its total fits their length (nothing is
// stored otherwise): this stage's verify and the TAIL's, given the same arrays, read them.
//
// Semantics: exactly Plan(*plan) (when given), FusedVerify(verify), Write(write) and
// AdvanceVerifyPhase(*advance_phase) (when given), in that order, with the same arguments: each
// part reads what the part before it left (the verify reads the plan's offsets and counts, the
// write its write plan), and the verify never sees a record this stage's write stores, even when a
// faulty batch writes a slot the verify reads. Both backends run the parts one after the other (on
// CUDA as kernels in a row on `stream`, graph-capturable like every op); what the one call adds is
// that no part runs unless every part is valid.
//
// Checks: every check of the parts' ops (docs/validation.md), all before anything runs, plus: the
// plan is offsets-only (no verify entry arrays), the stored entries (when stored) are checked as
// PlanEntries checks its outputs, and the parts are on one device.
#pragma once

#include <optional>

#include "kvcanary/fused_verify.h"
#include "kvcanary/plan.h"
#include "kvcanary/write.h"

namespace kvcanary {

struct FusedStageArgs {
  std::optional<PlanArgs> plan;  // HEAD: the forward's offsets-only plan, run first
  FusedVerifyArgs verify;
  WriteArgs write;
  std::optional<AdvanceVerifyPhaseArgs> advance_phase;  // advanced last (after this verify read it)
};

void FusedStage(const FusedStageArgs& args, StreamHandle stream = nullptr);

}  // namespace kvcanary
