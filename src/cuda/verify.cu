// The one translation unit that includes verify.cuh.
#include "cuda/backend.h"
#include "cuda/verify.cuh"

namespace kvcanary::cuda {

int Verify(const VerifyParams& params, const VerifyParams* paired, int device,
           StreamHandle stream) {
  DeviceGuard guard(device);
  VerifyHalves halves;
  halves.half[0] = params;
  if (paired != nullptr) {
    halves.half[1] = *paired;
    halves.num_halves = 2;
  }
  return static_cast<int>(LaunchVerify(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
