// The one place an op picks its backend: the device of the op's reference tensor. CPU tensors run
// the CPU backend; CUDA tensors the CUDA backend when the library was built with it; anything else
// is refused with G9 ("kv-canary: {name} is on unsupported device {device}").
#pragma once

#include <string_view>

#include "kvcanary/tensor.h"

namespace kvcanary {

enum class Backend { kCpu, kCuda };

Backend SelectBackend(const TensorView& reference, std::string_view reference_name);

// Throws kvcanary::Error naming the op when a CUDA launch returned an error code (non-zero).
void CheckCudaLaunch(int error_code, std::string_view op_name);

}  // namespace kvcanary
