// An offsets-only plan and FusedVerify: each entry is derived in the kernel, so a forward's plan
// holds only its two counts and no step can overflow it. With stored entries
// (Config::verify_entries) the plan also holds entry arrays of the install's capacity:
// HEAD stores the step's entries there when they fit and both verifies read them, so a step
// derives its entries once; a step with more entries derives them in each verify, as without.
#include <algorithm>

#include "runtime/verify_path.h"

namespace kvcanary::runtime {
namespace {

// The sweep's chunk is kept at this many entries at most, so no per-step or sweep workspace
// grows with the pool (a longer row still fits: the floor is the table width).
constexpr int64_t kSweepChunkEntries = 65536;

class FusedVerifyPath final : public VerifyPath {
 public:
  explicit FusedVerifyPath(bool stores_entries) : stores_entries_(stores_entries) {}

  // The two counts in 8 bytes, and the entry arrays when the path stores entries.
  VerifyPlanMemory AllocateForwardPlan(Device device, int64_t verify_capacity) const override {
    if (stores_entries_) return AllocateVerifyPlan(device, verify_capacity);
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

  // The forwards' plans hold their counts (and their entry arrays when stored), one scratch per
  // group; the sweep has its own plan per group and stages three int64 arrays per entry.
  int64_t WorkspaceBytes(const WorkspaceShape& shape, int64_t verify_capacity) const override {
    Capacities trial = shape.capacities;
    trial.verify_capacity = verify_capacity;
    const int64_t groups = shape.num_groups;
    const int64_t plan_entries = groups * (VerifyPlanAllocationBytes(verify_capacity) - 8);
    const int64_t extra_scratches = (groups - 1) * 8 * (shape.capacities.write_req_capacity + 1);
    const int64_t per_forward = ForwardWorkspaceBytes(trial, shape.num_groups) + extra_scratches -
                                (stores_entries_ ? 0 : plan_entries);
    return shape.forwards * per_forward + plan_entries + 24 * verify_capacity;
  }
  int64_t BytesPerEntry(const WorkspaceShape& shape) const override {
    const int64_t stored = stores_entries_ ? shape.forwards * shape.num_groups * 32 : 0;
    return stored + shape.num_groups * 32 + 24;
  }
  // Stored entries are worth any capacity the budget allows; without them the capacity only
  // sizes the sweep's chunks.
  int64_t MaxVerifyCapacity(int64_t floor) const override {
    return stores_entries_ ? INT64_MAX : std::max(floor, kSweepChunkEntries);
  }

  bool PlansInStage() const override { return true; }

  void RunStage(const StageCall& call, StreamHandle stream) const override {
    PlanArgs plan = call.plan;
    std::optional<VerifyPlanView> stored;
    if (stores_entries_) {
      stored = plan.verify_plan_out;  // its entry arrays; FusedStage's plan is offsets-only
      plan.verify_plan_out.verify_slot_indices = TensorView();
      plan.verify_plan_out.verify_expected_tokens = TensorView();
      plan.verify_plan_out.verify_expected_positions = TensorView();
      plan.verify_plan_out.verify_prev_slot_indices = TensorView();
    }
    FusedVerifyArgs verify{.context = call.context,
                           .paired_context = call.paired_context,
                           .check_verify_expected_token = call.check_token,
                           .inputs = plan.inputs,
                           .verify_offsets_scratch = plan.verify_offsets_scratch,
                           .verify_num_valid = plan.verify_plan_out.verify_num_valid,
                           .verify_enable = plan.verify_plan_out.enable,
                           .verify_capacity = plan.verify_capacity,
                           .stored_entries = stored};
    FusedStage({.plan = call.run_plan ? std::optional<PlanArgs>(plan) : std::nullopt,
                .verify = verify,
                .write = call.write,
                .advance_phase = call.advance_phase},
               stream);
  }

 private:
  bool stores_entries_;
};

}  // namespace

std::unique_ptr<VerifyPath> MakeFusedVerifyPath(bool stores_entries) {
  return std::make_unique<FusedVerifyPath>(stores_entries);
}

}  // namespace kvcanary::runtime
