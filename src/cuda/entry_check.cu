// The one translation unit that includes entry_check.cuh: the kernel's policies, Verify (the
// plan-array entries) and FusedVerify (the derived entries; with stored entries, a second
// instantiation that reads them when the launch's entries fit).
#include "cuda/backend.h"
#include "cuda/entry_check.cuh"

namespace kvcanary::cuda {
namespace {

cudaError_t LaunchFusedEntryCheck(const FusedVerifyHalves& halves, cudaStream_t stream) {
  return halves.half[0].stored.slot_indices != nullptr
             ? LaunchEntryCheck<FusedVerifyParams, /*kReadsStored=*/true>(halves, stream)
             : LaunchEntryCheck<FusedVerifyParams>(halves, stream);
}

}  // namespace

int LaunchHalves(const VerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchEntryCheck<VerifyParams>, halves);
}

int LaunchHalves(const FusedVerifyHalves& halves, int device, StreamHandle stream) {
  return LaunchOnDevice(device, stream, LaunchFusedEntryCheck, halves);
}

}  // namespace kvcanary::cuda
