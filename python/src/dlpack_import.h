// DLPack import: any Python object with __dlpack__ (torch CPU/CUDA tensors, numpy arrays, cupy,
// jax) becomes a TensorView without a copy. Only the binding touches DLPack capsules.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string_view>
#include <vector>

#include "kvcanary/tensor.h"

namespace kvcanary::python {

// Owns the DLPack tensors imported for one call. Every view it returns points into memory the
// producer keeps alive until the scope is destroyed, so a scope lives exactly as long as the op
// call that reads its views.
//
// Thread safety: not thread-safe; create, use and destroy a scope with the GIL held (a producer's
// deleter may release Python objects). The op itself may run with the GIL released.
class ImportScope {
 public:
  ImportScope() = default;
  ImportScope(const ImportScope&) = delete;
  ImportScope& operator=(const ImportScope&) = delete;
  ~ImportScope();

  // None becomes an absent view (the C++ spelling of None). Anything else must implement
  // __dlpack__; a DLPack 1.0 export is asked for first (it carries the read-only flag), the
  // pre-1.0 one otherwise. Read-only and bool numpy arrays, which a pre-1.0 numpy refuses to
  // export, come through the buffer protocol (read-only kept); torch bool tensors as their bytes.
  // Throws kvcanary::Error (kType) naming `name` for an object neither can describe.
  TensorView Import(pybind11::handle object, std::string_view name);

 private:
  TensorView ImportRefused(pybind11::handle object, std::string_view name,
                           pybind11::error_already_set& refusal);
  TensorView ImportCapsule(pybind11::handle capsule, std::string_view name,
                           std::optional<DType> dtype_override);
  TensorView ImportBuffer(pybind11::handle object, std::string_view name);

  struct Owned {
    void* managed;  // DLManagedTensor*, DLManagedTensorVersioned* or Py_buffer*
    enum Kind { kLegacy, kVersioned, kBuffer } kind;  // so the right release runs
  };
  std::vector<Owned> owned_;
};

}  // namespace kvcanary::python
