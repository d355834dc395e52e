// WriteKernel, the kernel of Write: WriteRows over the whole grid.
#include "cuda/backend.h"
#include "cuda/write.cuh"

namespace kvcanary::cuda {
namespace {

constexpr int kWriteThreads = 128;

__global__ void __launch_bounds__(kWriteThreads)
    WriteKernel(const __grid_constant__ WriteHalves w) {
  __shared__ ChainStaging staging;
  WriteRows(w, staging);
}

cudaError_t LaunchWrite(const WriteHalves& w, cudaStream_t stream) {
  const int blocks = PersistentGrid(WriteKernel, kWriteThreads, w.half[0].capacity * kWriteThreads);
  WriteKernel<<<blocks, kWriteThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

}  // namespace

int LaunchHalves(const WriteHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchWrite, halves);
}

}  // namespace kvcanary::cuda
