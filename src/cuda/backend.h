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
// paired: the other half of a K/V pair verified in the same launch, or nullptr.
int Verify(const VerifyParams& params, const VerifyParams* paired, int device, StreamHandle stream);
// paired: the other half of a K/V pair, checked against the same derived entries, or nullptr.
int FusedVerify(const FusedVerifyParams& params, const FusedVerifyParams* paired, int device,
                StreamHandle stream);
// paired: the other half of a K/V pair written in the same launch, or nullptr.
int Write(const WriteParams& params, const WriteParams* paired, int device, StreamHandle stream);
int Scatter(const ScatterParams& params, int device, StreamHandle stream);

// cudaGetErrorString of a code these functions returned.
const char* ErrorString(int error_code);

}  // namespace kvcanary::cuda
