#include "ops/check.h"

#include "kvcanary/error.h"

namespace kvcanary::check {

void Present(const TensorView& t, std::string_view name) {
  if (!t.defined()) ThrowError("kv-canary: ", name, " is required, got None");
}

void Contiguous(const TensorView& t, std::string_view name) {
  if (!t.is_contiguous()) ThrowError("kv-canary: ", name, " must be contiguous");
}

void HasDType(const TensorView& t, DType dtype, std::string_view name) {
  if (t.dtype() != dtype) {
    ThrowError("kv-canary: ", name, " must have dtype ", DTypeName(dtype), ", got ",
               DTypeName(t.dtype()));
  }
}

void HasIndexDType(const TensorView& t, std::string_view name) {
  if (t.dtype() != DType::kInt32 && t.dtype() != DType::kInt64) {
    ThrowError("kv-canary: ", name, " must have dtype torch.int32 or torch.int64, got ",
               DTypeName(t.dtype()));
  }
}

void Is1D(const TensorView& t, std::string_view name) {
  if (t.ndim() != 1) ThrowError("kv-canary: ", name, " must be 1-D, got shape ", t.ShapeString());
}

void Is2D(const TensorView& t, std::string_view name) {
  if (t.ndim() != 2) ThrowError("kv-canary: ", name, " must be 2-D, got shape ", t.ShapeString());
}

void HasLength(const TensorView& t, int64_t expected, std::string_view name) {
  if (t.size(0) != expected) {
    ThrowError("kv-canary: ", name, " length must be ", expected, ", got ", t.size(0));
  }
}

void HasMinLength(const TensorView& t, int64_t minimum, std::string_view name) {
  if (t.size(0) < minimum) {
    ThrowError("kv-canary: ", name, " length must be >= ", minimum, ", got ", t.size(0));
  }
}

void HasColumns(const TensorView& t, int64_t columns, std::string_view name) {
  if (t.size(1) != columns) {
    ThrowError("kv-canary: ", name, " must have ", columns, " columns, got shape ",
               t.ShapeString());
  }
}

void Writable(const TensorView& t, std::string_view name) {
  if (!t.writable()) ThrowError("kv-canary: ", name, " must be writable");
}

void SameDevice(const TensorView& reference, std::string_view reference_name,
                std::initializer_list<Named> tensors) {
  for (const auto& [tensor, name] : tensors) {
    if (tensor->defined() && !(tensor->device() == reference.device())) {
      ThrowError("kv-canary: ", name, " must be on ", reference_name, "'s device ",
                 reference.device().ToString(), ", got ", tensor->device().ToString());
    }
  }
}

}  // namespace kvcanary::check
