#include "runtime_callbacks.h"

#include "kvcanary/error.h"
#include "runtime_fields.h"
#include "scalars.h"

namespace py = pybind11;

namespace kvcanary::python {

void PendingError::Keep(py::error_already_set& error) {
  if (error_ == nullptr) error_ = std::make_unique<py::error_already_set>(error);
}

void PendingError::KeepError(const std::exception& error, bool type_error) {
  const py::object type = type_error
                              ? py::module_::import("kvcanary._kvcanary").attr("KvCanaryTypeError")
                              : py::reinterpret_borrow<py::object>(PyExc_ValueError);
  PyErr_SetString(type.ptr(), error.what());
  py::error_already_set raised;
  Keep(raised);
}

void PendingError::Clear() { error_.reset(); }

void PendingError::RaiseIfAny() {
  if (error_ == nullptr) return;
  std::unique_ptr<py::error_already_set> error = std::move(error_);
  error->restore();
  throw py::error_already_set();
}

// The Python objects are released with the GIL (the owner may be destroyed on any thread).
PyLogSink::~PyLogSink() {
  py::gil_scoped_acquire gil;
  callable_ = py::object();
}

void PyLogSink::Log(runtime::LogLevel level, const std::string& message) {
  py::gil_scoped_acquire gil;
  if (callable_.is_none()) return runtime::StderrLogSink().Log(level, message);
  try {
    callable_(runtime::LogLevelName(level), message);
  } catch (py::error_already_set& error) {
    pending_->Keep(error);
  }
}

PyRadixView::~PyRadixView() {
  py::gil_scoped_acquire gil;
  view_ = py::object();
}

template <typename Result, typename Convert, typename... Args>
Result PyRadixView::Call(const char* method, Result neutral, Convert convert, Args... args) const {
  py::gil_scoped_acquire gil;
  if (pending_->any()) return neutral;
  try {
    const py::object result = view_.attr(method)(args...);
    std::string name = std::string("radix view ") + method + "(";
    ((name += std::to_string(args) + ", "), ...);
    if (sizeof...(Args) > 0) name.resize(name.size() - 2);
    return convert(result, name + ")");
  } catch (py::error_already_set& error) {
    pending_->Keep(error);
  } catch (const Error& error) {
    pending_->KeepError(error, error.category() == Error::Category::kType);
  }
  return neutral;
}

PyRadixView::NodeId PyRadixView::Root() const {
  return Call("root", NodeId{0}, [](py::handle r, const std::string& n) { return Int64Arg(r, n); });
}

std::vector<PyRadixView::NodeId> PyRadixView::Children(NodeId node) const {
  return Call(
      "children", std::vector<NodeId>{},
      [](py::handle r, const std::string& n) { return Int64ListArg(r, n); }, node);
}

int64_t PyRadixView::KeyLength(NodeId node) const {
  return Call(
      "key_length", int64_t{0}, [](py::handle r, const std::string& n) { return Int64Arg(r, n); },
      node);
}

std::vector<int64_t> PyRadixView::DeviceSlots(NodeId node) const {
  return Call(
      "device_slots", std::vector<int64_t>{},
      [](py::handle r, const std::string& n) { return Int64ListArg(r, n); }, node);
}

// A failed lock query answers "locked", so the sweep skips the node rather than read it.
bool PyRadixView::IsLocked(NodeId node, bool swa_component) const {
  return Call(
      "is_locked", true, [](py::handle r, const std::string& n) { return BoolArg(r, n); }, node,
      swa_component);
}

bool PyRadixView::IsSwaResident(NodeId node) const {
  return Call(
      "is_swa_resident", false, [](py::handle r, const std::string& n) { return BoolArg(r, n); },
      node);
}

}  // namespace kvcanary::python
