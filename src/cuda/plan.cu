// The one translation unit that includes plan.cuh: the fused plan, the two stages and the sampled
// verify's phase advance.
#include "cuda/backend.h"
#include "cuda/plan.cuh"

namespace kvcanary::cuda {

int Plan(const PlanParams& params, int device, StreamHandle handle) {
  DeviceGuard guard(device);
  const auto stream = static_cast<cudaStream_t>(handle);
  int64_t* scratch = params.scratch;
  if (scratch == nullptr) {  // SGLang's API allows a temporary; the runtime always passes one
    const cudaError_t error = cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                                              (params.in.bs + 1) * sizeof(int64_t), stream);
    if (error != cudaSuccess) return static_cast<int>(error);
  }
  PlanOffsetsParams offsets{
      params.in,   scratch, params.verify.num_valid, params.verify.enable, params.verify.capacity,
      params.write};
  cudaError_t error = LaunchPlanOffsets(offsets, /*zero_write_tail=*/true, stream);
  // An offsets-only plan has no entry arrays: FusedVerify derives the entries itself.
  if (error == cudaSuccess && params.verify.slot_indices != nullptr) {
    const PlanEntriesParams entries{params.in, scratch, params.verify.enable, params.verify};
    error = LaunchPlanEntries(entries, stream);
  }
  if (params.scratch == nullptr) {
    const cudaError_t free_error = cudaFreeAsync(scratch, stream);
    if (error == cudaSuccess) error = free_error;
  }
  return static_cast<int>(error);
}

int PlanOffsets(const PlanOffsetsParams& params, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(
      LaunchPlanOffsets(params, /*zero_write_tail=*/false, static_cast<cudaStream_t>(stream)));
}

int PlanEntries(const PlanEntriesParams& params, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchPlanEntries, params);
}

int AdvancePhase(const AdvancePhaseParams& params, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchAdvancePhase, params);
}

}  // namespace kvcanary::cuda
