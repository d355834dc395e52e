// What every CUDA kernel of kvcanary shares: the launch shape of a grid-stride kernel, the device
// guard, and recording a violation row into the fill-once ring.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "core/params.h"
#include "core/record.h"
#include "kvcanary/tensor.h"

namespace kvcanary::cuda {

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

// Blocks of a persistent grid-stride launch of kKernel: enough resident blocks to fill every SM,
// never more than the work (a capacity, so the shape never depends on device values) needs.
// The occupancy of each kernel is asked once (per process: one kind of GPU is assumed), keeping
// driver queries off the per-launch path.
template <auto kKernel>
int PersistentGrid(int threads, int64_t max_items) {
  static std::atomic<int> cached_blocks_per_sm{0};
  int blocks_per_sm = cached_blocks_per_sm.load(std::memory_order_relaxed);
  if (blocks_per_sm == 0) {
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kKernel, threads, 0);
    blocks_per_sm = blocks_per_sm > 0 ? blocks_per_sm : 1;
    cached_blocks_per_sm.store(blocks_per_sm, std::memory_order_relaxed);
  }
  const int64_t full = int64_t{blocks_per_sm} * MultiprocessorCount();
  const int64_t needed = (max_items + threads - 1) / threads;
  return static_cast<int>(needed < 1 ? 1 : (needed < full ? needed : full));
}

// Programmatic dependent launch (compute capability 9.0 and later). A kernel of kvcanary is
// enqueued so that the GPU may launch it while the kernel before it on the stream is still
// finishing, and begins with BeginOverlappedKernel: it waits there, before touching any memory,
// until every earlier kernel on the stream has completed and its writes are visible, so it reads
// and writes exactly what a plain launch would; only the launch latency between the two overlaps.
// A kernel whose every block waits completes after the kernels before it, so the order holds
// along a chain of such launches, and a plain launch after ours (an engine's kernel, a copy, an
// event) still waits for all of it. Our kernels never signal their dependents early: a kernel
// launched after ours, ours or an engine's, starts only as our blocks exit, never while they still
// read or write.
__device__ inline void BeginOverlappedKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device and this process's CUDA may overlap launches: compute capability
// 9.0 or later, runtime and driver 12.3 or later (graph capture of such launches). Asked once
// per device.
bool DeviceOverlapsLaunches();

// Whether kKernel's loaded code holds BeginOverlappedKernel's wait: compiled for compute 9.0 or
// later. Code JIT-compiled from older PTX has none, so it must not be launched overlapped.
template <auto kKernel>
bool KernelWaitsForPriorGrids() {
  static const bool waits = [] {
    cudaFuncAttributes attributes{};
    const bool known = cudaFuncGetAttributes(&attributes, kKernel) == cudaSuccess;
    cudaGetLastError();  // a failed query must not linger as the thread's last error
    return known && attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
  }();
  return waits;
}

// kKernel<<<blocks, threads, 0, stream>>>(args...), launched overlapped where the device and the
// kernel's code allow (kKernel begins with BeginOverlappedKernel), plainly elsewhere. Returns the
// launch's error and leaves none pending.
template <auto kKernel, typename... Args>
cudaError_t LaunchOverlapped(int blocks, int threads, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  config.attrs = &attribute;
  const bool overlap = DeviceOverlapsLaunches() && KernelWaitsForPriorGrids<kKernel>();
  config.numAttrs = overlap ? 1 : 0;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kKernel, std::forward<Args>(args)...);
  const cudaError_t pending = cudaGetLastError();
  return launched != cudaSuccess ? launched : pending;
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
