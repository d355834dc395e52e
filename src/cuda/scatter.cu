// The one translation unit that includes scatter.cuh.
#include "cuda/backend.h"
#include "cuda/scatter.cuh"

namespace kvcanary::cuda {

int Scatter(const ScatterParams& params, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchScatter, params);
}

int SwaTranslate(const SwaTranslateParams& params, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchSwaTranslate, params);
}

}  // namespace kvcanary::cuda
