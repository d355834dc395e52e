// An offsets-only plan and FusedVerify: each entry is derived in the kernel, so a forward's plan
// holds only its two counts and no step can overflow it.
#include <algorithm>

#include "runtime/verify_path.h"

namespace kvcanary::runtime {
namespace {

// The sweep's chunk is kept at this many entries at most, so no per-step or sweep workspace
// grows with the pool (a longer row still fits: the floor is the table width).
constexpr int64_t kSweepChunkEntries = 65536;

class FusedVerifyPath final : public VerifyPath {
 public:
  // The two counts in 8 bytes, no entry arrays.
  VerifyPlanMemory AllocateForwardPlan(Device device, int64_t) const override {
    VerifyPlanMemory plan{DeviceBuffer(device, 8), {}};
    plan.view = VerifyPlanView{TensorView(),
                               TensorView(),
                               TensorView(),
                               TensorView(),
                               plan.memory.View(DType::kInt32, {1}, 0),
                               plan.memory.View(DType::kInt32, {1}, 4)};
    return plan;
  }
  // FusedVerify reads a group's offsets after every group's plan ran.
  int64_t ScratchesPerForward(int64_t num_groups) const override { return num_groups; }
  int64_t PlanCapacity(int64_t, int64_t entries_bound) const override { return entries_bound; }
  bool CanOverflow() const override { return false; }

  // The forwards' plans hold only their counts, one scratch per group; the sweep has its own
  // plan per group and stages three int64 arrays per entry.
  int64_t WorkspaceBytes(const WorkspaceShape& shape, int64_t verify_capacity) const override {
    Capacities trial = shape.capacities;
    trial.verify_capacity = verify_capacity;
    const int64_t groups = shape.num_groups;
    const int64_t plan_entries = groups * (VerifyPlanAllocationBytes(verify_capacity) - 8);
    const int64_t extra_scratches = (groups - 1) * 8 * (shape.capacities.write_req_capacity + 1);
    const int64_t per_forward =
        ForwardWorkspaceBytes(trial, shape.num_groups) + extra_scratches - plan_entries;
    return shape.forwards * per_forward + plan_entries + 24 * verify_capacity;
  }
  int64_t BytesPerEntry(const WorkspaceShape& shape) const override {
    return shape.num_groups * 32 + 24;
  }
  int64_t MaxVerifyCapacity(int64_t floor) const override {
    return std::max(floor, kSweepChunkEntries);
  }

  bool PlansInStage() const override { return true; }

  void RunStage(const StageCall& call, StreamHandle stream) const override {
    const PlanArgs& plan = call.plan;
    FusedVerifyArgs verify{.context = call.context,
                           .paired_context = call.paired_context,
                           .check_verify_expected_token = call.check_token,
                           .inputs = plan.inputs,
                           .verify_offsets_scratch = plan.verify_offsets_scratch,
                           .verify_num_valid = plan.verify_plan_out.verify_num_valid,
                           .verify_enable = plan.verify_plan_out.enable,
                           .verify_capacity = plan.verify_capacity};
    FusedStage({.plan = call.run_plan ? std::optional<PlanArgs>(plan) : std::nullopt,
                .verify = verify,
                .write = call.write,
                .advance_phase = call.advance_phase},
               stream);
  }
};

}  // namespace

std::unique_ptr<VerifyPath> MakeFusedVerifyPath() { return std::make_unique<FusedVerifyPath>(); }

}  // namespace kvcanary::runtime
