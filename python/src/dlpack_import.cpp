#include "dlpack_import.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>

#include "dlpack.h"
#include "kvcanary/error.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

// A DLPack import problem is a type problem: KvCanaryTypeError (a ValueError and a TypeError).
[[noreturn]] void ThrowImportError(std::string_view name, const std::string& what) {
  ThrowTypeError("kv-canary: ", name, " ", what);
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
    case kDLCPU:
      return Device::CPU();
    case kDLCUDA:
      return Device::CUDA(device.device_id);
    default:
      return Device{DeviceType::kOther, device.device_id, device.device_type};
  }
}

// The DLPack (code, bits) pairs kvcanary knows, one lane each.
struct KnownDType {
  uint8_t code;
  uint8_t bits;
  DType dtype;
};
constexpr KnownDType kKnownDTypes[] = {{kDLInt, 8, DType::kInt8},
                                       {kDLInt, 16, DType::kInt16},
                                       {kDLInt, 32, DType::kInt32},
                                       {kDLInt, 64, DType::kInt64},
                                       {kDLUInt, 8, DType::kUInt8},
                                       {kDLUInt, 16, DType::kUInt16},
                                       {kDLUInt, 32, DType::kUInt32},
                                       {kDLUInt, 64, DType::kUInt64},
                                       {kDLFloat, 16, DType::kFloat16},
                                       {kDLFloat, 32, DType::kFloat32},
                                       {kDLFloat, 64, DType::kFloat64},
                                       {kDLBfloat, 16, DType::kBFloat16},
                                       {kDLBool, 8, DType::kBool},
                                       {kDLFloat8_e4m3fn, 8, DType::kFloat8E4M3Fn},
                                       {kDLFloat8_e5m2, 8, DType::kFloat8E5M2}};

bool DTypeOf(const DLDataType& t, DType* out) {
  if (t.lanes != 1) return false;
  for (const KnownDType& known : kKnownDTypes) {
    if (known.code == t.code && known.bits == t.bits) {
      *out = known.dtype;
      return true;
    }
  }
  return false;
}

// The strides kvcanary sees. The stride of a size-1 dimension addresses nothing, and producers
// differ in what they export for it (torch exports 1, so a [1, 4] int32 tensor would report a
// 4-byte row stride; a single-row slice keeps its parent's pitch); a tensor with no elements
// addresses nothing at all (torch exports (1, 1) for an empty [0, 32] tensor). Those get the
// values a dense tensor has, as torch's own .stride() reports; every other stride is kept.
void NormalizeStrides(const std::vector<int64_t>& shape, std::vector<int64_t>& strides) {
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t dense = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (empty || shape[d] == 1) strides[d] = dense;
    dense *= std::max<int64_t>(shape[d], 1);
  }
}

TensorView ViewOf(const DLTensor& t, bool writable, std::string_view name,
                  std::optional<DType> dtype_override) {
  DType dtype;
  if (!DTypeOf(t.dtype, &dtype)) {
    ThrowImportError(
        name, "has a DLPack dtype kvcanary does not know (code=" + std::to_string(t.dtype.code) +
                  ", bits=" + std::to_string(t.dtype.bits) +
                  ", lanes=" + std::to_string(t.dtype.lanes) + ")");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides;
  if (t.strides != nullptr) {
    strides.assign(t.strides, t.strides + t.ndim);
    NormalizeStrides(shape, strides);
  }
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return TensorView(data, dtype_override.value_or(dtype), DeviceOf(t.device), shape, strides,
                    writable);
}

// The dtype of a buffer-protocol format ("q", "<i", "?", ...) of `itemsize` bytes.
bool BufferDTypeOf(std::string_view format, Py_ssize_t itemsize, DType* out) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) {
    format.remove_prefix(1);
  }
  if (format.size() != 1) return false;
  const std::string_view kSigned = "bhilq", kUnsigned = "BHILQ", kFloat = "efd";
  uint8_t code;
  if (format[0] == '?') {
    code = kDLBool;
  } else if (kSigned.find(format[0]) != std::string_view::npos) {
    code = kDLInt;
  } else if (kUnsigned.find(format[0]) != std::string_view::npos) {
    code = kDLUInt;
  } else if (kFloat.find(format[0]) != std::string_view::npos) {
    code = kDLFloat;
  } else {
    return false;
  }
  return DTypeOf(DLDataType{code, static_cast<uint8_t>(itemsize * 8), 1}, out);
}

// torch cannot export bool tensors through DLPack before 2.x; their bytes are uint8 0/1.
bool IsTorchBool(py::handle object) {
  if (!py::hasattr(object, "dtype") || !py::hasattr(object, "view")) return false;
  return std::string(py::str(object.attr("dtype"))) == "torch.bool";
}

}  // namespace

TensorView ImportScope::Import(py::handle object, std::string_view name) {
  if (object.is_none()) return TensorView();
  if (!py::hasattr(object, "__dlpack__")) {
    ThrowImportError(name, "must be a tensor that supports DLPack (__dlpack__), got " +
                               std::string(Py_TYPE(object.ptr())->tp_name));
  }
  py::object capsule;
  try {
    capsule = ExportCapsule(object);
  } catch (py::error_already_set& refusal) {
    return ImportRefused(object, name, refusal);
  }
  return ImportCapsule(capsule, name, std::nullopt);
}

// What a producer's __dlpack__ refused: a read-only or bool numpy array (DLPack < 1.0 has no
// read-only flag nor bool) comes through the buffer protocol, a torch bool tensor as its uint8
// bytes; anything else is a type error naming the producer's reason.
TensorView ImportScope::ImportRefused(py::handle object, std::string_view name,
                                      py::error_already_set& refusal) {
  const std::string reason = refusal.what();
  if (PyObject_CheckBuffer(object.ptr())) return ImportBuffer(object, name);
  if (IsTorchBool(object)) {
    py::object uint8 = py::module_::import("torch").attr("uint8");
    return ImportCapsule(ExportCapsule(object.attr("view")(uint8)), name, DType::kBool);
  }
  ThrowImportError(name, "must be a tensor DLPack can export, got " +
                             std::string(Py_TYPE(object.ptr())->tp_name) + " (" + reason + ")");
}

TensorView ImportScope::ImportCapsule(py::handle capsule, std::string_view name,
                                      std::optional<DType> dtype_override) {
  PyObject* raw = capsule.ptr();
  if (PyCapsule_IsValid(raw, "dltensor_versioned")) {
    auto* managed =
        static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(raw, "dltensor_versioned"));
    PyCapsule_SetName(raw, "used_dltensor_versioned");  // ownership moves to this scope
    owned_.push_back({managed, Owned::kVersioned});
    if (managed->version.major != 1) {
      ThrowImportError(name, "is a DLPack " + std::to_string(managed->version.major) +
                                 ".x tensor; kvcanary reads DLPack 1.x");
    }
    return ViewOf(managed->dl_tensor, (managed->flags & kDLPackFlagReadOnly) == 0, name,
                  dtype_override);
  }
  if (PyCapsule_IsValid(raw, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
    PyCapsule_SetName(raw, "used_dltensor");
    owned_.push_back({managed, Owned::kLegacy});
    return ViewOf(managed->dl_tensor, /*writable=*/true, name, dtype_override);
  }
  ThrowImportError(name, "returned no DLPack capsule from __dlpack__()");
}

TensorView ImportScope::ImportBuffer(py::handle object, std::string_view name) {
  auto* buffer = new Py_buffer();
  if (PyObject_GetBuffer(object.ptr(), buffer, PyBUF_RECORDS_RO) != 0) {
    delete buffer;
    PyErr_Clear();
    ThrowImportError(name, "must be a tensor DLPack or the buffer protocol can describe, got " +
                               std::string(Py_TYPE(object.ptr())->tp_name));
  }
  owned_.push_back({buffer, Owned::kBuffer});
  DType dtype;
  if (!BufferDTypeOf(buffer->format != nullptr ? buffer->format : "B", buffer->itemsize, &dtype)) {
    ThrowImportError(
        name, "has a buffer format kvcanary does not know (" + std::string(buffer->format) + ")");
  }
  std::vector<int64_t> shape(buffer->shape, buffer->shape + buffer->ndim);
  std::vector<int64_t> strides(buffer->ndim);
  for (int d = 0; d < buffer->ndim; ++d) {
    if (buffer->strides[d] % buffer->itemsize != 0) {
      ThrowImportError(name, "has a stride that is not a whole number of elements");
    }
    strides[d] = buffer->strides[d] / buffer->itemsize;
  }
  NormalizeStrides(shape, strides);
  return TensorView(buffer->buf, dtype, Device::CPU(), shape, strides, buffer->readonly == 0);
}

ImportScope::~ImportScope() {
  for (const Owned& owned : owned_) {
    switch (owned.kind) {
      case Owned::kVersioned: {
        auto* managed = static_cast<DLManagedTensorVersioned*>(owned.managed);
        if (managed->deleter != nullptr) managed->deleter(managed);
        break;
      }
      case Owned::kLegacy: {
        auto* managed = static_cast<DLManagedTensor*>(owned.managed);
        if (managed->deleter != nullptr) managed->deleter(managed);
        break;
      }
      case Owned::kBuffer: {
        auto* buffer = static_cast<Py_buffer*>(owned.managed);
        PyBuffer_Release(buffer);
        delete buffer;
        break;
      }
    }
  }
}

}  // namespace kvcanary::python
