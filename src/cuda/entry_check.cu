// The one translation unit that includes entry_check.cuh: the kernel's two policies, Verify (the
// plan-array entries) and FusedVerify (the derived entries).
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {

template cudaError_t LaunchEntryCheck<VerifyParams>(const VerifyHalves&, cudaStream_t);
template cudaError_t LaunchEntryCheck<FusedVerifyParams>(const FusedVerifyHalves&, cudaStream_t);

int LaunchHalves(const VerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchEntryCheck<VerifyParams>, halves);
}

int LaunchHalves(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchEntryCheck<FusedVerifyParams>, halves);
}

}  // namespace kvcanary::cuda
