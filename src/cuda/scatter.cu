// The one translation unit that includes scatter.cuh.
#include "cuda/backend.h"
#include "cuda/scatter.cuh"

namespace kvcanary::cuda {

int Scatter(const ScatterParams& params, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchScatter(params, static_cast<cudaStream_t>(stream)));
}

int SwaTranslate(const SwaTranslateParams& params, int device, StreamHandle stream) {
  DeviceGuard guard(device);
  return static_cast<int>(LaunchSwaTranslate(params, static_cast<cudaStream_t>(stream)));
}

}  // namespace kvcanary::cuda
