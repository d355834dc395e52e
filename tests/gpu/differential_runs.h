// The differential runs the CPU-vs-CUDA tests share: each op (or a forward's ops in order) on
// host tensors and on identical device tensors, every output compared after each.
#pragma once

#include <gtest/gtest.h>

#include "backend_pair.h"
#include "kvcanary/kvcanary.h"
#include "random_inputs.h"

namespace kvcanary::testing {

// Runs `op` on the CPU step, then on the CUDA step: the same call on both backends.
template <typename Op>
void OnBoth(const CpuStep& cpu, const CudaStep& cuda, Op op) {
  op(cpu);
  op(cuda);
}

// Compares the two backends' states after `what`. Rows are compared as a multiset, which needs
// all of them in the ring: false (and a failure) when the CPU run overflowed it.
inline bool SameStatesWithinTheRing(const CpuStep& cpu, const CudaStep& cuda, const char* what) {
  const int64_t rows = cpu.primary.state.write_index[0];
  EXPECT_LE(rows, kSweepRingCapacity)
      << "the case overflows the ring: rows can no longer be compared as a multiset";
  if (rows > kSweepRingCapacity) return false;
  ExpectSameStates(cpu, cuda, what);
  return true;
}

// Plan, verify, SWA translation of the write slots (with a LUT) and write, on both backends from
// the same inputs; every output is compared after each op.
inline void RunStep(const StepInputs& in, bool write = true) {
  CpuStep cpu(in);
  CudaStep cuda(in);
  OnBoth(cpu, cuda, [](const auto& step) { Plan(step.PlanArgsOf()); });
  ExpectSamePlan(cpu.plan, cuda.plan.ToHost(), "plan");

  OnBoth(cpu, cuda, [](const auto& step) { Verify(step.VerifyArgsOf()); });
  if (!SameStatesWithinTheRing(cpu, cuda, "verify")) return;
  ExpectSameTensor(in.primary.state.canary, cpu.primary.state.canary,
                   "verify wrote the canary buffer");
  if (!write) return;

  if (in.lut.has_value()) {
    OnBoth(cpu, cuda, [](const auto& step) { SwaTranslate(step.TranslateArgsOf()); });
    ExpectSameTensor(cpu.out_cache_loc, cuda.out_cache_loc.ToHost(), "swa_translate");
  }
  OnBoth(cpu, cuda, [](const auto& step) { Write(step.WriteArgsOf()); });
  SameStatesWithinTheRing(cpu, cuda, "write");
}

// The offsets-only plan and FusedVerify on both backends, from fresh copies of the inputs; with
// `stored`, the plan buffers' stale arrays as its stored entries (read when they are long enough:
// both backends must then check what they hold, not what they would derive).
inline void RunFusedVerify(const StepInputs& in, bool stored = false) {
  CpuStep cpu(in);
  CudaStep cuda(in);
  OnBoth(cpu, cuda, [&](const auto& step) { Plan(step.OffsetsOnlyPlanArgsOf(stored)); });
  ExpectSamePlan(cpu.plan, cuda.plan.ToHost(), "offsets-only plan");
  ExpectSameTensor(cpu.fused_scratch, cuda.fused_scratch.ToHost(), "offsets scratch");
  OnBoth(cpu, cuda, [&](const auto& step) { FusedVerify(step.FusedVerifyArgsOf(stored)); });
  SameStatesWithinTheRing(cpu, cuda, "fused verify");
}

// A forward's HEAD as one FusedStage (plan, fused verify, write) and its TAIL as another (fused
// verify, write), on both backends from the same inputs.
// With `stored`, HEAD stores its entries into the plan buffers' arrays when they fit and both
// verifies read them (compared with the plan after HEAD).
inline void RunFusedStages(const StepInputs& in, bool stored = false) {
  CpuStep cpu(in);
  CudaStep cuda(in);
  if (in.lut.has_value()) {
    OnBoth(cpu, cuda, [](const auto& step) { SwaTranslate(step.TranslateArgsOf()); });
  }
  OnBoth(cpu, cuda, [&](const auto& step) { FusedStage(step.FusedStageArgsOf(true, stored)); });
  ExpectSamePlan(cpu.plan, cuda.plan.ToHost(), "HEAD stage's plan");
  ExpectSameTensor(cpu.fused_scratch, cuda.fused_scratch.ToHost(), "offsets scratch");
  if (!SameStatesWithinTheRing(cpu, cuda, "HEAD stage")) return;
  OnBoth(cpu, cuda, [&](const auto& step) { FusedStage(step.FusedStageArgsOf(false, stored)); });
  SameStatesWithinTheRing(cpu, cuda, "TAIL stage");
  if (in.verify_phase.has_value()) {
    ExpectSameTensor(*cpu.verify_phase, cuda.verify_phase->ToHost(), "advanced phases");
  }
}

}  // namespace kvcanary::testing
