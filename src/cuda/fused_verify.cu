// The one translation unit that includes fused_verify.cuh.
#include "cuda/backend.h"
#include "cuda/fused_verify.cuh"

namespace kvcanary::cuda {

int FusedVerify(const FusedVerifyParams& params, const FusedVerifyParams* paired, int device,
                StreamHandle stream) {
  DeviceGuard guard(device);
  FusedVerifyHalves halves;
  halves.half[0] = params;
  if (paired != nullptr) {
    halves.half[1] = *paired;
    halves.num_halves = 2;
  }
  return static_cast<int>(LaunchFusedVerify(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
