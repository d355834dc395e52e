// The fake engine's buffers (tests/runtime/fake_engine.h): bytes the runtime reads on the engine's
// device, with a host copy the engine edits and uploads on its own stream.
#pragma once

#include <cstdint>

#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime::testing {

// Bytes the runtime reads on the engine's device, with the host copy the engine edits. On the
// CPU both are the same memory and Upload does nothing.
class MirroredBuffer {
 public:
  MirroredBuffer(Device device, int64_t bytes) : device_(device), on_device_(device, bytes) {
    if (mirrored()) host_ = DeviceBuffer(Device::CPU(), bytes, /*pinned=*/true);
  }
  bool mirrored() const { return device_.type == DeviceType::kCUDA; }
  template <typename T>
  T* host() const {
    return (mirrored() ? host_ : on_device_).data_as<T>();
  }
  const DeviceBuffer& device_buffer() const { return on_device_; }
  // Enqueues host bytes [offset, offset + bytes) -> device on `stream`.
  void Upload(int64_t offset, int64_t bytes, StreamHandle stream) const {
    if (!mirrored() || bytes <= 0) return;
    CopyBytesAsync(on_device_.data_as<char>() + offset, host_.data_as<char>() + offset, bytes,
                   device_, stream);
  }
  void UploadAll(StreamHandle stream) const { Upload(0, on_device_.bytes(), stream); }

 private:
  Device device_;
  DeviceBuffer on_device_;
  DeviceBuffer host_;
};

}  // namespace kvcanary::runtime::testing
