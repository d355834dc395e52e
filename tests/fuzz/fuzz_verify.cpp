// Verify's argument boundary: the launch context (canary buffer, ring, counters, real-KV
// sources), an optional paired context, and a verify plan whose entries are fuzzed values.
#include "kvcanary/verify.h"
#include "tests/fuzz/fuzz_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  kvc_fuzz::Arena arena(in);
  kvcanary::VerifyArgs args;
  args.context = kvc_fuzz::ConsumeContext(arena, in);
  args.paired_context = kvc_fuzz::ConsumePairedContext(arena, in);
  args.plan = kvc_fuzz::ConsumeVerifyPlan(arena, kvc_fuzz::ConsumeSize(in, 24));
  args.check_verify_expected_token = in.ConsumeBool();
  kvc_fuzz::CallOp(arena, [&] { kvcanary::Verify(args); });
  return 0;
}
