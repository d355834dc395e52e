// FusedVerify's argument boundary: the launch contexts, the batch inputs, stage 1's outputs and
// the optional stored entries, all fuzzed (a count, scratch or entry that the plan would not
// write must still be memory-safe).
#include <limits>

#include "kvcanary/fused_verify.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  const int64_t bs = kvc_fuzz::ConsumeSize(in, 6);
  kvcanary::FusedVerifyArgs args;
  args.context = kvc_fuzz::ConsumeContext(arena, in);
  args.paired_context = kvc_fuzz::ConsumePairedContext(arena, in);
  args.check_verify_expected_token = in.ConsumeBool();
  args.inputs = kvc_fuzz::ConsumePlanInputs(arena, in, bs);
  args.verify_offsets_scratch =
      arena.Tensor(kvcanary::DType::kInt64, {bs + 1 + kvc_fuzz::ConsumeSize(in, 2)});
  args.verify_num_valid = arena.Tensor(kvcanary::DType::kInt32, {1});
  args.verify_enable = arena.Tensor(kvcanary::DType::kInt32, {1});
  // The capacity bounds the work and nothing else does (no entry array), so an accepted one stays
  // small; the others are ones the op must refuse.
  constexpr int64_t kRefused[] = {-1, int64_t{1} << 31, std::numeric_limits<int64_t>::max()};
  args.verify_capacity =
      in.ConsumeBool() ? kRefused[kvc_fuzz::ConsumeSize(in, 2)] : kvc_fuzz::ConsumeSize(in, 24);
  // Stored entries of any contents, read when the count fits them (their values are then the
  // entries: any slot must be memory-safe).
  if (in.ConsumeBool()) {
    args.stored_entries = kvc_fuzz::ConsumeVerifyPlan(arena, kvc_fuzz::ConsumeSize(in, 24));
  }
  kvc_fuzz::CallOp(arena, [&] { kvcanary::FusedVerify(args); });
  return 0;
}
