// The one translation unit that includes spin_wait.cuh.
#include "cuda/backend.h"
#include "cuda/spin_wait.cuh"

namespace kvcanary::cuda {

int SpinWait(const SpinWaitParams& params, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchSpinWait, params);
}

}  // namespace kvcanary::cuda
