// The state behind CanaryManager: canary buffers, device state, per-forward workspace and the
// host-side bookkeeping of the step protocol. Split across files by phase:
//   canary_install.cpp   allocation, endpoints, the install log line
//   canary_step.cpp      phases 1-4 and the endpoint launches
//   canary_split.cpp     verification in chunks when a step overflows the plan (§4.8)
//   canary_report.cpp    violation pump and reporter, health, stats, overflow warner, metrics
//   canary_sweep.cpp     periodic sweep of the radix cache (§9)
//   canary_offload.cpp   host-offload sidecar, verify_backup and PD splice (§13, §14)
//   perturbation.cpp     fault injection (§12): the Perturber, called from phases 1 and 4
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvcanary/ops.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/device_memory.h"
#include "kvcanary/runtime/health.h"
#include "kvcanary/runtime/stats.h"
#include "runtime/delayed_read.h"
#include "runtime/perturbation.h"
#include "runtime/verify_path.h"

namespace kvcanary::runtime {

enum class Stage { kHead = 0, kTail = 1, kSweep = 2 };
enum class Half { kK = 0, kV = 1 };

// The per-forward phase word of §4.9, kept on the host (checked when hooks run eagerly).
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
  DeviceBuffer host_mirrors[4];          // host-offload sidecar (§13), pinned
  int64_t host_slots = 0;

  TensorView Buffer(Stage stage, Half half) const {
    const int index = (stage == Stage::kHead ? 0 : 2) + static_cast<int>(half);
    return buffers[index].View(DType::kUInt8, {spec.num_slots, kCanarySlotBytes});
  }
};

// What one inner forward owns, allocated once (§3.4).
struct ForwardState {
  struct PerGroup {
    DeviceBuffer verify_plan_memory;
    DeviceBuffer write_plan_memory;
    DeviceBuffer swa_slots;  // [entry capacity] int64 translated out_cache_loc (SWA only)
    VerifyPlanView verify_plan;
    WritePlanView write_plan;
    // Split mode for this step: contiguous live-row ranges whose verify totals fit (§4.8).
    bool split = false;
    int64_t split_total = 0;
    std::vector<std::pair<int64_t, int64_t>> split_ranges;
  };
  std::vector<PerGroup> groups;
  DeviceBuffer expected_tokens;     // [entry capacity] int64
  DeviceBuffer expected_positions;  // [entry capacity] int64
  DeviceBuffer valid_lens;          // [req capacity] int64
  DeviceBuffer plan_scratch;        // [req capacity + 1] int64, one per group with fused verify
  // Snapshot after TAIL (§4.4): per group enable (int32), then write index, then counters.
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

class CanaryManager::Impl {
 public:
  Impl(const Config& config, const InstallArgs& args);

  // canary_step.cpp
  void BeginStep(const StepInput& input);
  void PreForward(int inner);
  void PostForward(int inner);
  void EndStep();
  void LaunchEndpoints(int inner, Stage stage);
  // Verify of one group's plan arrays (split ranges and sweeps, whatever the verify path).
  void VerifyGroup(size_t group, Stage stage, const VerifyPlanView& plan, bool check_token);
  void Transition(ForwardState& forward, Phase expected, Phase next);
  ForwardState& ForwardAt(int inner);
  void UploadTokenPool(ForwardState& forward, const std::vector<int64_t>& offsets);
  // Plan arguments for batch rows [row_begin, row_end) of the forward, for group `group`.
  PlanArgs PlanArgsOf(const ForwardState& forward, size_t group, int64_t row_begin,
                      int64_t row_end) const;
  LaunchContext ContextOf(size_t group, Stage stage, Half half) const;
  // The V half's context when the group verifies and writes it, else none.
  std::optional<LaunchContext> PairedContextOf(size_t group, Stage stage) const;
  bool HalfActive(const GroupState& group, Half half) const;

  // canary_split.cpp
  void DecideSplit(ForwardState& forward);
  void RunSplitVerify(ForwardState& forward, Stage stage);

  // canary_report.cpp
  void PumpViolations();
  void ReportNewRows(int64_t write_index);
  // Appends the rows to config_.incident_file as JSON lines (no-op when unset).
  void AppendIncidents(const std::vector<ViolationRow>& rows);
  void CheckHealth();
  void LogStats();
  void TickOverflowWarner(ForwardState& forward);
  int64_t CountDeviceBytes() const;
  int64_t RecordBytes() const;
  // The violation ring, write index, counters and flags: state, not per-step workspace.
  int64_t StateBytes() const {
    return ring_.bytes() + write_index_.bytes() + kernel_counters_.bytes() +
           slot_counters_.bytes() + chain_assert_flag_.bytes();
  }
  Capacities WithinWorkspaceBudget(Capacities capacities, int64_t max_seq_len) const;
  MetricsSnapshot Snapshot() const;

  // canary_sweep.cpp
  void MaybeSweep();

  // canary_offload.cpp
  // verify_backup (§13): per half, the group's real-KV source rebuilt over the host copy of
  // layer 0 (absent when the half has no source). Validates the host views; throws Error.
  std::array<std::optional<RealKvSource>, 2> BackupSources(const GroupState& group,
                                                           const HostLayer0& host_layer0) const;
  // Re-hashes the backed-up host slots and compares with the mirrored TAIL records; throws
  // ViolationError on a mismatch.
  void VerifyBackup(const GroupState& group, const std::vector<int64_t>& host_indices,
                    const std::array<std::optional<RealKvSource>, 2>& sources);
  GroupState& GroupOf(GroupKind kind, const char* what);
  const GroupState& GroupOf(GroupKind kind, const char* what) const;

  void Log(LogLevel level, const std::string& message) const { log_->Log(level, message); }
  TensorView CounterView(const DeviceBuffer& counters, int tag) const;

  Config config_;
  InstallArgs args_;
  Capacities capacities_{};
  LogSink* log_ = nullptr;
  Device device_;
  StreamHandle stream_ = nullptr;

  std::vector<GroupState> groups_;
  std::vector<int> active_tags_;
  std::vector<ForwardState> forwards_;

  // Device state (§3.4).
  DeviceBuffer ring_;                // [ring_capacity, 8] int64
  DeviceBuffer write_index_;         // [1] int32
  DeviceBuffer kernel_counters_;     // [12] int64
  DeviceBuffer slot_counters_;       // [12] int64
  DeviceBuffer chain_assert_flag_;   // [1] int32
  DeviceBuffer expected_token_pool_; // [rows, width] int32 (verify token assert only)
  DeviceBuffer sweep_walk_;          // [verify capacity, 3] int64 staging of walk chunks
  // HEAD/TAIL verification: plan arrays or fused (Config::fused_verify).
  std::unique_ptr<VerifyPath> verify_path_;
  // The sweep's plan per group: its own when the forwards' plans cannot overflow (they hold no
  // entry arrays then), else inner forward 0's, free by phase 4.
  std::vector<DeviceBuffer> sweep_plan_memory_;
  std::vector<VerifyPlanView> sweep_plans_;
  // The bound of a path whose plan holds no entries: every prefix position of a full batch
  // (rows x table width).
  int64_t verify_entries_bound_ = 0;
  int64_t token_pool_width_ = 0;
  int64_t device_bytes_ = 0;

  // Delayed reads (§5): the write index (pump), kernel counters (health), stats.
  std::unique_ptr<DelayedRead> pump_read_;
  std::unique_ptr<DelayedRead> health_read_;
  std::unique_ptr<DelayedRead> stats_read_;
  DeviceBuffer stats_staging_;  // [26] int64: step, slot counters[12], kernel counters[12], wi
  int64_t stats_staged_step_ = -1;

  bool init_finished_ = false;
  int64_t outer_step_ = 0;
  bool in_step_ = false;
  int num_forwards_this_step_ = 0;

  // Reporter (§6).
  int64_t last_logged_ = 0;
  bool raised_ = false;
  int64_t rows_reported_ = 0;
  int64_t untouched_rows_dropped_ = 0;
  int64_t last_violation_step_ = -1;
  int64_t last_write_index_ = 0;
  ViolationListener listener_;
  std::array<int64_t, kNumLaunchTags> violations_by_tag_{};

  // The all-reduced violation signal (§16).
  void PumpRankSignal();
  SingleRankReducer single_rank_;
  ViolationSignalReducer* signal_reducer_ = nullptr;
  DeviceBuffer signal_value_;  // [1] int32: the write index, then its max over the ranks
  std::unique_ptr<DelayedRead> signal_read_;
  bool other_rank_reported_ = false;

  // Health (§7) and metrics.
  std::unique_ptr<HealthChecker> health_;
  int64_t health_checks_ = 0;
  bool sweep_since_health_stage_ = false;
  bool sweep_since_previous_check_ = false;
  std::array<int64_t, kNumLaunchTags> last_kernel_counters_{};
  std::array<int64_t, kNumLaunchTags> last_slot_counters_{};

  // Sweep (§9).
  const RadixView* radix_ = nullptr;
  int64_t last_sweep_step_ = -1;
  int64_t sweep_passes_ = 0;
  int64_t split_steps_ = 0;

  // Fault injection (§12): present when the install's PerturbConfig enables any kind.
  std::unique_ptr<Perturber> perturber_;
  PerturbationListener perturbation_listener_;
};

}  // namespace kvcanary::runtime
