// Write's argument boundary: the launch contexts, a write plan whose offsets and seeds are fuzzed
// values, the token tensors and the optional input-assert tensors.
#include "kvcanary/write.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t rows = kvc_fuzz::ConsumeSize(in, 6);
  const int64_t num_tokens = kvc_fuzz::ConsumeSize(in, 16);
  kvcanary::WriteArgs args;
  args.context = kvc_fuzz::ConsumeContext(arena, in);
  args.paired_context = kvc_fuzz::ConsumePairedContext(arena, in);
  args.plan = kvc_fuzz::ConsumeWritePlan(arena, rows);
  args.input_ids = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  args.positions = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  args.out_cache_loc = arena.Tensor(kvcanary::DType::kInt64, {num_tokens});
  args.enable_write_input_assert = in.ConsumeBool();
  args.expected_input_tokens = arena.Optional(kvcanary::DType::kInt64, {num_tokens});
  args.expected_input_positions = arena.Optional(kvcanary::DType::kInt64, {num_tokens});
  kvc_fuzz::CallOp(arena, [&] { kvcanary::Write(args); });
  return 0;
}
