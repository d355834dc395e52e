// DLPack export: a buffer the runtime owns (a canary record buffer) handed to Python without a
// copy, as an object with __dlpack__ and __dlpack_device__ that torch.from_dlpack and
// numpy.from_dlpack read. The exported tensor keeps its owner (the Python CanaryManager) alive
// until the consumer releases it.
#pragma once

#include <pybind11/pybind11.h>

#include "kvcanary/tensor.h"

namespace kvcanary::python {

// Adds the producer class (_DlpackBuffer) to `module`; call once before ExportTensor.
void DlpackExport_Register(pybind11::module_& module);

// A DLPack producer for `view` (uint8 only: records are bytes) that keeps `owner` alive.
pybind11::object ExportTensor(const TensorView& view, pybind11::object owner);

}  // namespace kvcanary::python
