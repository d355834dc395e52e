// The fused stage on the CPU: its parts one after the other, as the CUDA backend enqueues them.
#include "cpu/backend.h"

namespace kvcanary::cpu {

void RunStage(const StageParams& params) {
  if (params.has_plan) Plan(params.plan);
  for (int h = 0; h < params.verify.num_halves; ++h) RunHalf(params.verify.half[h]);
  for (int h = 0; h < params.write.num_halves; ++h) RunHalf(params.write.half[h]);
  if (params.has_advance) AdvancePhase(params.advance);
}

}  // namespace kvcanary::cpu
