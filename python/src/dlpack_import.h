// DLPack import: any Python object with __dlpack__ (torch CPU/CUDA tensors, numpy arrays, cupy,
// jax) becomes a TensorView without a copy. Only the binding touches DLPack capsules.
#pragma once

#include <pybind11/pybind11.h>

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
  // pre-1.0 one otherwise. Throws TypeError naming `name` for an object DLPack cannot describe.
  TensorView Import(pybind11::handle object, std::string_view name);

 private:
  struct Owned {
    void* managed;    // DLManagedTensor* or DLManagedTensorVersioned*
    bool versioned;   // which of the two, so the right deleter runs
  };
  std::vector<Owned> owned_;
};

}  // namespace kvcanary::python
