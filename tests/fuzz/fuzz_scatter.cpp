// Scatter's argument boundary: the flat token ids, the row offsets and pool rows (fuzzed values)
// and the token pool it writes.
#include "kvcanary/scatter.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  kvcanary::ScatterArgs args;
  args.flat_in = arena.Tensor(kvcanary::DType::kInt64, {kvc_fuzz::ConsumeSize(in, 24)});
  args.offsets = arena.Tensor(kvcanary::DType::kInt64, {bs + 1});
  args.req_pool_indices = arena.Tensor(kvcanary::DType::kInt64, {bs});
  args.pool_out = arena.Tensor(kvcanary::DType::kInt32,
                               {kvc_fuzz::ConsumeSize(in, 6), kvc_fuzz::ConsumeSize(in, 12)});
  kvc_fuzz::CallOp(arena, [&] { kvcanary::Scatter(args); });
  return 0;
}
