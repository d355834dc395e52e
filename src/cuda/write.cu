// The one translation unit that includes write.cuh.
#include "cuda/backend.h"
#include "cuda/write.cuh"

namespace kvcanary::cuda {

int Write(const WriteParams& params, const WriteParams* paired, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  WriteHalves halves;
  halves.half[0] = params;
  if (paired != nullptr) {
    halves.half[1] = *paired;
    halves.num_halves = 2;
  }
  return static_cast<int>(LaunchWrite(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
