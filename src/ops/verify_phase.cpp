// AdvanceVerifyPhase (a kvcanary addition): sampled verify's rotation. Its table, validation and
// dispatch.
#include "cpu/backend.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
#include "ops/op_parts.h"
#include "ops/signature.h"

namespace kvcanary {

void ValidateAdvanceVerifyPhase(const AdvanceVerifyPhaseArgs& args) {
  const sig::SpecList table = {
      sig::Out(args.verify_phase, "verify_phase", DType::kInt64, 1, sig::AtLeast(1)),
      sig::Optional(sig::In(args.req_pool_indices, "req_pool_indices", DType::kInt64, 1))};
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  sig::CheckEach(table, sig::kWhole);
  sig::CheckPlacement(args.verify_phase, "verify_phase", table);
}

AdvancePhaseParams AdvancePhaseParamsOf(const AdvanceVerifyPhaseArgs& args) {
  const bool rows = args.req_pool_indices.defined();
  return AdvancePhaseParams{args.verify_phase.data_as<int64_t>(), args.verify_phase.size(0),
                            rows ? args.req_pool_indices.data_as<const int64_t>() : nullptr,
                            rows ? args.req_pool_indices.size(0) : 0};
}

void AdvanceVerifyPhase(const AdvanceVerifyPhaseArgs& args, StreamHandle stream) {
  ValidateAdvanceVerifyPhase(args);
  const AdvancePhaseParams params = AdvancePhaseParamsOf(args);
  RunOnBackend(
      args.verify_phase, "verify_phase", "advance_verify_phase", [&] { cpu::AdvancePhase(params); },
      [&](auto device) { return cuda::AdvancePhase(params, device, stream); });
}

}  // namespace kvcanary
