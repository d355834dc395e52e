// SwaTranslate's argument boundary: slot indices (fuzzed values), the LUT, and an output that is
// its own buffer or, in place, the input.
#include "kvcanary/plan.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t n = kvc_fuzz::ConsumeSize(in, 16);
  kvcanary::SwaTranslateArgs args;
  args.slot_indices = arena.Tensor(kvcanary::DType::kInt64, {n});
  args.full_to_swa_index_mapping =
      arena.Tensor(kvcanary::DType::kInt64, {1 + kvc_fuzz::ConsumeSize(in, 15)});
  args.out_slot_indices =
      in.ConsumeBool() ? args.slot_indices : arena.Tensor(kvcanary::DType::kInt64, {n});
  kvc_fuzz::CallOp(arena, [&] { kvcanary::SwaTranslate(args); });
  return 0;
}
