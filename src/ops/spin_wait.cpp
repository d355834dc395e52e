// launch_spin_wait_kernel: validation (rows J1-J4 of docs/validation.md) and dispatch.
#include "kvcanary/spin_wait.h"

#include "kvcanary/error.h"
#include "ops/dispatch.h"
#include "ops/signature.h"

namespace kvcanary {
namespace {

constexpr const char* kPrefix = "kv-canary: jitter: cycles ";

// The op's own messages (SGLang's "kv-canary jitter:" texts in the project's prefix). Contiguity
// comes before the shape: torch calls every [1] tensor contiguous, so after the shape check the
// contiguity message could never be raised.
void Validate(const SpinWaitArgs& a) {
  const sig::SpecList table = {sig::In(a.cycles, "cycles", DType::kInt64, 1)};
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  const TensorView& cycles = a.cycles;
  if (cycles.dtype() != DType::kInt64) {
    ThrowError(kPrefix, "must be int64, got ", DTypeName(cycles.dtype()));
  }
  // J2: a CPU tensor is accepted (its backend is the no-op), any other device is not.
  if (cycles.device().type == DeviceType::kOther) {
    ThrowError(kPrefix, "must live on CUDA, got ", cycles.device().ToString());
  }
  if (!cycles.is_contiguous()) ThrowError(kPrefix, "must be contiguous");
  if (cycles.ndim() != 1 || cycles.size(0) != 1) {
    ThrowError(kPrefix, "must have shape [1], got ", cycles.ShapeString());
  }
}

}  // namespace

void SpinWait(const SpinWaitArgs& args, StreamHandle stream) {
  Validate(args);
  SpinWaitParams params;
  params.cycles = args.cycles.data_as<const int64_t>();
  params.max_cycles = kMaxSpinWaitCycles;
  params.max_nanoseconds = kMaxSpinWaitNanoseconds;
  // The CPU backend has nothing to wait for: the host already runs every op in order.
  RunOnBackend(
      args.cycles, "cycles", "spin_wait", [] {},
      [&](auto device) { return cuda::SpinWait(params, device, stream); });
}

}  // namespace kvcanary
