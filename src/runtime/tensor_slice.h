// Row ranges of 1-D views: the runtime hands ops the live part of padded, fixed-address buffers.
#pragma once

#include <cstdint>

#include "kvcanary/error.h"
#include "kvcanary/tensor.h"

namespace kvcanary::runtime {

// view[begin:end] of a 1-D view (or of dimension 0 of a longer one, flattened to 1-D).
inline TensorView Slice1D(const TensorView& view, int64_t begin, int64_t end) {
  if (!view.defined() || view.ndim() < 1 || begin < 0 || end < begin || end > view.size(0)) {
    ThrowError("kv-canary: cannot take rows [", begin, ", ", end, ") of a tensor of shape ",
               view.defined() ? view.ShapeString() : std::string("None"));
  }
  char* base = static_cast<char*>(view.data()) + begin * view.stride(0) * ItemSize(view.dtype());
  return TensorView(base, view.dtype(), view.device(), {end - begin}, {view.stride(0)},
                    view.writable());
}

}  // namespace kvcanary::runtime
