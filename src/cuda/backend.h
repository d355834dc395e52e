// The CUDA backend, seen from host code that does not include CUDA headers (ops/ compiles with
// the host compiler). Each function enqueues its op on `stream` on CUDA device `device` and
// returns the cudaError_t of the launch as an int (0 = success). None validates, synchronises,
// reads device values on the host or allocates (Plan without a scratch allocates one on the
// stream), so every launch can be captured in a CUDA graph.
#pragma once

#include "core/params.h"
#include "kvcanary/tensor.h"

namespace kvcanary::cuda {

int Plan(const PlanParams& params, int device, StreamHandle stream);
int PlanOffsets(const PlanOffsetsParams& params, int device, StreamHandle stream);
int PlanEntries(const PlanEntriesParams& params, int device, StreamHandle stream);
int SwaTranslate(const SwaTranslateParams& params, int device, StreamHandle stream);
int AdvancePhase(const AdvancePhaseParams& params, int device, StreamHandle stream);
// One launch for both halves of a paired K/V launch: verify reads each plan entry once, fused
// verify derives each entry once, write runs the two chains concurrently. Overloaded on the
// halves, so that ops/ launches any of them through one template (RunPairedOp).
int LaunchHalves(const VerifyHalves& halves, int device, StreamHandle stream);
int LaunchHalves(const FusedVerifyHalves& halves, int device, StreamHandle stream);
int LaunchHalves(const WriteHalves& halves, int device, StreamHandle stream);
// A forward's HEAD or TAIL for one group: the plan, stored entries, fused verify, write and phase
// advance launches.
int RunStage(const StageParams& params, int device, StreamHandle stream);
int Scatter(const ScatterParams& params, int device, StreamHandle stream);
// One thread spinning for min(*params.cycles, params.max_cycles) clock ticks (the jitter fuzzer).
int SpinWait(const SpinWaitParams& params, int device, StreamHandle stream);

// cudaGetErrorString of a code these functions returned.
const char* ErrorString(int error_code);

}  // namespace kvcanary::cuda
