// The one translation unit that includes write.cuh.
#include "cuda/backend.h"
#include "cuda/write.cuh"

namespace kvcanary::cuda {

int Write(const WriteHalves& halves, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchWrite(halves, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
