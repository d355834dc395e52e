#include <atomic>

#include "cuda/backend.h"
#include "cuda/launch.cuh"

namespace kvcanary::cuda {

int MultiprocessorCount() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> counts[kMaxDevices] = {};  // launches may come from several threads
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= kMaxDevices) return 1;
  int count = counts[device].load(std::memory_order_relaxed);
  if (count == 0) {
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    count = count > 0 ? count : 1;
    counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

const char* ErrorString(int error_code) {
  return cudaGetErrorString(static_cast<cudaError_t>(error_code));
}

}  // namespace kvcanary::cuda
