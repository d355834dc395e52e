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

  void RunStage(const PlanArgs& plan, bool run_plan, const LaunchContext& context,
                const std::optional<LaunchContext>& paired_context, bool check_token,
                const WriteArgs& write, StreamHandle stream) const override {
    if (run_plan) Plan(plan, stream);
    VerifyArgs verify;
    verify.context = context;
    verify.plan = plan.verify_plan_out;
    verify.check_verify_expected_token = check_token;
    verify.paired_context = paired_context;
    kvcanary::Verify(verify, stream);
    Write(write, stream);
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
