// The fused stage on the CPU: its three parts one after the other, which is the result the CUDA
// backend's one launch must equal.
#include "cpu/backend.h"

namespace kvcanary::cpu {

void RunStage(const StageParams& params) {
  if (params.has_plan) Plan(params.plan);
  for (int h = 0; h < params.verify.num_halves; ++h) RunHalf(params.verify.half[h]);
  for (int h = 0; h < params.write.num_halves; ++h) RunHalf(params.write.half[h]);
  if (params.has_advance) AdvancePhase(params.advance);
}

}  // namespace kvcanary::cpu
