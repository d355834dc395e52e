// FusedStage on CUDA: its parts as launches in a row on one stream (the offsets plan, the stored
// entries, the paired fused verify, the paired write, the phase advance), so each part reads what
// the one before it left. One cooperative launch with grid barriers between the parts was built and
// measured (bench/RESULTS.md, run J): it saved 1.6 µs of a 28 µs decode-1 step and lost up to 17%
// on the large decode shapes, so the stage stays in separate kernels.
#include "cuda/backend.h"

namespace kvcanary::cuda {

int RunStage(const StageParams& params, int device, StreamHandle stream) {
  int error = params.has_plan ? Plan(params.plan, device, stream) : 0;
  if (error == 0 && params.has_store) error = PlanEntries(params.store, device, stream);
  if (error == 0) error = LaunchHalves(params.verify, device, stream);
  if (error == 0) error = LaunchHalves(params.write, device, stream);
  if (error == 0 && params.has_advance) error = AdvancePhase(params.advance, device, stream);
  return error;
}

}  // namespace kvcanary::cuda
