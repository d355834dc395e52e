// EntryCheckKernel, the one kernel of Verify (the plan-array entries) and FusedVerify (the derived
// entries): CheckEntries over the whole grid.
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {
namespace {

template <typename Params>
__global__ void __launch_bounds__(kEntryCheckThreads, 4)
    EntryCheckKernel(const __grid_constant__ Halves<Params> v) {
  CheckEntries(v, int64_t{blockIdx.x} * blockDim.x + threadIdx.x, int64_t{gridDim.x} * blockDim.x);
}

// Enqueues the entry check of `v` on `stream`. REQUIRES: validated params; the current device is
// the tensors' device. The grid is sized by the capacity, never by device values: small plans
// still spread over many SMs, and a captured graph replays with any count.
template <typename Params>
cudaError_t LaunchEntryCheck(const Halves<Params>& v, cudaStream_t stream) {
  const int blocks =
      PersistentGrid(EntryCheckKernel<Params>, kEntryCheckThreads, v.half[0].capacity);
  EntryCheckKernel<Params><<<blocks, kEntryCheckThreads, 0, stream>>>(v);
  return cudaGetLastError();
}

}  // namespace

int LaunchHalves(const VerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchEntryCheck<VerifyParams>, halves);
}

int LaunchHalves(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchEntryCheck<FusedVerifyParams>, halves);
}

}  // namespace kvcanary::cuda
