// FusedVerify on CUDA: the entry-check kernel with the derived-entry policy (entry_check.cuh).
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {

template cudaError_t LaunchEntryCheck<FusedVerifyParams>(const FusedVerifyHalves&, cudaStream_t);

int FusedVerify(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchEntryCheck(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
