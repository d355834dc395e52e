// TensorView: how tensors cross every public boundary (the DLPack model).
//
// A TensorView is non-owning: a data pointer, a dtype, a device, a shape and strides counted in
// elements, and whether the memory may be written. The caller keeps the memory alive for the
// duration of the call (and, on CUDA, until the enqueued work has run). A default-constructed
// view is "absent": the C++ spelling of Python's None for optional tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kFloat8E4M3Fn,
  kFloat8E5M2,
};

// Bytes per element.
int64_t ItemSize(DType dtype);
// "torch.int64" and so on: messages render dtypes as torch does, on every backend.
const char* DTypeName(DType dtype);

enum class DeviceType : uint8_t { kCPU, kCUDA, kOther };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t index = 0;
  // For kOther: the DLPack device-type code, so a message can name the device.
  int32_t dlpack_code = 0;

  static Device CPU() { return Device{}; }
  static Device CUDA(int32_t index) { return Device{DeviceType::kCUDA, index, 2}; }
  bool operator==(const Device& other) const {
    return type == other.type && index == other.index && dlpack_code == other.dlpack_code;
  }
  // "cpu", "cuda:0", or "dlpack_device_<code>:<index>".
  std::string ToString() const;
};

// An opaque cudaStream_t; nullptr is the default stream. Ignored by the CPU backend.
using StreamHandle = void*;

inline constexpr int kMaxTensorDims = 8;

class TensorView {
 public:
  // An absent tensor (None).
  TensorView() = default;

  // REQUIRES: shape.size() <= kMaxTensorDims; strides empty (row-major dense, filled in here) or
  // of the same length as shape. Throws kvcanary::Error otherwise.
  TensorView(void* data, DType dtype, Device device, const std::vector<int64_t>& shape,
             const std::vector<int64_t>& strides = {}, bool writable = true);

  bool defined() const { return defined_; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool writable() const { return writable_; }
  int ndim() const { return ndim_; }
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t stride(int dim) const { return strides_[dim]; }
  // The product of the sizes, INT64_MAX when it overflows (every op refuses such a tensor).
  int64_t numel() const;
  // Python's len(): size(0), or 0 for a 0-d tensor.
  int64_t length() const { return ndim_ >= 1 ? shape_[0] : 0; }
  // torch's rule: every dimension of size != 1 has the row-major dense stride; empty tensors are
  // contiguous.
  bool is_contiguous() const;

  // Python tuple form, as messages print them: "(3, 4)", "(5,)", "()".
  std::string ShapeString() const;
  std::string StridesString() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kUInt8;
  Device device_{};
  int ndim_ = 0;
  int64_t shape_[kMaxTensorDims] = {};
  int64_t strides_[kMaxTensorDims] = {};
  bool writable_ = false;
  bool defined_ = false;
};

}  // namespace kvcanary
