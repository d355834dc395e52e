// The one translation unit that includes write.cuh.
#include "cuda/backend.h"
#include "cuda/write.cuh"

namespace kvcanary::cuda {

int LaunchHalves(const WriteHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchWrite, halves);
}

}  // namespace kvcanary::cuda
