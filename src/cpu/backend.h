// The CPU backend: the reference implementation of every op. Each function runs the loop its
// public header documents, on validated parameters, and returns when done. Parallel only
// where the result cannot change: violation rows are recorded in the documented order.
#pragma once

#include "core/params.h"

namespace kvcanary::cpu {

void Plan(const PlanParams& params);
void PlanOffsets(const PlanOffsetsParams& params);
// REQUIRES: scratch[bs] <= capacity when enable is set, unless only_when_fits (ops/ checks it
// before calling: the CUDA kernel traps instead). Nothing below ops/ throws.
void PlanEntries(const PlanEntriesParams& params);
void SwaTranslate(const SwaTranslateParams& params);
void AdvancePhase(const AdvancePhaseParams& params);
// The paired ops run one half (one K or V context) per call, overloaded on their parameters so
// that ops/ runs any of them through one template (RunPairedOp).
void RunHalf(const VerifyParams& params);
// Plan entries and verify in one pass: checks what PlanEntries + Verify would.
void RunHalf(const FusedVerifyParams& params);
void RunHalf(const WriteParams& params);
// Both halves of a paired launch, as RunHalf on each in order (a verify's halves that fold no real
// KV derive each entry once for both).
void RunHalves(const VerifyHalves& halves);
void RunHalves(const FusedVerifyHalves& halves);
inline void RunHalves(const WriteHalves& halves) {
  for (int h = 0; h < halves.num_halves; ++h) RunHalf(halves.half[h]);
}
// The stage's parts in order: Plan (with has_plan), PlanEntries (with has_store), each verify half,
// each write half, then AdvancePhase (with has_advance).
void RunStage(const StageParams& params);
void Scatter(const ScatterParams& params);

}  // namespace kvcanary::cpu
