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

bool DeviceOverlapsLaunches() {
  constexpr int kMaxDevices = 64;
  constexpr int kFirstVersion = 12030;  // CUDA 12.3: programmatic launches in graph capture
  static std::atomic<int> answers[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= kMaxDevices) return false;
  int answer = answers[device].load(std::memory_order_relaxed);
  if (answer == 0) {
    int major = 0, runtime = 0, driver = 0;
    const bool known =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaRuntimeGetVersion(&runtime) == cudaSuccess &&
        cudaDriverGetVersion(&driver) == cudaSuccess;
    cudaGetLastError();
    answer = known && major >= 9 && runtime >= kFirstVersion && driver >= kFirstVersion ? 2 : 1;
    answers[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 2;
}

const char* ErrorString(int error_code) {
  return cudaGetErrorString(static_cast<cudaError_t>(error_code));
}

}  // namespace kvcanary::cuda
