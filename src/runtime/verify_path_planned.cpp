// SGLang's plan arrays: Plan stores every verify entry and Verify reads them back.
#include "runtime/verify_path.h"

namespace kvcanary::runtime {
namespace {

class PlannedVerifyPath final : public VerifyPath {
 public:
  VerifyPlanMemory AllocateForwardPlan(Device device, int64_t verify_capacity) const override {
    return AllocateVerifyPlan(device, verify_capacity);
  }
  int64_t ScratchesPerForward(int64_t) const override { return 1; }
  int64_t PlanCapacity(int64_t verify_capacity, int64_t) const override { return verify_capacity; }
  bool CanOverflow() const override { return true; }

  // Every forward holds a full plan per group; the sweep stages three int64 arrays per entry.
  int64_t WorkspaceBytes(const WorkspaceShape& shape, int64_t verify_capacity) const override {
    Capacities trial = shape.capacities;
    trial.verify_capacity = verify_capacity;
    return shape.forwards * ForwardWorkspaceBytes(trial, shape.num_groups) + 24 * verify_capacity;
  }
  int64_t BytesPerEntry(const WorkspaceShape& shape) const override {
    return shape.forwards * shape.num_groups * 32 + 24;
  }
  int64_t MaxVerifyCapacity(int64_t) const override { return INT64_MAX; }

  bool PlansInStage() const override { return false; }

  void RunStage(const StageCall& call, StreamHandle stream) const override {
    if (call.run_plan) Plan(call.plan, stream);
    VerifyArgs verify;
    verify.context = call.context;
    verify.plan = call.plan.verify_plan_out;
    verify.check_verify_expected_token = call.check_token;
    verify.paired_context = call.paired_context;
    kvcanary::Verify(verify, stream);
    Write(call.write, stream);
    if (call.advance_phase.has_value()) AdvanceVerifyPhase(*call.advance_phase, stream);
  }
};

}  // namespace

VerifyPlanMemory AllocateVerifyPlan(Device device, int64_t capacity) {
  VerifyPlanMemory plan{DeviceBuffer(device, VerifyPlanAllocationBytes(capacity)), {}};
  const DeviceBuffer& m = plan.memory;
  plan.view = VerifyPlanView{m.View(DType::kInt64, {capacity}, 0),
                             m.View(DType::kInt64, {capacity}, 8 * capacity),
                             m.View(DType::kInt64, {capacity}, 16 * capacity),
                             m.View(DType::kInt64, {capacity}, 24 * capacity),
                             m.View(DType::kInt32, {1}, 32 * capacity),
                             m.View(DType::kInt32, {1}, 32 * capacity + 4)};
  return plan;
}

std::unique_ptr<VerifyPath> MakePlannedVerifyPath() {
  return std::make_unique<PlannedVerifyPath>();
}

}  // namespace kvcanary::runtime
