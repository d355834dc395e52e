// AdvanceVerifyPhase (a kvcanary addition): sampled verify's rotation. Its table, validation and
// dispatch.
#include "cpu/backend.h"
#include "kvcanary/checked.h"
#include "kvcanary/plan.h"
#include "ops/dispatch.h"
#include "ops/signature.h"

namespace kvcanary {

void AdvanceVerifyPhase(const AdvanceVerifyPhaseArgs& args, StreamHandle stream) {
  const sig::SpecList table = {
      sig::Out(args.verify_phase, "verify_phase", DType::kInt64, 1, sig::Exactly(1))};
  CheckInRange<int64_t>("verify_sample", args.verify_sample, 1, kMaxVerifySample);
  sig::CheckPresent(table);
  sig::CheckBounds(table);
  sig::CheckEach(table, sig::kWhole);
  sig::CheckPlacement(args.verify_phase, "verify_phase", table);
  const AdvancePhaseParams params{args.verify_phase.data_as<int64_t>(), args.verify_sample};
  RunOnBackend(
      args.verify_phase, "verify_phase", "advance_verify_phase", [&] { cpu::AdvancePhase(params); },
      [&](auto device) { return cuda::AdvancePhase(params, device, stream); });
}

}  // namespace kvcanary
