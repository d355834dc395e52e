// StageKernel: a forward's HEAD or TAIL for one group in one launch. The offsets plan (HEAD only,
// one block), the fused verify (the whole grid) and the write (a block per row) are separated by
// grid-wide barriers (a sampled forward's TAIL then advances the phases its verify read), so each part reads exactly what the part before it left, as three launches
// in a row would: the verify sees the plan's offsets and no record of this stage's write, even
// when a faulty batch writes a slot the verify reads. What the one launch saves is two launch
// latencies and two kernel drains, most of a decode step's time.
//
// The barrier needs every block resident at once: the kernel is launched cooperatively (the
// driver refuses a grid that cannot be co-resident instead of letting it hang), with the
// persistent grid the other kernels use. A device without cooperative launches gets the three
// launches instead.
#include <cooperative_groups.h>

#include <atomic>

#include "cuda/backend.h"
#include "cuda/entry_check.cuh"
#include "cuda/plan_offsets.cuh"
#include "cuda/write.cuh"

namespace kvcanary::cuda {
namespace {

constexpr int kStageThreads = 256;

__global__ void __launch_bounds__(kStageThreads, 4)
    StageKernel(const __grid_constant__ StageParams s) {
  __shared__ typename PlanOffsetsScan<kStageThreads>::TempStorage scan_storage;
  __shared__ ChainStaging staging;
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  if (s.has_plan) {  // the same for every block: each one reaches the barrier
    if (blockIdx.x == 0) {
      PlanOffsetsBlock<kStageThreads>(OffsetsParamsOf(s.plan, s.plan.scratch),
                                      /*zero_write_tail=*/true, scan_storage);
    }
    grid.sync();
  }
  CheckEntries(s.verify, int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
               int64_t{gridDim.x} * blockDim.x);
#ifndef KVC_STAGE_NO_WARM  // an A/B switch for the bench; removed once measured
  WarmFirstRow(s.write);
#endif
  grid.sync();
  WriteRows(s.write, staging);
  // The verify that read the phases finished before the barrier; the write never reads them.
  if (s.has_advance) {
    AdvancePhases(s.advance, int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                  int64_t{gridDim.x} * blockDim.x);
  }
}

// Whether `device` runs cooperative launches, asked once per device.
bool CooperativeLaunchSupported(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> answers[kMaxDevices] = {};  // 0 unknown, 1 yes, 2 no
  if (device < 0 || device >= kMaxDevices) return false;
  int answer = answers[device].load(std::memory_order_relaxed);
  if (answer == 0) {
    int supported = 0;
    cudaDeviceGetAttribute(&supported, cudaDevAttrCooperativeLaunch, device);
    answer = supported != 0 ? 1 : 2;
    answers[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 1;
}

cudaError_t LaunchStageKernel(const StageParams& s, cudaStream_t stream) {
  // Enough blocks for the verify's capacity and for a block per write row, never more than fit.
  const int64_t verify_items = s.verify.half[0].capacity;
  const int64_t write_items = s.write.half[0].capacity * kStageThreads;
  const int blocks = PersistentGrid(StageKernel, kStageThreads,
                                    verify_items > write_items ? verify_items : write_items);
  cudaLaunchAttribute cooperative = {};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kStageThreads);
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, StageKernel, s);
}

}  // namespace

int RunStage(const StageParams& params, int device, StreamHandle stream) {
  if (!CooperativeLaunchSupported(device)) {  // three launches in a row: the same result
    int error = params.has_plan ? Plan(params.plan, device, stream) : 0;
    if (error == 0) error = LaunchHalves(params.verify, device, stream);
    if (error == 0) error = LaunchHalves(params.write, device, stream);
    if (error == 0 && params.has_advance) error = AdvancePhase(params.advance, device, stream);
    return error;
  }
  return LaunchOnDevice(device, stream, LaunchStageKernel, params);
}

}  // namespace kvcanary::cuda
