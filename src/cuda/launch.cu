#include "cuda/backend.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

int MultiprocessorCount() {
  constexpr int kMaxDevices = 64;
  static int counts[kMaxDevices] = {};
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= kMaxDevices) return 1;
  if (counts[device] == 0) {
    int count = 0;
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    counts[device] = count > 0 ? count : 1;
  }
  return counts[device];
}

const char* ErrorString(int error_code) {
  return cudaGetErrorString(static_cast<cudaError_t>(error_code));
}

}  // namespace kvcanary::cuda
