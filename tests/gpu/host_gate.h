// A gate that holds a stream on the device until the host opens it. A test enqueues its launches
// behind it and then opens it, so the device starts them together however long the host took
// between the enqueues. The wait is bounded in wall-clock time: a gate the host never opens gives
// up after the limit and says so (timed_out), so a broken test fails instead of hanging.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "device_buffer.h"

namespace kvcanary::testing {

// host_gate.cu: one thread that polls `open` until it is non-zero, or until `limit_ns` of the
// GPU's global timer have passed, then sets `timed_out`.
cudaError_t LaunchWaitForHost(const int32_t* open, int32_t* timed_out, int64_t limit_ns,
                              cudaStream_t stream);

class HostGate {
 public:
  // One int32 pair in mapped pinned host memory: [0] open, [1] timed out. Closed.
  HostGate() {
    void* host = nullptr;
    KVC_CUDA_CHECK(cudaHostAlloc(&host, 2 * sizeof(int32_t), cudaHostAllocMapped));
    host_ = static_cast<int32_t*>(host);
    void* device = nullptr;
    KVC_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
    device_ = static_cast<int32_t*>(device);
    Close();
  }
  ~HostGate() { cudaFreeHost(host_); }
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;

  // Enqueues the wait on `stream`: it returns when the gate is open, or after `limit_ns`.
  void Enqueue(cudaStream_t stream, int64_t limit_ns) const {
    KVC_CUDA_CHECK(LaunchWaitForHost(device_, device_ + 1, limit_ns, stream));
  }
  // The host's store, which the waiting thread sees.
  void Open() { Word(0).store(1); }
  // Closes the gate and clears the timeout. REQUIRES: no wait of this gate pending.
  void Close() {
    Word(0).store(0);
    Word(1).store(0);
  }
  // Whether a wait gave up before the host opened the gate (read after its stream completed).
  bool timed_out() const { return Word(1).load() != 0; }

 private:
  std::atomic_ref<int32_t> Word(int index) const { return std::atomic_ref<int32_t>(host_[index]); }

  int32_t* host_ = nullptr;
  int32_t* device_ = nullptr;  // the same memory, as the device addresses it
};

}  // namespace kvcanary::testing
