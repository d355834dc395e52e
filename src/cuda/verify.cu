// The one translation unit that includes verify.cuh.
#include "cuda/backend.h"
#include "cuda/verify.cuh"

namespace kvcanary::cuda {

int Verify(const VerifyHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchVerify(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
