#include "scalars.h"

#include <limits>

#include "kvcanary/error.h"

namespace py = pybind11;

namespace kvcanary::python {
namespace {

// numpy's integer scalars (numpy.int64, ...) are ints an engine passes on; its bool is not.
bool IsNumpyInteger(py::handle value) {
  const std::string_view type = Py_TYPE(value.ptr())->tp_name;
  return PyIndex_Check(value.ptr()) && type.substr(0, 6) == "numpy." &&
         type.find("bool") == std::string_view::npos;
}

// The exact int `value` holds, or a kType error when it is not an int.
py::int_ ExactInt(py::handle value, std::string_view name) {
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    return py::reinterpret_borrow<py::int_>(value);
  }
  if (IsNumpyInteger(value)) {
    return py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  }
  ThrowTypeError("kv-canary: ", name, " must be an int, got ", TypeName(value));
}

}  // namespace

std::string TypeName(py::handle value) {
  if (value.is_none()) return "None";
  return Py_TYPE(value.ptr())->tp_name;
}

int64_t Int64Arg(py::handle value, std::string_view name) {
  const py::int_ exact = ExactInt(value, name);
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(exact.ptr(), &overflow);
  if (overflow != 0) {
    ThrowError("kv-canary: ", name, " must fit in int64, got ",
               std::string(py::str(py::handle(exact))));
  }
  return result;
}

int32_t Int32Arg(py::handle value, std::string_view name) {
  const int64_t wide = Int64Arg(value, name);
  if (wide < std::numeric_limits<int32_t>::min() || wide > std::numeric_limits<int32_t>::max()) {
    ThrowError("kv-canary: ", name, " must fit in int32, got ", wide);
  }
  return static_cast<int32_t>(wide);
}

std::optional<int64_t> OptionalInt64Arg(py::handle value, std::string_view name) {
  if (value.is_none()) return std::nullopt;
  return Int64Arg(value, name);
}

uint64_t U64Arg(py::handle value, std::string_view name) {
  const py::int_ exact = ExactInt(value, name);
  int overflow = 0;
  const long long as_signed = PyLong_AsLongLongAndOverflow(exact.ptr(), &overflow);
  if (overflow == 0) return static_cast<uint64_t>(as_signed);
  if (overflow > 0) {
    const unsigned long long as_unsigned = PyLong_AsUnsignedLongLong(exact.ptr());
    if (!PyErr_Occurred()) return as_unsigned;
    PyErr_Clear();
  }
  ThrowError("kv-canary: ", name, " must be in [-2**63, 2**64), got ",
             std::string(py::str(py::handle(exact))));
}

bool BoolArg(py::handle value, std::string_view name) {
  if (!PyBool_Check(value.ptr())) {
    ThrowTypeError("kv-canary: ", name, " must be a bool, got ", TypeName(value));
  }
  return value.ptr() == Py_True;
}

std::string StrArg(py::handle value, std::string_view name) {
  if (!PyUnicode_Check(value.ptr())) {
    ThrowTypeError("kv-canary: ", name, " must be a str, got ", TypeName(value));
  }
  return value.cast<std::string>();
}

double NumberArg(py::handle value, std::string_view name) {
  if (PyFloat_Check(value.ptr())) return PyFloat_AsDouble(value.ptr());
  if ((PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) || IsNumpyInteger(value)) {
    const double result = PyFloat_AsDouble(value.ptr());
    if (result == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return result;
  }
  ThrowTypeError("kv-canary: ", name, " must be a number, got ", TypeName(value));
}

std::uintptr_t StreamArg(py::handle stream) {
  if (py::hasattr(stream, "cuda_stream")) return StreamArg(stream.attr("cuda_stream"));
  const int64_t handle = Int64Arg(stream, "stream");
  if (handle < 0) ThrowError("kv-canary: stream must be a non-negative handle, got ", handle);
  return static_cast<std::uintptr_t>(handle);
}

py::object AttrOf(py::handle owner, const char* attribute, std::string_view owner_name) {
  PyObject* result = PyObject_GetAttrString(owner.ptr(), attribute);
  if (result == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
    PyErr_Clear();
    ThrowTypeError("kv-canary: ", owner_name, " must have attribute ", attribute, ", got ",
                   TypeName(owner));
  }
  return py::reinterpret_steal<py::object>(result);
}

}  // namespace kvcanary::python
