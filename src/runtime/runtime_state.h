// The state the runtime keeps per buffer group and per inner forward, allocated at install.
// Shared by the manager's phases and the perturber, which reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kvcanary/ops.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "runtime/delayed_read.h"

namespace kvcanary::runtime {

enum class Stage { kHead = 0, kTail = 1, kSweep = 2 };
enum class Half { kK = 0, kV = 1 };

// The per-forward phase word, kept on the host (checked when hooks run eagerly).
enum class Phase { kIdle = 0, kAfterPreOut = 1, kAfterPreMaybeIn = 2, kAfterPostMaybeIn = 3 };
const char* PhaseName(Phase phase);

// CanaryLaunchTag of (stage, half, group): tag = 6 * group + 2 * stage + half.
int LaunchTagOf(Stage stage, Half half, GroupKind kind);

struct GroupState {
  GroupSpec spec;
  int64_t window = 0;  // W for SWA (verify the last W prefix positions), 0 for FULL
  bool has_v = false;
  // [num_slots, 32] uint8 records: index Stage (head/tail) * 2 + Half.
  DeviceBuffer buffers[4];
  std::vector<RealKvSource> sources[2];  // per Half; empty with real_data none
  // Per Half: the layers the sources fingerprint, in fold order, and the device table of their
  // addresses when one source spans them (more than kMaxRealKvSources layers).
  std::vector<TensorView> fingerprinted_layers[2];
  // nsa: the indexer's sources, which the K half folds after its own (none otherwise).
  std::vector<RealKvSource> indexer_sources;
  DeviceBuffer layer_tables[3];          // per Half, then the indexer's
  DeviceBuffer host_mirrors[4];          // host-offload sidecar, pinned
  int64_t host_slots = 0;

  TensorView Buffer(Stage stage, Half half) const {
    const int index = (stage == Stage::kHead ? 0 : 2) + static_cast<int>(half);
    return buffers[index].View(DType::kUInt8, {spec.num_slots, kCanarySlotBytes});
  }
};

// What one inner forward owns, allocated once.
struct ForwardState {
  struct PerGroup {
    DeviceBuffer verify_plan_memory;
    DeviceBuffer write_plan_memory;
    // [entry capacity] int64 out_cache_loc through the group's slot table (SWA, compressed)
    DeviceBuffer swa_slots;
    VerifyPlanView verify_plan;
    WritePlanView write_plan;
    // Split mode for this step: contiguous live-row ranges whose verify totals fit.
    bool split = false;
    int64_t split_total = 0;
    std::vector<std::pair<int64_t, int64_t>> split_ranges;
  };
  std::vector<PerGroup> groups;
  DeviceBuffer expected_tokens;     // [entry capacity] int64
  DeviceBuffer expected_positions;  // [entry capacity] int64
  DeviceBuffer valid_lens;          // [req capacity] int64
  DeviceBuffer plan_scratch;        // [req capacity + 1] int64, one per group with fused verify
  // Snapshot after TAIL: per group enable (int32), then write index, then counters.
  DeviceBuffer snapshot_enable;     // [groups] int32
  std::unique_ptr<DelayedRead> overflow_read;
  int64_t skipped_steps = 0;
  bool staged_step_split = false;  // whether the step whose enable flags are staged was split

  Phase phase = Phase::kIdle;
  ForwardBatch batch;
  ForwardHostInput host;
  bool has_batch = false;
  bool write_assert = false;
  bool has_valid_lens = false;
};

}  // namespace kvcanary::runtime
