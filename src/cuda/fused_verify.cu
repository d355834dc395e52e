// The one translation unit that includes fused_verify.cuh.
#include "cuda/backend.h"
#include "cuda/fused_verify.cuh"

namespace kvcanary::cuda {

int FusedVerify(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchFusedVerify(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
