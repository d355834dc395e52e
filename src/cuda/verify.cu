// Verify on CUDA: the entry-check kernel with the plan-array policy (entry_check.cuh).
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {

template cudaError_t LaunchEntryCheck<VerifyParams>(const VerifyHalves&, cudaStream_t);

int Verify(const VerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchEntryCheck(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
