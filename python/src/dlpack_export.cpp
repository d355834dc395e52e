#include "dlpack_export.h"

#include <vector>

#include "dlpack.h"
#include "kvcanary/error.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

struct DlpackBuffer {
  TensorView view;
  py::object owner;
};

// What one exported capsule owns: its shape and strides, and a reference to the owner.
struct ExportContext {
  py::object owner;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void DeleteExport(DLManagedTensor* managed) {
  auto* context = static_cast<ExportContext*>(managed->manager_ctx);
  if (!Py_IsInitialized()) return;  // at interpreter exit the owner is gone already: leak
  py::gil_scoped_acquire gil;       // consumers may release a tensor on any thread
  delete context;
}

// A capsule nobody consumed still owns its tensor.
void DestroyCapsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  managed->deleter(managed);
}

DLDevice DlDeviceOf(const Device& device) {
  if (device.type == DeviceType::kCUDA) return DLDevice{kDLCUDA, device.index};
  return DLDevice{kDLCPU, 0};
}

py::object Capsule(const DlpackBuffer& buffer) {
  const TensorView& view = buffer.view;
  auto* context = new ExportContext();
  context->owner = buffer.owner;
  for (int d = 0; d < view.ndim(); ++d) {
    context->shape.push_back(view.size(d));
    context->strides.push_back(view.stride(d));
  }
  DLTensor& tensor = context->managed.dl_tensor;
  tensor.data = view.data();
  tensor.device = DlDeviceOf(view.device());
  tensor.ndim = view.ndim();
  tensor.dtype = DLDataType{kDLUInt, 8, 1};
  tensor.shape = context->shape.data();
  tensor.strides = context->strides.data();
  tensor.byte_offset = 0;
  context->managed.manager_ctx = context;
  context->managed.deleter = &DeleteExport;
  PyObject* capsule = PyCapsule_New(&context->managed, "dltensor", &DestroyCapsule);
  if (capsule == nullptr) {
    delete context;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

void DlpackExport_Register(py::module_& module) {
  py::class_<DlpackBuffer>(module, "_DlpackBuffer",
                           "A runtime-owned buffer for torch.from_dlpack / numpy.from_dlpack.")
      .def("__dlpack__",
           [](const DlpackBuffer& buffer, const py::args&, const py::kwargs&) {
             return Capsule(buffer);  // the runtime's stream already ordered every write
           })
      .def("__dlpack_device__", [](const DlpackBuffer& buffer) {
        const DLDevice device = DlDeviceOf(buffer.view.device());
        return py::make_tuple(device.device_type, device.device_id);
      });
}

py::object ExportTensor(const TensorView& view, py::object owner) {
  if (view.dtype() != DType::kUInt8) {
    ThrowError("kv-canary: only uint8 buffers are exported, got ", DTypeName(view.dtype()));
  }
  return py::cast(DlpackBuffer{view, std::move(owner)});
}

}  // namespace kvcanary::python
