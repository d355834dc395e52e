// DeviceTensor: an owning, contiguous tensor in a BenchDevice's memory, and the TensorViews the
// ops are called with.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "bench/device.h"
#include "kvcanary/tensor.h"

namespace kvcanary::bench {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(BenchDevice& device, DType dtype, std::vector<int64_t> shape)
      : device_(&device), dtype_(dtype), shape_(std::move(shape)) {
    numel_ = 1;
    for (int64_t d : shape_) numel_ *= d;
    // Zero-sized tensors still get a distinct, valid pointer.
    memory_ = device.Allocate(bytes() > 0 ? bytes() : 64);
  }

  TensorView view() const { return TensorView(data(), dtype_, device_->device(), shape_); }
  // A [1] view of element i: one tag's entry of a per-tag counter array.
  TensorView element(int64_t i) const {
    return TensorView(static_cast<uint8_t*>(data()) + i * ItemSize(dtype_), dtype_,
                      device_->device(), {1});
  }

  BenchDevice& device() const { return *device_; }
  void* data() const { return memory_.get(); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * ItemSize(dtype_); }

  // Copies `count` host values to elements [first, first + count).
  template <typename T>
  void Upload(const T* values, int64_t count, int64_t first = 0) const {
    CheckRange<T>(first, count);
    device_->CopyToDevice(static_cast<T*>(data()) + first, values, count * sizeof(T));
  }
  template <typename T>
  void Upload(const std::vector<T>& values, int64_t first = 0) const {
    Upload(values.data(), static_cast<int64_t>(values.size()), first);
  }
  template <typename T>
  std::vector<T> Download(int64_t first, int64_t count) const {
    CheckRange<T>(first, count);
    std::vector<T> out(count);
    device_->CopyToHost(out.data(), static_cast<const T*>(data()) + first, count * sizeof(T));
    return out;
  }
  template <typename T>
  T Read(int64_t i) const {
    return Download<T>(i, 1)[0];
  }

 private:
  // Element types are checked by size only: bf16 payloads are moved as uint16_t.
  template <typename T>
  void CheckRange(int64_t first, int64_t count) const {
    if (static_cast<int64_t>(sizeof(T)) != ItemSize(dtype_) || first < 0 || count < 0 ||
        first + count > numel_) {
      throw std::logic_error("DeviceTensor: element type or range does not fit the tensor");
    }
  }

  BenchDevice* device_ = nullptr;
  DType dtype_ = DType::kUInt8;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<void> memory_;
};

}  // namespace kvcanary::bench
