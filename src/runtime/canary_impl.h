// The state behind CanaryManager, in named parts (install decisions, device state, the forwards,
// the step, reporter, rank signal, health, stats, sweep), with the phases split across files:
//   canary_install.cpp   allocation, endpoints, the install log line
//   canary_step.cpp      phases 1-4 and the endpoint launches
//   canary_split.cpp     verification in chunks when a step overflows the plan
//   canary_report.cpp    violation pump and reporter, health, stats, overflow warner, metrics
//   canary_quarantine.cpp  quarantine: the requests a reported violation touched
//   canary_sweep.cpp     periodic sweep of the radix cache
//   canary_offload.cpp   host-offload sidecar, verify_backup and PD splice
//   canary_store.cpp     the L3 tier: a page's records as a record blob in a PageStore
//   swa_divergence.cpp   the SWA divergence report every swa_divergence_stats_interval steps
//   verify_path_*.cpp    how HEAD/TAIL verification runs (planned or fused)
//   perturbation.cpp     fault injection: the Perturber, which sees the runtime only
//                        through PerturbationHost
//   jitter.cpp           the timing-jitter fuzzer's draw, upload and spin-wait launches
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
#include "runtime/affected_requests.h"
#include "runtime/delayed_read.h"
#include "runtime/incident_file.h"
#include "runtime/jitter.h"
#include "runtime/perturbation.h"
#include "runtime/runtime_state.h"
#include "runtime/swa_divergence.h"
#include "runtime/verify_path.h"

namespace kvcanary::runtime {

// The device state shared by every launch: the violation ring and its write index, the
// per-tag counters, the chain-assert flag and the expected-token pool.
struct DeviceState {
  DeviceBuffer ring;                 // [ring_capacity, 8] int64
  DeviceBuffer write_index;          // [1] int32
  DeviceBuffer kernel_counters;      // [12] int64
  DeviceBuffer slot_counters;        // [12] int64
  DeviceBuffer chain_assert_flag;    // [1] int32
  DeviceBuffer chain_assert_off;     // [1] int32, always 0 (only with a compressed group)
  DeviceBuffer expected_token_pool;  // [rows, width] int32 (verify token assert only)
  // [rows] int64 sampled verify's rotation, one phase per request row (Config::verify_sample > 1
  // only): read by a forward's plans and verifies, advanced on the device for the forward's rows
  // after its TAIL, so graph replays keep rotating and each request sees K consecutive phases
  // in K forwards, whatever else the batches hold.
  DeviceBuffer verify_phase;

  // The ring, write index, counters, flags and phases: state, not per-step workspace.
  int64_t Bytes() const {
    return ring.bytes() + write_index.bytes() + kernel_counters.bytes() + slot_counters.bytes() +
           chain_assert_flag.bytes() + chain_assert_off.bytes() + verify_phase.bytes();
  }
  // Every buffer above (Bytes and the expected-token pool): what device_bytes() counts of it. A
  // field added here goes into one of the two.
  int64_t AllBytes() const { return Bytes() + expected_token_pool.bytes(); }
};

// Where the step protocol stands.
struct StepState {
  bool init_finished = false;
  int64_t outer = 0;  // steps ended so far
  bool in_step = false;
  int num_forwards = 0;  // inner forwards begun in this step
};

// The reporter: what has been read back, logged and raised.
struct ReporterState {
  std::unique_ptr<DelayedRead> pump_read;  // the write index, one step late
  int64_t last_logged = 0;
  bool raised = false;
  int64_t rows_reported = 0;
  int64_t untouched_rows_dropped = 0;
  int64_t last_violation_step = -1;
  int64_t last_write_index = 0;
  ViolationListener listener;
  std::array<int64_t, kNumLaunchTags> violations_by_tag{};
  int64_t l3_corrupt_loads = 0;  // LoadFromStore calls that found a corrupt page
};

// The all-reduced violation signal across ranks.
struct RankSignalState {
  SingleRankReducer single_rank;
  ViolationSignalReducer* reducer = nullptr;  // null: the signal is off
  DeviceBuffer value;  // [1] int32: the write index, then its max over the ranks
  std::unique_ptr<DelayedRead> read;
  bool other_rank_reported = false;
};

// The health check and the stats line.
struct HealthState {
  std::unique_ptr<HealthChecker> checker;
  std::unique_ptr<DelayedRead> read;  // kernel counters, one step late
  int64_t checks = 0;
  bool sweep_since_stage = false;
  bool sweep_since_previous_check = false;
  std::array<int64_t, kNumLaunchTags> last_kernel_counters{};
  std::array<int64_t, kNumLaunchTags> last_slot_counters{};
};
struct StatsState {
  std::unique_ptr<DelayedRead> read;
  DeviceBuffer staging;  // [26] int64: step, slot counters[12], kernel counters[12], wi
  int64_t staged_step = -1;
  int64_t split_steps = 0;
};

// The SWA divergence diagnostic: how many reports ran and what the last one counted.
struct SwaDivergenceState {
  int64_t reports = 0;
  SwaDivergenceCounts last;
};

// The periodic sweep of the engine's radix cache.
struct SweepState {
  const RadixView* radix = nullptr;
  int64_t last_step = -1;
  int64_t passes = 0;
  DeviceBuffer walk;  // [verify capacity, 3] int64 staging of walk chunks
  // The sweep's plan per group: its own when the forwards' plans cannot overflow (they hold no
  // entry arrays then), else inner forward 0's, free by phase 4.
  std::vector<DeviceBuffer> plan_memory;
  std::vector<VerifyPlanView> plans;
};

// The state behind CanaryManager, in named parts; each phase file works on the parts it names.
// The perturber sees it only through PerturbationHost.
class CanaryManager::Impl final : public PerturbationHost {
 public:
  Impl(const Config& config, const InstallArgs& args);

  // canary_step.cpp
  void BeginStep(const StepInput& input);
  // Every check BeginStep makes of one forward's input, before it changes anything.
  void CheckForwardInput(const ForwardState& forward, const ForwardBatch& batch,
                         const ForwardHostInput& host) const;
  // The host copies of the batch agree with each other and with the table's width.
  void CheckHostInput(const ForwardBatch& batch, const ForwardHostInput& host) const;
  // The verify token assert's request token lists: one per row, summing to the flat ids, within
  // the staging UploadTokenPool copies them through.
  void CheckTokenLists(const ForwardHostInput& host) const;
  // Phase 1 for one checked forward: its phase, its batch, its uploads, its split decision.
  void StartForward(ForwardState& forward, const ForwardBatch& batch, const ForwardHostInput& host);
  void PreForward(int inner);
  void PostForward(int inner);
  void EndStep();
  void LaunchEndpoints(int inner, Stage stage);
  // Verify of one group's plan arrays (split ranges and sweeps, whatever the verify path).
  void VerifyGroup(size_t group, Stage stage, const VerifyPlanView& plan, bool check_token);
  // Throws the phase-mismatch error unless `forward` may move from `expected` to `next`.
  void CheckTransition(const ForwardState& forward, Phase expected, Phase next) const;
  void Transition(ForwardState& forward, Phase expected, Phase next);
  ForwardState& ForwardAt(int inner);
  // The timing-jitter fuzzer at `point` of a forward (nothing when it is off): the spin-wait
  // launch unless `launch` is false (a graph replay runs the captured one), and a perturbation
  // event "jitter_<point>" carrying the step's ticks when the point fires.
  void Jitter(JitterPoint point, bool launch = true);
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
  // Phase 1: the PRE_HEAD spin when a forward of the step is split, then every split HEAD verify.
  void RunHeadSplitVerify();

  // canary_report.cpp
  void PumpViolations();
  void ReportNewRows(int64_t write_index);
  // Appends the rows to the incident file as JSON lines (no-op when unset).
  void AppendIncidents(const std::vector<ViolationRow>& rows);
  void NotifyListener(const ViolationRow& row);
  // Quarantine: keeps the live rows of the step just run (EndStep, before the pump).
  void RecordStepForQuarantine();
  // Quarantine: matches the shown rows to the recorded batches and logs the requests touched.
  void QuarantineRows(const std::vector<ViolationRow>& rows, bool ring_overflow);
  void CheckHealth();
  void LogStats();
  void TickOverflowWarner(ForwardState& forward);
  int64_t CountDeviceBytes() const;
  int64_t RecordBytes() const;
  Capacities WithinWorkspaceBudget(Capacities capacities, int64_t max_seq_len) const;
  // A group's real-KV sources per half from its listed layers, and an nsa group's indexer's.
  void BuildGroupSources(GroupState& group, const std::vector<TensorView>& k_layers,
                         const std::vector<TensorView>& v_layers);
  MetricsSnapshot Snapshot() const;
  void PumpRankSignal();

  // canary_sweep.cpp
  void MaybeSweep();
  // Verifies the TAIL records of a walk's full-pool slots in chunks of the verify capacity, every
  // group, as a sweep pass (its rows are the SWEEP launches').
  void VerifyWalk(const RadixWalk& walk);
  void VerifyRecordsNow(const RadixWalk& records);

  // swa_divergence.cpp: every swa_divergence_stats_interval outer steps (EndStep), compares the
  // SWA group's table and records with the FULL group's over the step's live rows and logs them.
  void ReportSwaDivergence();

  // canary_offload.cpp
  // verify_backup: per half, the group's real-KV source rebuilt over the host copy of
  // layer 0 (absent when the half has no source). Validates the host views; throws Error.
  std::array<std::optional<RealKvSource>, 2> BackupSources(const GroupState& group,
                                                           const HostLayer0& host_layer0) const;
  // Re-hashes the backed-up host slots and compares with the mirrored TAIL records; throws
  // ViolationError on a mismatch.
  void VerifyBackup(const GroupState& group, const std::vector<int64_t>& host_indices,
                    const std::array<std::optional<RealKvSource>, 2>& sources);
  // canary_store.cpp: a corrupt L3 load, reported (ERROR line, counter, incident); throws
  // ViolationError(`message`) when the runtime raises, else returns the kCorrupt result.
  StoreLoadResult ReportCorruptLoad(const GroupState& group, const std::string& key,
                                    const std::string& reason, const std::string& message);
  GroupState& GroupOf(GroupKind kind, const char* what);
  const GroupState& GroupOf(GroupKind kind, const char* what) const;

  TensorView CounterView(const DeviceBuffer& counters, int tag) const;

  // PerturbationHost.
  const std::vector<GroupState>& Groups() const override { return groups_; }
  const ForwardState& FirstForward() const override { return forwards_[0]; }
  int64_t OuterStep() const override { return step_.outer; }
  const RadixView* Radix() const override { return sweep_.radix; }
  const TokenTable& InstalledTable() const override { return table_; }
  int64_t SweepInterval() const override { return config_.sweep_interval; }
  RealKvHashMode RealData() const override { return config_.real_data; }
  StreamHandle Stream() const override { return stream_; }
  // The engine's sink never breaks a step: a line it throws on goes to stderr instead.
  void Log(LogLevel level, const std::string& message) const override;
  void Emit(const PerturbationEvent& event) const override {
    if (perturbation_listener_) perturbation_listener_(event);
  }

  // What install decided.
  Config config_;
  InstallArgs args_;
  TokenTable table_;  // req_to_token or block table, checked at install
  Capacities capacities_{};
  LogSink* log_ = nullptr;
  Device device_;
  StreamHandle stream_ = nullptr;
  // HEAD/TAIL verification: plan arrays or fused (Config::fused_verify).
  std::unique_ptr<VerifyPath> verify_path_;
  std::vector<GroupState> groups_;
  std::vector<int> active_tags_;
  // The bound of a path whose plan holds no entries: every prefix position of a full batch
  // (rows x table width).
  int64_t verify_entries_bound_ = 0;
  int64_t token_pool_width_ = 0;
  int64_t device_bytes_ = 0;
  // Config::incident_file, checked at install (incident_file.h).
  IncidentFile incident_file_;

  // What changes as the engine runs.
  DeviceState state_;
  std::vector<ForwardState> forwards_;
  StepState step_;
  ReporterState reporter_;
  RankSignalState signal_;
  HealthState health_;
  StatsState stats_;
  SweepState sweep_;
  SwaDivergenceState swa_divergence_;
  AffectedRequestTracker affected_;  // Config::on_violation quarantine only

  // Fault injection: present when the install's PerturbConfig enables any kind.
  std::unique_ptr<Perturber> perturber_;
  // The timing-jitter fuzzer: present when Config::jitter_enabled.
  std::unique_ptr<JitterFuzzer> jitter_;
  PerturbationListener perturbation_listener_;
};

}  // namespace kvcanary::runtime
