// Memory, copies, streams and events on a Device: the little the runtime and engines built on it
// (the simulator) need from a device API, with one implementation for the CPU (plain memory,
// copies done at once) and one for CUDA (the runtime API, enqueued on streams).
//
// The runtime allocates every byte here at install, never per step. Copies and fills are
// stream-ordered and never synchronise, so they may be captured in a CUDA graph.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcanary/tensor.h"

namespace kvcanary::runtime {

// Owned, zero-filled bytes on a device; 256-byte aligned. Move-only. `pinned` applies to CPU
// buffers of a CUDA runtime (page-locked staging for asynchronous device-to-host copies).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, int64_t bytes, bool pinned = false);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  // A dense view of `shape` starting `byte_offset` bytes in. REQUIRES: it fits.
  TensorView View(DType dtype, const std::vector<int64_t>& shape, int64_t byte_offset = 0) const;

 private:
  void* Allocate(int64_t rounded);
  void Release();
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_{};
  bool pinned_ = false;
};

// How many DeviceBuffers hold memory now (all devices, host buffers included): a refused install
// or any failed construction leaves it as it was.
int64_t LiveBufferCount();

// Copies `bytes` between any two of host memory and `device` memory, ordered on `stream`
// (CPU: done before return).
void CopyBytesAsync(void* dst, const void* src, int64_t bytes, Device device, StreamHandle stream);
// Sets `bytes` at `dst` to zero, ordered on `stream`.
void ZeroBytesAsync(void* dst, int64_t bytes, Device device, StreamHandle stream);
// Waits for everything enqueued on `stream` (CPU: nothing to wait for).
void SynchronizeStream(Device device, StreamHandle stream);
// Whether `stream` is capturing a CUDA graph now (always false on the CPU).
bool IsStreamCapturing(Device device, StreamHandle stream);
// Whether this build has the CUDA backend and a CUDA device is visible.
bool CudaDeviceAvailable();

// A CUDA stream or event the runtime creates on a device and destroys with itself; nothing on
// the CPU. The base of OwnedStream and DeviceEvent, which differ only in what they create.
class OwnedCudaHandle {
 public:
  OwnedCudaHandle(const OwnedCudaHandle&) = delete;
  OwnedCudaHandle& operator=(const OwnedCudaHandle&) = delete;

 protected:
  enum class Kind { kStream, kEvent };
  OwnedCudaHandle(Device device, Kind kind);
  ~OwnedCudaHandle();
  void* handle_ = nullptr;

 private:
  Kind kind_;
};

// A stream the runtime owns (CUDA: non-blocking; CPU: the null handle).
class OwnedStream : private OwnedCudaHandle {
 public:
  explicit OwnedStream(Device device) : OwnedCudaHandle(device, Kind::kStream) {}
  StreamHandle handle() const { return handle_; }
};

// A CUDA event without timing (CPU: always complete).
class DeviceEvent : private OwnedCudaHandle {
 public:
  explicit DeviceEvent(Device device) : OwnedCudaHandle(device, Kind::kEvent) {}
  void Record(StreamHandle stream);
  // Makes `stream` wait for the last Record.
  void BlockStream(StreamHandle stream) const;
  // Blocks the host until the last Record has completed.
  void Synchronize() const;
};

}  // namespace kvcanary::runtime
