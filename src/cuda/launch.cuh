// What every CUDA kernel of kvcanary shares: the launch shape of a grid-stride kernel, the device
// guard, and recording a violation row into the fill-once ring.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "core/params.h"
#include "core/record.h"
#include "kvcanary/tensor.h"

namespace kvcanary::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarp = 0xffffffffu;

// Makes `device` current for the scope of a launch and restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

// What every backend entry point does around its launcher: makes `device` current, enqueues
// launch(params, stream) and returns its cudaError_t as an int.
template <typename Launch, typename Params>
int LaunchOnDevice(int device, StreamHandle stream, Launch&& launch, const Params& params) {
  DeviceGuard guard(device);
  return static_cast<int>(launch(params, static_cast<cudaStream_t>(stream)));
}

// Multiprocessors of the current device, read once per device.
int MultiprocessorCount();

// Blocks of a persistent grid-stride launch: enough resident blocks to fill every SM, never more
// than the work (a capacity, so the shape never depends on device values) needs.
// The occupancy of each kernel is asked once (per process: one kind of GPU is assumed), keeping
// driver queries off the per-launch path.
template <typename Kernel>
int PersistentGrid(Kernel kernel, int threads, int64_t max_items) {
  static std::atomic<int> cached_blocks_per_sm{0};
  int blocks_per_sm = cached_blocks_per_sm.load(std::memory_order_relaxed);
  if (blocks_per_sm == 0) {
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, threads, 0);
    blocks_per_sm = blocks_per_sm > 0 ? blocks_per_sm : 1;
    cached_blocks_per_sm.store(blocks_per_sm, std::memory_order_relaxed);
  }
  const int64_t full = int64_t{blocks_per_sm} * MultiprocessorCount();
  const int64_t needed = (max_items + threads - 1) / threads;
  return static_cast<int>(needed < 1 ? 1 : (needed < full ? needed : full));
}

// Programmatic dependent launch (sm_90 and later). Every kernel of kvcanary is enqueued so that it
// may start while the kernel before it on the stream is still finishing, and begins with
// BeginOverlappedKernel: it waits there until every earlier kernel on the stream has completed
// and its writes are visible, before touching any memory, so it reads and writes exactly what a
// plain launch would; only the launch latency between two kernels overlaps. Then it lets the next
// kernel be launched the same way. A kernel whose every block waits completes after the kernels
// before it, so the ordering holds along a chain of such launches, and a plain launch after ours
// (an engine's kernel, a copy, an event) still waits for all of it.
__device__ inline void BeginOverlappedKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// EXPERIMENT ONLY: KVCANARY_EXPERIMENT_PDL=0 launches plainly, for an A/B in one binary.
inline bool OverlapLaunches() {
  static const bool overlap = [] {
    const char* value = std::getenv("KVCANARY_EXPERIMENT_PDL");
    return value == nullptr || value[0] != '0';
  }();
  return overlap;
}

// kernel<<<blocks, threads, 0, stream>>>(args...) as a programmatic dependent launch: the kernel
// must begin with BeginOverlappedKernel.
template <typename... Params, typename... Args>
cudaError_t LaunchOverlapped(void (*kernel)(Params...), int blocks, int threads,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = OverlapLaunches() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Kernels take their params as `const __grid_constant__` values: they read fields through
// references, and a reference to a plain kernel parameter would copy the whole struct into local
// memory.

// Reserves seq = write_index++ and stores the row when seq lies in [0, capacity). The system-scope
// fence makes the row visible to the host no later than the end of the launch.
__device__ inline void RecordViolation(const LaunchParams& launch, const ViolationRow& row) {
  const int seq = atomicAdd(reinterpret_cast<int*>(launch.write_index), 1);
  if (seq < 0 || seq >= launch.ring_capacity) return;
  int64_t* out = launch.ring + int64_t{seq} * kViolationFields;
  out[0] = row.kernel_kind;
  out[1] = row.slot_idx;
  out[2] = row.position;
  out[3] = row.stored_token;
  out[4] = row.expected_token;
  out[5] = row.stored_chain_hash;
  out[6] = row.expected_aux;
  out[7] = row.fail_reason_bits;
  __threadfence_system();
}

// counter += delta on a device int64, wrapping like the CPU backend.
__device__ inline void AddToCounter(int64_t* counter, int64_t delta) {
  atomicAdd(reinterpret_cast<unsigned long long*>(counter), static_cast<unsigned long long>(delta));
}

}  // namespace kvcanary::cuda
