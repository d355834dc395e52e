// CanaryManager's public surface: forwards to Impl (canary_impl.h says which file does what).
#include "kvcanary/runtime/canary_manager.h"

#include "kvcanary/error.h"
#include "runtime/canary_impl.h"

namespace kvcanary::runtime {

std::unique_ptr<CanaryManager> CanaryManager::Install(const Config& config,
                                                      const InstallArgs& args) {
  config.Validate();
  if (config.mode == Mode::kNone) return nullptr;
  return std::unique_ptr<CanaryManager>(new CanaryManager(std::make_unique<Impl>(config, args)));
}

CanaryManager::CanaryManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CanaryManager::~CanaryManager() = default;

void CanaryManager::MarkInitFinished() {
  impl_->step_.init_finished = true;
  const int32_t on = 1;
  CopyBytesAsync(impl_->state_.chain_assert_flag.data(), &on, 4, impl_->device_, impl_->stream_);
  SynchronizeStream(impl_->device_, impl_->stream_);
}

void CanaryManager::AttachRadixCache(const RadixView* view) { impl_->sweep_.radix = view; }

void CanaryManager::SetViolationListener(ViolationListener listener) {
  impl_->reporter_.listener = std::move(listener);
}

void CanaryManager::SetPerturbationListener(PerturbationListener listener) {
  impl_->perturbation_listener_ = std::move(listener);
}

void CanaryManager::PerturbNextTokens(std::vector<int64_t>& sampled) {
  if (impl_->perturber_) impl_->perturber_->PerturbNextTokens(sampled);
}

void CanaryManager::BeginStep(const StepInput& input) { impl_->BeginStep(input); }
void CanaryManager::PreForward(int inner) { impl_->PreForward(inner); }
void CanaryManager::PostForward(int inner) { impl_->PostForward(inner); }
void CanaryManager::EndStep() { impl_->EndStep(); }
std::vector<AffectedRequest> CanaryManager::TakeAffectedRequests() {
  return impl_->affected_.Take();
}

void CanaryManager::VerifyRecordsNow(const RadixWalk& records) {
  impl_->VerifyRecordsNow(records);
}

void CanaryManager::ReplayedForward(int inner) {
  ForwardState& forward = impl_->ForwardAt(inner);
  impl_->Transition(forward, Phase::kAfterPreOut, Phase::kAfterPreMaybeIn);
  impl_->Transition(forward, Phase::kAfterPreMaybeIn, Phase::kAfterPostMaybeIn);
  // The graph's spin-wait launches replay with the ticks BeginStep copied in.
  for (const JitterPoint point : {JitterPoint::kPreHead, JitterPoint::kPostHead,
                                  JitterPoint::kPostAttn, JitterPoint::kPostTail}) {
    impl_->Jitter(point, /*launch=*/false);
  }
}

void CanaryManager::AbandonStep() {
  for (ForwardState& forward : impl_->forwards_) forward.phase = Phase::kIdle;
  impl_->step_.in_step = false;
}

TensorView CanaryManager::CanaryBuffer(GroupKind kind, bool tail, bool v_half) const {
  const GroupState& group = impl_->GroupOf(kind, "canary buffer");
  if (v_half && !group.has_v) {
    ThrowError("kv-canary: group ", GroupKindName(kind), " has no V half");
  }
  return group.Buffer(tail ? Stage::kTail : Stage::kHead, v_half ? Half::kV : Half::kK);
}

int64_t CanaryManager::device_bytes() const { return impl_->device_bytes_; }
const Capacities& CanaryManager::capacities() const { return impl_->capacities_; }
int64_t CanaryManager::outer_step() const { return impl_->step_.outer; }
int64_t CanaryManager::sweep_passes() const { return impl_->sweep_.passes; }
int64_t CanaryManager::split_steps() const { return impl_->stats_.split_steps; }
std::vector<int> CanaryManager::active_tags() const { return impl_->active_tags_; }
MetricsSnapshot CanaryManager::Metrics() const { return impl_->Snapshot(); }
std::string CanaryManager::PrometheusText() const { return FormatPrometheus(impl_->Snapshot()); }

int64_t CanaryManager::Impl::RecordBytes() const {
  int64_t total = 0;
  for (const GroupState& group : groups_) {
    for (const DeviceBuffer& buffer : group.buffers) total += buffer.bytes();
  }
  return total;
}

int64_t CanaryManager::record_bytes() const { return impl_->RecordBytes(); }

int64_t CanaryManager::Impl::CountDeviceBytes() const {
  int64_t total = state_.AllBytes() + sweep_.walk.bytes() + stats_.staging.bytes() +
                  signal_.value.bytes() + (jitter_ ? jitter_->device_bytes() : 0);
  for (const GroupState& group : groups_) {
    for (const DeviceBuffer& buffer : group.buffers) total += buffer.bytes();
    for (const DeviceBuffer& table : group.layer_tables) total += table.bytes();
  }
  for (const DeviceBuffer& plan : sweep_.plan_memory) total += plan.bytes();
  for (const ForwardState& forward : forwards_) {
    for (const ForwardState::PerGroup& per_group : forward.groups) {
      total += per_group.verify_plan_memory.bytes() + per_group.write_plan_memory.bytes() +
               per_group.swa_slots.bytes();
    }
    total += forward.expected_tokens.bytes() + forward.expected_positions.bytes() +
             forward.valid_lens.bytes() + forward.plan_scratch.bytes() +
             forward.snapshot_enable.bytes();
  }
  return total;
}

}  // namespace kvcanary::runtime
