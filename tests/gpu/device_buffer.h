// Device memory for the GPU tests: a checked-CUDA-call macro, an owning device tensor mirrored from
// a HostTensor (its memory a runtime::DeviceBuffer), and the fixture that skips every GPU test on a machine without a CUDA device (CI
// builds these tests everywhere and runs them on the device machine; STYLE.md rule 21).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kvcanary/runtime/device_memory.h"
#include "testutil.h"

namespace kvcanary::testing {

// Fails the current test with the CUDA error text and throws, so the test stops at the first
// failing call (GoogleTest reports the exception as a failure of the test, not of the binary).
inline void CheckCuda(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return;
  const std::string message = std::string(call) + " failed: " + cudaGetErrorString(error);
  ADD_FAILURE_AT(file, line) << message;
  throw std::runtime_error(message);
}

#define KVC_CUDA_CHECK(call) ::kvcanary::testing::CheckCuda((call), #call, __FILE__, __LINE__)

// True when the CUDA runtime sees at least one device.
inline bool HasCudaDevice() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error so later calls do not report it
    return false;
  }
  return count > 0;
}

// An owning, contiguous tensor in device memory on CUDA device `device`, made from a HostTensor.
// Copies are synchronous: a copy in has landed when it returns, and a copy back (cudaMemcpy on the
// legacy default stream) waits for work on that stream; work on other streams must be
// synchronised by the caller first.
template <typename T>
class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(const HostTensor<T>& host, int device = 0)
      : shape_(host.shape()), numel_(host.values().size()), device_(device) {
    // Never a null pointer, even for an empty tensor: ops see a real (if unread) address.
    memory_ = runtime::DeviceBuffer(Device::CUDA(device), bytes() > 0 ? bytes() : 16);
    data_ = memory_.data_as<T>();
    CopyFrom(host);
  }
  DeviceTensor(DeviceTensor&&) noexcept = default;
  DeviceTensor& operator=(DeviceTensor&&) noexcept = default;
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  TensorView view() const { return TensorView(data_, DTypeOf<T>(), Device::CUDA(device_), shape_); }
  // The same memory seen with another shape and strides (elements).
  TensorView view(std::vector<int64_t> shape, std::vector<int64_t> strides = {},
                  bool writable = true) const {
    return TensorView(data_, DTypeOf<T>(), Device::CUDA(device_), std::move(shape),
                      std::move(strides), writable);
  }

  // Overwrites the device values in place (same pointer, so a captured graph sees them).
  void CopyFrom(const HostTensor<T>& host) {
    if (host.values().size() != numel_) {
      ADD_FAILURE() << "DeviceTensor::CopyFrom: " << host.values().size() << " elements into "
                    << numel_;
      throw std::runtime_error("DeviceTensor::CopyFrom: element count mismatch");
    }
    if (numel_ == 0) return;
    KVC_CUDA_CHECK(cudaMemcpy(data_, host.values().data(), bytes(), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before its DMA lands, and work on a non-blocking
    // stream does not wait for the legacy stream: wait here, so every stream sees the values.
    KVC_CUDA_CHECK(cudaDeviceSynchronize());
  }
  HostTensor<T> ToHost() const {
    HostTensor<T> host(shape_);
    if (numel_ > 0) {
      KVC_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    }
    return host;
  }

  T* data() const { return data_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t bytes() const { return numel_ * sizeof(T); }

 private:
  std::vector<int64_t> shape_;
  size_t numel_ = 0;
  int device_ = 0;
  runtime::DeviceBuffer memory_;  // the one device allocator of library, runtime, bench and tests
  T* data_ = nullptr;
};

// The fixture of every GPU test: skips without a device, else makes device 0 current. A derived
// SetUp must return early when IsSkipped().
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasCudaDevice()) GTEST_SKIP() << "no CUDA device";
    KVC_CUDA_CHECK(cudaSetDevice(0));
  }
};

}  // namespace kvcanary::testing
