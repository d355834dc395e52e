// PlanOffsets' argument boundary: the batch inputs, the stage-1 outputs (a scratch of at least
// 4097 entries), the capacity and the raw ABI's LUT length.
#include "kvcanary/plan.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  kvcanary::PlanOffsetsArgs args;
  args.inputs = kvc_fuzz::ConsumePlanInputs(arena, in, bs);
  const int64_t scratch_length = in.ConsumeBool() ? 4096 : 4097 + kvc_fuzz::ConsumeSize(in, 1);
  args.out_verify_offsets_scratch = arena.Tensor(kvcanary::DType::kInt64, {scratch_length});
  args.out_write_offsets = arena.Tensor(kvcanary::DType::kInt64, {bs + 1});
  args.out_write_seed_slot_indices = arena.Tensor(kvcanary::DType::kInt64, {bs});
  args.out_verify_num_valid = arena.Tensor(kvcanary::DType::kInt32, {1});
  args.out_verify_enable = arena.Tensor(kvcanary::DType::kInt32, {1});
  args.out_write_num_valid_reqs = arena.Tensor(kvcanary::DType::kInt32, {1});
  args.verify_capacity = kvc_fuzz::ConsumeValue(in);
  if (in.ConsumeBool()) args.lut_len = kvc_fuzz::ConsumeValue(in);
  kvc_fuzz::CallOp(arena, [&] { kvcanary::PlanOffsets(args); });
  return 0;
}
