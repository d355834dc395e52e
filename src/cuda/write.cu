// The one translation unit that includes write.cuh.
#include "cuda/backend.h"
#include "cuda/write.cuh"

#include <cstdlib>

namespace kvcanary::cuda {

bool ExperimentEarlySeed() {
  static const bool early = [] {
    const char* value = std::getenv("KVCANARY_EXPERIMENT_WRITE");
    return value != nullptr && std::atoi(value) != 0;
  }();
  return early;
}

int LaunchHalves(const WriteHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchWrite, halves);
}

}  // namespace kvcanary::cuda
