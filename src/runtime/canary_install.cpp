// Install: refusals, buffer groups and sources, endpoints, device state and
// the per-forward workspace, all allocated here and never per step.
#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "runtime/canary_impl.h"
#include "runtime/compressed_pool.h"
#include "runtime/group_sources.h"

namespace kvcanary::runtime {
namespace {

// `count` int64 values; `what` names the buffer if count x 8 bytes overflows.
DeviceBuffer Int64Buffer(Device device, int64_t count, std::string_view what) {
  return DeviceBuffer(device, CheckedMul(what, count, 8));
}

// A group's record buffer of `slots` 32-byte records (device or host mirror).
int64_t RecordBufferBytes(const GroupSpec& spec, const char* slots_name, int64_t slots) {
  return CheckedMul(
      std::string("group ") + GroupKindName(spec.kind) + " " + slots_name + " x 32 record bytes",
      slots, kCanarySlotBytes);
}

std::string TagList(const std::vector<int>& tags) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < tags.size(); ++i) {
    out << (i ? ", " : "") << LaunchTagName(tags[i]);
  }
  out << "]";
  return out.str();
}

// Config::verify_entries for this install (auto: where storing measured faster).
bool StoresVerifyEntries(const Config& config, const InstallArgs& args) {
  switch (config.verify_entries) {
    case VerifyEntries::kDerive:
      return false;
    case VerifyEntries::kStore:
      return true;
    case VerifyEntries::kAuto:
      break;
  }
  return StoredEntriesPay(args.device.type, config.verify_sample, args.block_table.defined());
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle:
      return "IDLE";
    case Phase::kAfterPreOut:
      return "AFTER_PRE_OUT";
    case Phase::kAfterPreMaybeIn:
      return "AFTER_PRE_MAYBE_IN";
    case Phase::kAfterPostMaybeIn:
      return "AFTER_POST_MAYBE_IN";
  }
  return "UNKNOWN";
}

int LaunchTagOf(Stage stage, Half half, GroupKind kind) {
  return 6 * static_cast<int>(kind) + 2 * static_cast<int>(stage) + static_cast<int>(half);
}

CanaryManager::Impl::Impl(const Config& config, const InstallArgs& args)
    : config_(config),
      args_(args),
      device_(args.device),
      stream_(args.stream),
      verify_path_(config.fused_verify ? MakeFusedVerifyPath(StoresVerifyEntries(config, args))
                                       : MakePlannedVerifyPath()) {
  log_ = args.log != nullptr ? args.log : &StderrLogSink();
  if (args.piecewise_capture) {
    ThrowError(
        "kv-canary: piecewise CUDA graph capture of a forward is not supported by the "
        "per-forward canary bracket; disable it");
  }
  if (args.graph_capture && device_.type != DeviceType::kCUDA) {
    ThrowError(
        "kv-canary: the CPU backend cannot run inside a captured graph; disable graph "
        "capture");
  }
  if (args.groups.empty()) ThrowError("kv-canary: install needs at least one buffer group");
  args.perturb.Validate();
  if (args.num_inner_forwards < 1) {
    ThrowError("kv-canary: num_inner_forwards must be positive, got ", args.num_inner_forwards);
  }
  if (args.capacities.has_value()) args.capacities->Validate();  // before anything is allocated
  table_ = InstallTokenTable(args);
  incident_file_ = IncidentFile(config.incident_file);  // refuses a path it cannot append to
  const int64_t rows = table_.rows;
  const int64_t width = table_.max_seq_len;
  capacities_ =
      args.capacities.has_value()
          ? *args.capacities
          : Capacities::FromArgs(rows, width, args.pool_slot_count, args.cuda_graph_max_bs,
                                 args.speculative_num_draft_tokens, args.max_prefill_tokens,
                                 args.chunked_prefill_size);

  // Buffer groups, at most one per kind.
  bool seen[2] = {false, false};
  for (const GroupSpec& spec : args.groups) {
    const int kind = static_cast<int>(spec.kind);
    if (seen[kind]) ThrowError("kv-canary: duplicate buffer group ", GroupKindName(spec.kind));
    seen[kind] = true;
    if (spec.num_slots <= 0) {
      ThrowError("kv-canary: group ", GroupKindName(spec.kind), " num_slots must be positive, got ",
                 spec.num_slots);
    }
    if (spec.kind == GroupKind::kSwa &&
        (!spec.full_to_swa.defined() || args.swa_window_size <= 0)) {
      ThrowError("kv-canary: an SWA group needs full_to_swa and swa_window_size > 0");
    }
    CheckPoolLayout(spec, config);
    CheckCompressedPool(spec, args, config);
    GroupState group;
    group.spec = spec;
    group.window = spec.kind == GroupKind::kSwa ? args.swa_window_size : 0;
    const std::vector<TensorView> k_layers =
        ListedLayers(spec.k_layer0, spec.k_layers, "k", spec, config);
    const std::vector<TensorView> v_layers =
        ListedLayers(spec.v_layer0, spec.v_layers, "v", spec, config);
    group.has_v = !v_layers.empty();
    for (int i = 0; i < 4; ++i) {
      const bool v_buffer = i % 2 == 1;
      if (v_buffer && !group.has_v) continue;
      group.buffers[i] =
          DeviceBuffer(device_, RecordBufferBytes(spec, "num_slots", spec.num_slots));
      if (spec.host_slots > 0) {
        group.host_mirrors[i] = DeviceBuffer(
            Device::CPU(), RecordBufferBytes(spec, "host_slots", spec.host_slots), /*pinned=*/true);
      }
    }
    group.host_slots = spec.host_slots;
    BuildGroupSources(group, k_layers, v_layers);
    groups_.push_back(std::move(group));
  }
  std::sort(groups_.begin(), groups_.end(),
            [](const GroupState& a, const GroupState& b) { return a.spec.kind < b.spec.kind; });
  if (!args.capacities.has_value()) capacities_ = WithinWorkspaceBudget(capacities_, width);

  // Endpoints: HEAD, TAIL and SWEEP per half; V omitted without a V half.
  for (const GroupState& group : groups_) {
    for (Stage stage : {Stage::kHead, Stage::kTail, Stage::kSweep}) {
      for (Half half : {Half::kK, Half::kV}) {
        if (half == Half::kV && !group.has_v) continue;
        active_tags_.push_back(LaunchTagOf(stage, half, group.spec.kind));
      }
    }
  }
  std::sort(active_tags_.begin(), active_tags_.end());

  // Device state.
  state_.ring = Int64Buffer(
      device_, CheckedMul("violation ring fields", config.ring_capacity, kViolationFields),
      "violation ring bytes");
  state_.write_index = DeviceBuffer(device_, 4);
  state_.kernel_counters = Int64Buffer(device_, kNumLaunchTags, "kernel counters");
  state_.slot_counters = Int64Buffer(device_, kNumLaunchTags, "slot counters");
  state_.chain_assert_flag = DeviceBuffer(device_, 4);
  const auto compressed = std::find_if(groups_.begin(), groups_.end(),
                                       [](const GroupState& g) { return IsCompressed(g.spec); });
  if (compressed != groups_.end()) state_.chain_assert_off = DeviceBuffer(device_, 4);  // stays 0
  // An SWA or compressed group's rows name slots of its own: quarantine reads them through the
  // group's slot table, as the plan does.
  for (const GroupState& group : groups_) {
    const TensorView table = SlotTable(group.spec);
    if (table.defined()) affected_.SetSlotTable(group.spec.kind == GroupKind::kSwa, table);
  }
  if (config.enable_verify_token_assert) {
    token_pool_width_ = width;
    state_.expected_token_pool = DeviceBuffer(
        device_,
        CheckedMul("expected token pool bytes (req_to_token rows x width x 4)", rows, width, 4));
  }
  if (config.verify_sample > 1) {
    state_.verify_phase = Int64Buffer(device_, rows, "verify phases (one per req_to_token row)");
  }

  // Per inner forward workspace, sized by the capacities.
  const int64_t verify_cap = capacities_.verify_capacity;
  const int64_t req_cap = capacities_.write_req_capacity;
  const int64_t entry_cap = capacities_.write_entry_capacity;
  forwards_.resize(args.num_inner_forwards);
  for (ForwardState& forward : forwards_) {
    for (const GroupState& group : groups_) {
      ForwardState::PerGroup per_group;
      VerifyPlanMemory verify_plan = verify_path_->AllocateForwardPlan(device_, verify_cap);
      per_group.verify_plan_memory = std::move(verify_plan.memory);
      per_group.verify_plan = verify_plan.view;
      per_group.write_plan_memory = DeviceBuffer(device_, WritePlanAllocationBytes(req_cap));
      const DeviceBuffer& w = per_group.write_plan_memory;
      per_group.write_plan = WritePlanView{w.View(DType::kInt64, {req_cap + 1}, 0),
                                           w.View(DType::kInt64, {req_cap}, 8 * (req_cap + 1)),
                                           w.View(DType::kInt32, {1}, 8 * (2 * req_cap + 1))};
      if (SlotTable(group.spec).defined()) {
        per_group.swa_slots = Int64Buffer(device_, entry_cap, "translated slots");
      }
      forward.groups.push_back(std::move(per_group));
    }
    forward.expected_tokens = Int64Buffer(device_, entry_cap, "expected tokens");
    forward.expected_positions = Int64Buffer(device_, entry_cap, "expected positions");
    forward.valid_lens = Int64Buffer(device_, req_cap, "valid lens");
    const int64_t scratches =
        verify_path_->ScratchesPerForward(static_cast<int64_t>(groups_.size()));
    forward.plan_scratch = Int64Buffer(
        device_, CheckedMul("plan scratch values", scratches, CheckedAdd("req rows", req_cap, 1)),
        "plan scratch");
    forward.snapshot_enable = DeviceBuffer(device_, 4 * static_cast<int64_t>(groups_.size()));
    forward.overflow_read =
        std::make_unique<DelayedRead>(device_, 4 * static_cast<int64_t>(groups_.size()));
  }
  // Sweeps stage their walk here, in chunks of the verify capacity.
  sweep_.walk = Int64Buffer(device_, CheckedMul("sweep walk values", 3, verify_cap), "sweep walk");
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (verify_path_->CanOverflow()) {
      sweep_.plans.push_back(forwards_[0].groups[g].verify_plan);
    } else {
      VerifyPlanMemory plan = AllocateVerifyPlan(device_, verify_cap);
      sweep_.plans.push_back(plan.view);
      sweep_.plan_memory.push_back(std::move(plan.memory));
    }
  }
  // Saturates: the bound only caps a count, so a product past int64 means "no cap below".
  verify_entries_bound_ =
      std::min<int64_t>(kMaxDeviceCount, TryMul(req_cap, width).value_or(kMaxDeviceCount));

  reporter_.pump_read = std::make_unique<DelayedRead>(device_, 4);
  if (config.allreduce_violation_signal) {
    signal_.reducer = args.signal_reducer != nullptr ? args.signal_reducer : &signal_.single_rank;
    signal_.value = DeviceBuffer(device_, 4);
    signal_.read = std::make_unique<DelayedRead>(device_, 4);
  }
  health_.read = std::make_unique<DelayedRead>(device_, 8 * kNumLaunchTags);
  stats_.staging = DeviceBuffer(device_, 8 * 2 * kNumLaunchTags + 8);
  stats_.read = std::make_unique<DelayedRead>(device_, 8 * 2 * kNumLaunchTags + 8);
  health_.checker =
      std::make_unique<HealthChecker>(active_tags_, config.sweep_interval, config.enable_mha_v);

  if (args.perturb.AnyEnabled()) perturber_ = std::make_unique<Perturber>(*this, args.perturb);
  if (config.jitter_enabled) jitter_ = std::make_unique<JitterFuzzer>(config, device_);

  device_bytes_ = CountDeviceBytes();
  std::ostringstream kinds;
  kinds << "[";
  for (size_t i = 0; i < groups_.size(); ++i) {
    const GroupSpec& spec = groups_[i].spec;
    kinds << (i ? ", " : "") << GroupKindName(spec.kind);
    const bool latent = spec.layout != PoolLayout::kMha;
    if (latent || IsCompressed(spec)) {
      kinds << "(" << (latent ? PoolLayoutName(spec.layout) : "")
            << (latent && IsCompressed(spec) ? ", " : "");
      if (IsCompressed(spec)) kinds << "compressed x" << spec.compress_ratio;
      kinds << ")";
    }
  }
  kinds << "]";
  std::ostringstream line;
  line << "install_canary: device=" << device_.ToString() << " config=" << config.ToString()
       << " perturb_config=" << args.perturb.ToString()
       << " launch_capacities=(verify=" << verify_cap << ", write_req=" << req_cap
       << ", write_entry=" << entry_cap << ") n_buffer_groups=" << groups_.size()
       << " buffer_group_kinds=" << kinds.str() << " swa_window_size=" << args.swa_window_size
       << " active_tags=" << TagList(active_tags_) << " device_bytes=" << device_bytes_
       << " (records " << RecordBytes() << ", ring and counters " << state_.Bytes()
       << ", workspace " << device_bytes_ - RecordBytes() - state_.Bytes() << ")";
  std::string text = line.str();
  Log(LogLevel::kInfo, text);
}

void CanaryManager::Impl::BuildGroupSources(GroupState& group,
                                            const std::vector<TensorView>& k_layers,
                                            const std::vector<TensorView>& v_layers) {
  const GroupSpec& spec = group.spec;
  const bool nsa = spec.layout == PoolLayout::kNsa;
  // An nsa launch takes the indexer's source(s) after the latent ones: keep one place for them.
  const SourceTarget target{device_, stream_, nsa ? kMaxRealKvSources - 1 : kMaxRealKvSources};
  const std::vector<TensorView>* listed[2] = {&k_layers, &v_layers};
  for (int half = 0; half < 2; ++half) {
    HalfSources built =
        BuildHalfSources(*listed[half], half == 0 ? "k" : "v", spec, config_, target);
    group.sources[half] = std::move(built.sources);
    group.fingerprinted_layers[half] = std::move(built.layers);
    group.layer_tables[half] = std::move(built.layer_table);
  }
  if (!nsa) return;
  const int left = kMaxRealKvSources - static_cast<int>(group.sources[0].size());
  HalfSources indexer = BuildIndexerSources(spec, config_, SourceTarget{device_, stream_, left});
  group.indexer_sources = std::move(indexer.sources);
  group.layer_tables[2] = std::move(indexer.layer_table);
}

Capacities CanaryManager::Impl::WithinWorkspaceBudget(Capacities capacities,
                                                      int64_t max_seq_len) const {
  // Our memory budget wins over SGLang's 3 x pool_slot_count: the per-step workspace stays
  // below 10% of the record memory. Split verification makes any capacity that holds the
  // longest row safe, so only that lower bound is kept.
  int64_t record_bytes = 0;
  for (const GroupState& group : groups_) {
    record_bytes = CheckedAdd("record bytes", record_bytes,
                              CheckedMul("group record bytes", group.has_v ? 4 : 2,
                                         kCanarySlotBytes, group.spec.num_slots));
  }
  const WorkspaceShape shape{capacities, static_cast<int>(groups_.size()),
                             args_.num_inner_forwards};
  const int64_t floor = std::max<int64_t>(max_seq_len, 1);
  const int64_t budget = record_bytes / 10;
  const int64_t at_floor = verify_path_->WorkspaceBytes(shape, floor);
  int64_t fitting = floor;
  if (at_floor < budget) fitting = floor + (budget - at_floor) / verify_path_->BytesPerEntry(shape);
  capacities.verify_capacity = std::min(capacities.verify_capacity, std::max(fitting, floor));
  capacities.verify_capacity = std::min(
      {capacities.verify_capacity, verify_path_->MaxVerifyCapacity(floor), kMaxDeviceCount});
  return capacities;
}

TensorView CanaryManager::Impl::CounterView(const DeviceBuffer& counters, int tag) const {
  return counters.View(DType::kInt64, {1}, 8 * static_cast<int64_t>(tag));
}

bool CanaryManager::Impl::HalfActive(const GroupState& group, Half half) const {
  return half == Half::kK || (group.has_v && config_.enable_mha_v);
}

LaunchContext CanaryManager::Impl::ContextOf(size_t group_index, Stage stage, Half half) const {
  const GroupState& group = groups_[group_index];
  const int tag = LaunchTagOf(stage, half, group.spec.kind);
  LaunchContext context;
  // SWEEP verifies the TAIL buffer: the records of tokens whose KV has been written.
  context.canary_buf = group.Buffer(stage == Stage::kHead ? Stage::kHead : Stage::kTail, half);
  context.kernel_kind = tag;
  context.violation_ring =
      state_.ring.View(DType::kInt64, {config_.ring_capacity, kViolationFields});
  context.violation_write_index = state_.write_index.View(DType::kInt32, {1});
  context.slot_run_counter = CounterView(state_.slot_counters, tag);
  context.kernel_run_counter = CounterView(state_.kernel_counters, tag);
  // HEAD runs before the forward wrote the KV: its records carry no fingerprint.
  if (stage != Stage::kHead) {
    int count = 0;  // install kept the total within kMaxRealKvSources
    for (const RealKvSource& source : group.sources[static_cast<int>(half)]) {
      context.real_kv_sources[count++] = source;
    }
    if (half == Half::kK) {  // nsa: the latent bytes, then the indexer's key bytes
      for (const RealKvSource& source : group.indexer_sources) {
        context.real_kv_sources[count++] = source;
      }
    }
    context.num_real_kv_sources = count;
    context.real_kv_hash_mode = count == 0 ? 0 : static_cast<int32_t>(config_.real_data);
  }
  // A compressed group's written positions step by compress_ratio: the assert stays off there.
  context.enable_chain_position_assert =
      (IsCompressed(group.spec) ? state_.chain_assert_off : state_.chain_assert_flag)
          .View(DType::kInt32, {1});
  return context;
}

}  // namespace kvcanary::runtime
