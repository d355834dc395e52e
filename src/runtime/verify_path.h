// How a forward's HEAD and TAIL verification runs: a seam with one implementation per way of
// checking the prefix records a forward reads. The runtime holds one VerifyPath, chosen at
// install, and asks it what a forward's plan holds, how much workspace that costs, whether a
// step can overflow it, and which op to launch. A new way to verify (sampled, paged) is a new
// implementation of this interface, not a branch in the runtime.
//
//   PlannedVerifyPath  SGLang's plan arrays: Plan writes every entry, Verify reads them; a step
//                      with more entries than the capacity is verified in row ranges.
//   FusedVerifyPath    an offsets-only plan and FusedVerify: no overflow (the default,
//                      Config::fused_verify); each stage is one FusedStage, the plan inside
//                      HEAD's. No per-entry array, unless the install stores its entries
//                      (Config::verify_entries): then HEAD also stores them, when they fit the
//                      install's capacity, for both stages' verifies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kvcanary/ops.h"
#include "kvcanary/runtime/capacities.h"
#include "kvcanary/runtime/device_memory.h"

namespace kvcanary::runtime {

// The verify half of one forward's plan for one group, allocated at install.
struct VerifyPlanMemory {
  DeviceBuffer memory;
  VerifyPlanView view;
};

// What the workspace of one install is made of, for the budget that sizes the verify capacity.
struct WorkspaceShape {
  Capacities capacities;  // verify_capacity is the one being sized
  int num_groups = 1;
  int64_t forwards = 1;
};

// One HEAD or TAIL stage of one group, as the runtime hands it to the path.
struct StageCall {
  PlanArgs plan;          // the forward's plan for the group, as PlanArgsOf built it
  bool run_plan = false;  // HEAD when the path PlansInStage: run the plan first (else it ran)
  LaunchContext context;  // the K half; the V half, when active, is paired_context
  std::optional<LaunchContext> paired_context;
  bool check_token = false;
  WriteArgs write;
  // The TAIL of a sampled forward's last group: the phases its rows' verifies read, advanced last.
  std::optional<AdvanceVerifyPhaseArgs> advance_phase;
};

class VerifyPath {
 public:
  virtual ~VerifyPath() = default;

  // The plan memory of one (forward, group).
  virtual VerifyPlanMemory AllocateForwardPlan(Device device, int64_t verify_capacity) const = 0;
  // Offsets scratches per forward: one shared by the groups, or one each when the verify reads
  // a group's offsets after every group's plan ran.
  virtual int64_t ScratchesPerForward(int64_t num_groups) const = 0;
  // The verify_capacity a forward's plan is given: the install's capacity, or the bound of a
  // path that holds no entries (`entries_bound`: every prefix position of a full batch).
  virtual int64_t PlanCapacity(int64_t verify_capacity, int64_t entries_bound) const = 0;
  // Whether a step can hold more entries than the plan: the runtime then verifies it in row
  // ranges outside the graph (and the sweep borrows inner forward 0's plan, free by then).
  virtual bool CanOverflow() const = 0;

  // Device bytes of the per-forward workspace and the sweep's plans at `verify_capacity`, and
  // what one more entry of capacity costs; the largest capacity worth having at all.
  virtual int64_t WorkspaceBytes(const WorkspaceShape& shape, int64_t verify_capacity) const = 0;
  virtual int64_t BytesPerEntry(const WorkspaceShape& shape) const = 0;
  virtual int64_t MaxVerifyCapacity(int64_t floor) const = 0;

  // Whether a forward's plan runs inside its HEAD stage (StageCall::run_plan) instead of as a
  // launch of its own before it.
  virtual bool PlansInStage() const = 0;
  // One stage: the plan when run_plan, the verify of the plan's entries, the write, the phase
  // advance when given, in that order.
  virtual void RunStage(const StageCall& call, StreamHandle stream) const = 0;
};

std::unique_ptr<VerifyPath> MakePlannedVerifyPath();
// stores_entries: Config::verify_entries resolved for the install.
std::unique_ptr<VerifyPath> MakeFusedVerifyPath(bool stores_entries);

// A verify plan with entry arrays of `capacity` entries: the planned path's forward plan, and the
// sweep's own plan when the forwards' plans hold none.
VerifyPlanMemory AllocateVerifyPlan(Device device, int64_t capacity);

}  // namespace kvcanary::runtime
