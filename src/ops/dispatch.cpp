#include "ops/dispatch.h"

#include "kvcanary/error.h"

namespace kvcanary {

Backend SelectBackend(const TensorView& reference, std::string_view reference_name) {
  switch (reference.device().type) {
    case DeviceType::kCPU:
      return Backend::kCpu;
    case DeviceType::kCUDA:
#if defined(KVC_HAVE_CUDA)
      return Backend::kCuda;
#else
      break;  // built without the CUDA backend
#endif
    case DeviceType::kOther:
      break;
  }
  ThrowError("kv-canary: ", reference_name, " is on unsupported device ",
             reference.device().ToString());
}

void CheckCudaLaunch(int error_code, std::string_view op_name) {
  if (error_code == 0) return;
#if defined(KVC_HAVE_CUDA)
  ThrowError("kv-canary: ", op_name, ": CUDA error ", error_code, " (",
             cuda::ErrorString(error_code), ")");
#else
  ThrowError("kv-canary: ", op_name, ": CUDA error ", error_code);
#endif
}

}  // namespace kvcanary
