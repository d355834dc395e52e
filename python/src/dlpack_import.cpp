#include "dlpack_import.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "dlpack.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

[[noreturn]] void ThrowImportError(std::string_view name, const std::string& what) {
  throw py::type_error("kv-canary: " + std::string(name) + " " + what);
}

// Producers known to reject __dlpack__(max_version=...) (DLPack < 1.0: torch < 2.4, numpy < 2.1):
// remembered per type so each later import costs one call, not a failed call and a retry.
std::unordered_set<const PyTypeObject*>& LegacyProducers() {
  static auto* types = new std::unordered_set<const PyTypeObject*>();
  return *types;
}

py::object ExportCapsule(py::handle object) {
  const PyTypeObject* type = Py_TYPE(object.ptr());
  py::object dlpack = object.attr("__dlpack__");
  if (LegacyProducers().count(type) == 0) {
    try {
      return dlpack(py::arg("max_version") = py::make_tuple(1, 0));
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_TypeError)) throw;
      LegacyProducers().insert(type);
    }
  }
  return dlpack();
}

Device DeviceOf(const DLDevice& device) {
  switch (device.device_type) {
    case kDLCPU: return Device::CPU();
    case kDLCUDA: return Device::CUDA(device.device_id);
    default: return Device{DeviceType::kOther, device.device_id, device.device_type};
  }
}

bool DTypeOf(const DLDataType& t, DType* out) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case kDLInt:
      switch (t.bits) {
        case 8: *out = DType::kInt8; return true;
        case 16: *out = DType::kInt16; return true;
        case 32: *out = DType::kInt32; return true;
        case 64: *out = DType::kInt64; return true;
      }
      return false;
    case kDLUInt:
      switch (t.bits) {
        case 8: *out = DType::kUInt8; return true;
        case 16: *out = DType::kUInt16; return true;
        case 32: *out = DType::kUInt32; return true;
        case 64: *out = DType::kUInt64; return true;
      }
      return false;
    case kDLFloat:
      switch (t.bits) {
        case 16: *out = DType::kFloat16; return true;
        case 32: *out = DType::kFloat32; return true;
        case 64: *out = DType::kFloat64; return true;
      }
      return false;
    case kDLBfloat: *out = DType::kBFloat16; return t.bits == 16;
    case kDLBool: *out = DType::kBool; return t.bits == 8;
    case kDLFloat8_e4m3fn: *out = DType::kFloat8E4M3Fn; return t.bits == 8;
    case kDLFloat8_e5m2: *out = DType::kFloat8E5M2; return t.bits == 8;
  }
  return false;
}

TensorView ViewOf(const DLTensor& t, bool writable, std::string_view name) {
  DType dtype;
  if (!DTypeOf(t.dtype, &dtype)) {
    ThrowImportError(name, "has a DLPack dtype kvcanary does not know (code=" +
                             std::to_string(t.dtype.code) + ", bits=" +
                             std::to_string(t.dtype.bits) + ", lanes=" +
                             std::to_string(t.dtype.lanes) + ")");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides;
  if (t.strides != nullptr) {
    strides.assign(t.strides, t.strides + t.ndim);
    // The stride of a size-1 dimension addresses nothing, and producers differ in what they
    // export for it (torch exports 1, so a [1, 4] int32 tensor would report a 4-byte row
    // stride). Give it the value a dense tensor has, as torch's own .stride() reports.
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (shape[d] != 1) continue;
      strides[d] = d == t.ndim - 1 ? 1 : strides[d + 1] * std::max<int64_t>(shape[d + 1], 1);
    }
  }
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return TensorView(data, dtype, DeviceOf(t.device), shape, strides, writable);
}

}  // namespace

TensorView ImportScope::Import(py::handle object, std::string_view name) {
  if (object.is_none()) return TensorView();
  if (!py::hasattr(object, "__dlpack__")) {
    ThrowImportError(name, "must be a tensor that supports DLPack (__dlpack__), got " +
                               std::string(Py_TYPE(object.ptr())->tp_name));
  }
  py::object capsule = ExportCapsule(object);
  PyObject* raw = capsule.ptr();
  if (PyCapsule_IsValid(raw, "dltensor_versioned")) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(raw, "dltensor_versioned"));
    PyCapsule_SetName(raw, "used_dltensor_versioned");  // ownership moves to this scope
    owned_.push_back({managed, true});
    if (managed->version.major != 1) {
      ThrowImportError(name, "is a DLPack " + std::to_string(managed->version.major) +
                               ".x tensor; kvcanary reads DLPack 1.x");
    }
    return ViewOf(managed->dl_tensor, (managed->flags & kDLPackFlagReadOnly) == 0, name);
  }
  if (PyCapsule_IsValid(raw, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
    PyCapsule_SetName(raw, "used_dltensor");
    owned_.push_back({managed, false});
    return ViewOf(managed->dl_tensor, /*writable=*/true, name);
  }
  ThrowImportError(name, "returned no DLPack capsule from __dlpack__()");
}

ImportScope::~ImportScope() {
  for (const Owned& owned : owned_) {
    if (owned.versioned) {
      auto* managed = static_cast<DLManagedTensorVersioned*>(owned.managed);
      if (managed->deleter != nullptr) managed->deleter(managed);
    } else {
      auto* managed = static_cast<DLManagedTensor*>(owned.managed);
      if (managed->deleter != nullptr) managed->deleter(managed);
    }
  }
}

}  // namespace kvcanary::python
