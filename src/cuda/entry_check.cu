// The one translation unit that includes entry_check.cuh: the kernel's two policies, Verify (the
// plan-array entries) and FusedVerify (the derived entries).
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {

template cudaError_t LaunchEntryCheck<VerifyParams>(const VerifyHalves&, cudaStream_t);
template cudaError_t LaunchEntryCheck<FusedVerifyParams>(const FusedVerifyHalves&, cudaStream_t);

int Verify(const VerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchEntryCheck(halves, static_cast<cudaStream_t>(stream)));
}

int FusedVerify(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchEntryCheck(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
