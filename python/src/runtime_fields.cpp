#include "runtime_fields.h"

namespace py = pybind11;

namespace kvcanary::python {

std::string ItemName(std::string_view name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

void CheckTensorArg(py::handle value, std::string_view name) {
  if (value.is_none() || py::hasattr(value, "__dlpack__") || PyObject_CheckBuffer(value.ptr())) {
    return;
  }
  ThrowTypeError("kv-canary: ", name,
                 " must be a tensor that supports DLPack (__dlpack__) or None, got ",
                 TypeName(value));
}

std::vector<py::object> TensorListArg(py::handle value, std::string_view name, size_t max_items) {
  if (value.is_none()) return {};
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    ThrowTypeError("kv-canary: ", name, " must be a list of tensors, got ", TypeName(value));
  }
  const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  if (items.size() > max_items) {
    ThrowError("kv-canary: ", name, " must hold at most ", max_items, " tensors, got ",
               items.size());
  }
  std::vector<py::object> out;
  for (size_t i = 0; i < items.size(); ++i) {
    const py::object item = items[i];
    const std::string item_name = ItemName(name, i);
    if (item.is_none()) ThrowTypeError("kv-canary: ", item_name, " must be a tensor, got None");
    CheckTensorArg(item, item_name);
    out.push_back(item);
  }
  return out;
}

std::vector<int64_t> Int64ListArg(py::handle value, std::string_view name) {
  py::object items = py::reinterpret_borrow<py::object>(value);
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    if (!py::hasattr(value, "tolist")) {
      ThrowTypeError("kv-canary: ", name, " must be a list of ints, got ", TypeName(value));
    }
    items = value.attr("tolist")();  // numpy arrays and CPU tensors: Python ints, or floats
    if (!PyList_Check(items.ptr())) {
      ThrowTypeError("kv-canary: ", name, " must be a 1-D sequence of ints, got ", TypeName(value));
    }
  }
  const py::sequence sequence = py::reinterpret_borrow<py::sequence>(items);
  std::vector<int64_t> out;
  out.reserve(sequence.size());
  for (size_t i = 0; i < sequence.size(); ++i) {
    out.push_back(Int64Arg(sequence[i], ItemName(name, i)));
  }
  return out;
}

}  // namespace kvcanary::python
