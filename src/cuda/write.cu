// The one translation unit that includes write.cuh.
#include "cuda/backend.h"
#include "cuda/write.cuh"

namespace kvcanary::cuda {

int Write(const WriteParams& params, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchWrite(params, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
