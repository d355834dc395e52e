// The one place an op picks its backend: the device of the op's reference tensor. CPU tensors run
// the CPU backend; CUDA tensors the CUDA backend when the library was built with it; anything else
// is refused with G9 ("kv-canary: {name} is on unsupported device {device}").
#pragma once

#include <string_view>

#include "cuda/backend.h"  // CUDA-free declarations; defined only in a CUDA build
#include "kvcanary/tensor.h"

namespace kvcanary {

enum class Backend { kCpu, kCuda };

Backend SelectBackend(const TensorView& reference, std::string_view reference_name);

// Throws kvcanary::Error naming the op when a CUDA launch returned an error code (non-zero).
void CheckCudaLaunch(int error_code, std::string_view op_name);

// Runs `cpu()` or `cuda(device_index)` (which returns the launch's error code) on the backend of
// `reference`'s device. `cuda` is a generic lambda, so a build without the CUDA backend never
// instantiates its body and never links a cuda:: function.
template <typename Cpu, typename Cuda>
void RunOnBackend(const TensorView& reference, std::string_view reference_name,
                  [[maybe_unused]] std::string_view op_name, Cpu&& cpu,
                  [[maybe_unused]] Cuda&& cuda) {
  switch (SelectBackend(reference, reference_name)) {
    case Backend::kCpu:
      cpu();
      return;
    case Backend::kCuda:
#if defined(KVC_HAVE_CUDA)
      CheckCudaLaunch(cuda(reference.device().index), op_name);
#endif
      return;
  }
}

}  // namespace kvcanary
