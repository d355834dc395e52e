// The CPU backend: the reference implementation of every op. Each function runs the loop its
// public header documents, on validated parameters, and returns when done. Parallel only
// where the result cannot change: violation rows are recorded in the documented order.
#pragma once

#include "core/params.h"

namespace kvcanary::cpu {

void Plan(const PlanParams& params);
void PlanOffsets(const PlanOffsetsParams& params);
// REQUIRES: scratch[bs] <= capacity when enable is set (ops/ checks it before calling: the CUDA
// kernel traps instead). Nothing below ops/ throws.
void PlanEntries(const PlanEntriesParams& params);
void SwaTranslate(const SwaTranslateParams& params);
void AdvancePhase(const AdvancePhaseParams& params);
// The paired ops run their halves (a K context, and a V context when paired) in one call,
// overloaded on their parameters so that ops/ runs any of them through one template
// (RunPairedOp). The result is that of the halves run one after the other; the halves share every
// parameter but their launch (ops/ builds both from one set of arguments), so a verify derives
// each entry once and checks it against both.
void RunHalves(const VerifyHalves& halves);
// Plan entries and verify in one pass: checks what PlanEntries + Verify would.
void RunHalves(const FusedVerifyHalves& halves);
void RunHalves(const WriteHalves& halves);
void Scatter(const ScatterParams& params);

}  // namespace kvcanary::cpu
