// The fused stage on the CPU: its parts one after the other, as the CUDA backend enqueues them.
#include "cpu/backend.h"

namespace kvcanary::cpu {

void RunStage(const StageParams& params) {
  if (params.has_plan) Plan(params.plan);
  if (params.has_store) PlanEntries(params.store);
  RunHalves(params.verify);
  RunHalves(params.write);
  if (params.has_advance) AdvancePhase(params.advance);
}

}  // namespace kvcanary::cpu
