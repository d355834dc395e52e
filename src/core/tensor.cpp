#include "kvcanary/tensor.h"

#include <cstdint>
#include <optional>
#include <sstream>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"

namespace kvcanary {

int64_t ItemSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kFloat8E4M3Fn:
    case DType::kFloat8E5M2:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 1;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "torch.bool";
    case DType::kUInt8: return "torch.uint8";
    case DType::kInt8: return "torch.int8";
    case DType::kInt16: return "torch.int16";
    case DType::kUInt16: return "torch.uint16";
    case DType::kInt32: return "torch.int32";
    case DType::kUInt32: return "torch.uint32";
    case DType::kInt64: return "torch.int64";
    case DType::kUInt64: return "torch.uint64";
    case DType::kFloat16: return "torch.float16";
    case DType::kBFloat16: return "torch.bfloat16";
    case DType::kFloat32: return "torch.float32";
    case DType::kFloat64: return "torch.float64";
    case DType::kFloat8E4M3Fn: return "torch.float8_e4m3fn";
    case DType::kFloat8E5M2: return "torch.float8_e5m2";
  }
  return "torch.unknown";
}

std::string Device::ToString() const {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda:" + std::to_string(index);
    case DeviceType::kOther: break;
  }
  return "dlpack_device_" + std::to_string(dlpack_code) + ":" + std::to_string(index);
}

TensorView::TensorView(void* data, DType dtype, Device device, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides, bool writable)
    : data_(data), dtype_(dtype), device_(device), writable_(writable), defined_(true) {
  if (shape.size() > static_cast<size_t>(kMaxTensorDims)) {
    ThrowError("kv-canary: tensors of at most ", kMaxTensorDims, " dimensions are supported, got ",
               shape.size());
  }
  if (!strides.empty() && strides.size() != shape.size()) {
    ThrowError("kv-canary: strides must have one entry per dimension, got ", strides.size(),
               " strides for ", shape.size(), " dimensions");
  }
  ndim_ = static_cast<int>(shape.size());
  int64_t dense_stride = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    shape_[d] = shape[d];
    // torch's dense strides treat a size-0 dimension as size 1.
    strides_[d] = strides.empty() ? dense_stride : strides[d];
    // Saturating: a shape too large for int64 gets strides the ops' bounds check then refuses.
    dense_stride = TryMul(dense_stride, shape[d] > 1 ? shape[d] : 1).value_or(INT64_MAX);
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim_; ++d) {
    // Saturating: INT64_MAX fails every size check that compares against it.
    const std::optional<int64_t> product = TryMul(n, shape_[d]);
    if (!product.has_value()) return INT64_MAX;
    n = *product;
  }
  return n;
}

bool TensorView::is_contiguous() const {
  if (numel() == 0) return true;
  // Saturating: past int64 no stride can be the dense one, so a later dimension of size != 1
  // makes the view non-contiguous (and every op refuses its span anyway).
  std::optional<int64_t> expected = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    if (shape_[d] != 1 && (!expected.has_value() || strides_[d] != *expected)) return false;
    if (expected.has_value()) expected = TryMul(*expected, shape_[d]);
  }
  return true;
}

namespace {
std::string TupleString(const int64_t* values, int n) {
  std::ostringstream out;
  out << "(";
  for (int i = 0; i < n; ++i) out << (i ? ", " : "") << values[i];
  out << (n == 1 ? ",)" : ")");
  return out.str();
}
}  // namespace

std::string TensorView::ShapeString() const { return TupleString(shape_, ndim_); }
std::string TensorView::StridesString() const { return TupleString(strides_, ndim_); }

}  // namespace kvcanary
