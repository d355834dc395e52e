// The runtime's callbacks into Python: a LogSink over a callable(level, message) and a RadixView
// over an object with the view's six methods. Each takes the GIL, and never lets a Python
// exception (or a value of the wrong type) unwind through the runtime: the first one is kept in
// a PendingError, raised when the runtime call returns, and the callback answers a neutral value.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/runtime/log.h"
#include "kvcanary/runtime/radix_view.h"

namespace kvcanary::python {

// The first Python exception raised by a callback during one runtime call.
class PendingError {
 public:
  // REQUIRES: the GIL, with the exception raised (a pybind11::error_already_set just caught, or
  // PyErr_Occurred()). Keeps the first, drops later ones.
  void Keep(pybind11::error_already_set& error);
  // kvcanary::Error -> the exception Python code sees for it, kept like Keep.
  void KeepError(const std::exception& error, bool type_error);
  void Clear();
  bool any() const { return error_ != nullptr; }
  // Raises the kept exception, if any, and forgets it (GIL held).
  void RaiseIfAny();

 private:
  std::unique_ptr<pybind11::error_already_set> error_;
};

class PyLogSink : public runtime::LogSink {
 public:
  PyLogSink(pybind11::object callable, std::shared_ptr<PendingError> pending)
      : callable_(std::move(callable)), pending_(std::move(pending)) {}
  ~PyLogSink() override;
  void Log(runtime::LogLevel level, const std::string& message) override;
  // The garbage collector's view of the callable (CanaryManager's tp_traverse / tp_clear);
  // once released, lines go to stderr.
  const pybind11::object& callable() const { return callable_; }
  void Release() { callable_ = pybind11::none(); }

 private:
  pybind11::object callable_;
  std::shared_ptr<PendingError> pending_;
};

// The six methods a Python radix view must have, in RadixView's order.
inline constexpr const char* kRadixViewMethods[] = {"root",         "children",  "key_length",
                                                    "device_slots", "is_locked", "is_swa_resident"};

class PyRadixView : public runtime::RadixView {
 public:
  PyRadixView(pybind11::object view, std::shared_ptr<PendingError> pending)
      : view_(std::move(view)), pending_(std::move(pending)) {}
  ~PyRadixView() override;
  const pybind11::object& view() const { return view_; }  // for tp_traverse

  NodeId Root() const override;
  std::vector<NodeId> Children(NodeId node) const override;
  int64_t KeyLength(NodeId node) const override;
  std::vector<int64_t> DeviceSlots(NodeId node) const override;
  bool IsLocked(NodeId node, bool swa_component) const override;
  bool IsSwaResident(NodeId node) const override;

 private:
  // Calls view.<method>(args...) and converts the result; after a failure (kept in pending_),
  // answers `neutral` without calling Python again.
  template <typename Result, typename Convert, typename... Args>
  Result Call(const char* method, Result neutral, Convert convert, Args... args) const;

  pybind11::object view_;
  std::shared_ptr<PendingError> pending_;
};

}  // namespace kvcanary::python
