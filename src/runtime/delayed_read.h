// DelayedRead: a value copied device-to-host in step T and consumed in step T+1, so
// the host never waits on work it just enqueued. Two pinned slots alternate: the copy of
// step T+1 never overwrites the bytes step T's consumer is about to read.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime {

class DelayedRead {
 public:
  DelayedRead(Device device, int64_t bytes)
      : device_(device), bytes_(bytes) {
    for (int i = 0; i < 2; ++i) {
      slots_[i] = DeviceBuffer(Device::CPU(), bytes, /*pinned=*/true);
      events_[i] = std::make_unique<DeviceEvent>(device);
    }
  }

  // Enqueues the copy of `bytes` from `src` (on the device) on `stream`; replaces nothing staged
  // before it: call Take() first.
  void Stage(const void* src, StreamHandle stream) {
    const int slot = next_;
    CopyBytesAsync(slots_[slot].data(), src, bytes_, device_, stream);
    events_[slot]->Record(stream);
    staged_ = slot;
    next_ = 1 - slot;
  }

  // Stages host bytes (values already known on the host pass through the same one-step delay).
  void StageHost(const void* src) {
    std::memcpy(slots_[next_].data(), src, bytes_);
    staged_ = next_;
    next_ = 1 - next_;
  }

  // The bytes of the last Stage, waiting for its copy (normally long done); null when nothing is
  // staged. Each staging is taken once.
  const void* Take() {
    if (staged_ < 0) return nullptr;
    const int slot = staged_;
    staged_ = -1;
    events_[slot]->Synchronize();
    return slots_[slot].data();
  }

  int64_t device_bytes() const { return 0; }  // host memory only
  int64_t host_bytes() const { return 2 * bytes_; }

 private:
  Device device_;
  int64_t bytes_;
  DeviceBuffer slots_[2];
  std::unique_ptr<DeviceEvent> events_[2];
  int next_ = 0;
  int staged_ = -1;
};

}  // namespace kvcanary::runtime
