// SpinWait's argument boundary: the one tick-count tensor (fuzzed dtype, device, shape, strides,
// value). On the CPU an accepted call is the no-op, so it too must leave every byte as it was.
#include <cstdio>
#include <cstdlib>

#include "kvcanary/spin_wait.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const kvcanary::SpinWaitArgs args{arena.Tensor(kvcanary::DType::kInt64, {1})};
  kvc_fuzz::CallOp(arena, [&] { kvcanary::SpinWait(args); });
  if (!arena.Unchanged()) {  // CallOp took the snapshot; it checks only refused calls
    std::fprintf(stderr, "fuzz: the CPU spin-wait changed a buffer\n");
    std::abort();
  }
  return 0;
}
