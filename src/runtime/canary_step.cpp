// The four-phase step protocol: phase 1 and 4 run on the host outside any
// graph; phases 2 and 3 only enqueue ops on the compute stream, so an engine may capture them.
#include <algorithm>
#include <exception>
#include <string>

#include "kvcanary/error.h"
#include "runtime/canary_impl.h"
#include "runtime/compressed_pool.h"
#include "runtime/tensor_slice.h"

namespace kvcanary::runtime {

void CanaryManager::Impl::CheckTransition(const ForwardState& forward, Phase expected,
                                          Phase next) const {
  if (step_.init_finished && forward.phase != expected) {
    ThrowError("kv-canary: per-forward phase mismatch \xE2\x80\x94 expected ", PhaseName(expected),
               " before transitioning to ", PhaseName(next));
  }
}

void CanaryManager::Impl::Transition(ForwardState& forward, Phase expected, Phase next) {
  CheckTransition(forward, expected, next);
  forward.phase = next;
}

void CanaryManager::Impl::CheckForwardInput(const ForwardState& forward, const ForwardBatch& batch,
                                            const ForwardHostInput& host) const {
  CheckTransition(forward, Phase::kIdle, Phase::kAfterPreOut);
  // Capacity checks: the text up to ';' is SGLang's.
  if (batch.batch_size > capacities_.write_req_capacity) {
    ThrowError("kv-canary: forward_batch.batch_size=", batch.batch_size,
               " exceeds pre-allocated write_req_capacity=", capacities_.write_req_capacity,
               "; raise cuda_graph_max_bs or the request pool size at install");
  }
  if (batch.num_tokens > capacities_.write_entry_capacity) {
    ThrowError("kv-canary: forward_batch token count=", batch.num_tokens,
               " exceeds pre-allocated write_entry_capacity=", capacities_.write_entry_capacity,
               "; raise max_prefill_tokens or chunked_prefill_size at install");
  }
  CheckHostInput(batch, host);
}

void CanaryManager::Impl::CheckHostInput(const ForwardBatch& batch,
                                         const ForwardHostInput& host) const {
  const TokenTable table = ForwardTokenTable(table_, batch);
  const int64_t width = table.max_seq_len;
  for (size_t r = 0; r < host.prefix_lens.size(); ++r) {
    if (host.prefix_lens[r] > width) {
      ThrowError("kv-canary: prefix_len=", host.prefix_lens[r], " of batch row ", r,
                 " exceeds max_seq_len_per_req=", width);
    }
  }
  if (host.req_pool_indices.size() != host.prefix_lens.size()) {
    ThrowError("kv-canary: host req_pool_indices has ", host.req_pool_indices.size(),
               " rows but prefix_lens has ", host.prefix_lens.size());
  }
  // The host input is the unpadded batch: no more rows than the device batch, whose per-row
  // buffers (the token pool's valid lengths among them) hold batch_size rows at most.
  if (static_cast<int64_t>(host.req_pool_indices.size()) > batch.batch_size) {
    ThrowError("kv-canary: host req_pool_indices has ", host.req_pool_indices.size(),
               " rows, more than the forward's batch_size=", batch.batch_size);
  }
  CheckHostBlocks(table, args_.pool_slot_count, host);
  if (config_.enable_verify_token_assert && !host.req_all_ids_lens.empty()) CheckTokenLists(host);
  if (config_.enable_write_input_assert &&
      (static_cast<int64_t>(host.expected_input_tokens.size()) != batch.num_tokens ||
       host.expected_input_positions.size() != host.expected_input_tokens.size())) {
    ThrowError("kv-canary: fill_expected_inputs: sum(lens)=", host.expected_input_tokens.size(),
               " != num_tokens=", batch.num_tokens,
               " (enable_write_input_assert needs the token oracle's expected inputs)");
  }
}

void CanaryManager::Impl::CheckTokenLists(const ForwardHostInput& host) const {
  const size_t bs = host.req_pool_indices.size();
  if (host.req_all_ids_lens.size() != bs) {
    ThrowError("kv-canary: req_all_ids_lens length ", host.req_all_ids_lens.size(),
               " != batch_size ", bs, "; ForwardBatch snapshot diverged");
  }
  int64_t total = 0;
  for (int64_t len : host.req_all_ids_lens) total += len;
  if (total != static_cast<int64_t>(host.req_all_ids_flat.size())) {
    ThrowError("kv-canary: cumsum(req_all_ids_lens)=", total,
               " != req_all_ids_flat.numel()=", host.req_all_ids_flat.size(),
               "; snapshot inconsistent");
  }
  // UploadTokenPool stages the ids, their offsets and the rows in the sweep's buffer.
  const int64_t rows = static_cast<int64_t>(bs);
  if (total > 0 && total + (rows + 1) + rows > 3 * capacities_.verify_capacity) {
    ThrowError("kv-canary: the step's request token lists (", total,
               " ids) exceed the staging capacity ", 3 * capacities_.verify_capacity);
  }
}

void CanaryManager::Impl::BeginStep(const StepInput& input) {
  const size_t count = input.forwards.size();
  if (count == 0 || count > forwards_.size() || input.host.size() != count) {
    ThrowError("kv-canary: a step needs between 1 and ", forwards_.size(),
               " forwards with one host input each, got ", count, " forwards and ",
               input.host.size(), " host inputs");
  }
  // Every check first: a rejected step changes no phase, buffer or counter, and draws no jitter.
  for (size_t i = 0; i < count; ++i) {
    CheckForwardInput(forwards_[i], input.forwards[i], input.host[i]);
  }
  step_.num_forwards = static_cast<int>(count);
  try {
    for (size_t i = 0; i < count; ++i) StartForward(forwards_[i], input.forwards[i], input.host[i]);
    // The step's jitter ticks reach the device before any of its launches read them.
    if (jitter_) jitter_->StageStep(stream_);
    // Perturbations land before the HEAD split verification reads the prefix.
    if (perturber_) perturber_->BeforeForward();
    RunHeadSplitVerify();
  } catch (...) {
    // An op refused past the checks above (a split range's call): no forward began.
    for (size_t i = 0; i < count; ++i) forwards_[i].phase = Phase::kIdle;
    throw;
  }
  step_.in_step = true;
}

void CanaryManager::Impl::StartForward(ForwardState& forward, const ForwardBatch& batch,
                                       const ForwardHostInput& host) {
  Transition(forward, Phase::kIdle, Phase::kAfterPreOut);
  forward.batch = batch;
  forward.host = host;
  forward.has_batch = true;

  // Expected-token pool.
  forward.has_valid_lens = false;
  if (config_.enable_verify_token_assert && !host.req_all_ids_lens.empty()) {
    const int64_t bs = static_cast<int64_t>(host.req_pool_indices.size());
    std::vector<int64_t> offsets(bs + 1, 0);
    for (int64_t r = 0; r < bs; ++r) offsets[r + 1] = offsets[r] + host.req_all_ids_lens[r];
    UploadTokenPool(forward, offsets);
  }
  // Expected inputs of the write-input assert.
  forward.write_assert = config_.enable_write_input_assert;
  if (forward.write_assert) {
    CopyBytesAsync(forward.expected_tokens.data(), host.expected_input_tokens.data(),
                   8 * batch.num_tokens, device_, stream_);
    CopyBytesAsync(forward.expected_positions.data(), host.expected_input_positions.data(),
                   8 * batch.num_tokens, device_, stream_);
  }
  DecideSplit(forward);
}

void CanaryManager::Impl::UploadTokenPool(ForwardState& forward,
                                          const std::vector<int64_t>& offsets) {
  const ForwardHostInput& host = forward.host;
  const int64_t bs = static_cast<int64_t>(host.req_pool_indices.size());
  // Scatter runs on the device from device copies of the three host arrays; the staging reuses
  // the sweep's buffer, which is free in phase 1.
  const int64_t total = offsets[bs];
  if (total == 0) return;  // CheckHostInput checked that the staging fits the rest
  char* base = static_cast<char*>(sweep_.walk.data());
  CopyBytesAsync(base, host.req_all_ids_flat.data(), 8 * total, device_, stream_);
  CopyBytesAsync(base + 8 * total, offsets.data(), 8 * (bs + 1), device_, stream_);
  CopyBytesAsync(base + 8 * (total + bs + 1), host.req_pool_indices.data(), 8 * bs, device_,
                 stream_);
  ScatterArgs scatter;
  scatter.flat_in = sweep_.walk.View(DType::kInt64, {total}, 0);
  scatter.offsets = sweep_.walk.View(DType::kInt64, {bs + 1}, 8 * total);
  scatter.req_pool_indices = sweep_.walk.View(DType::kInt64, {bs}, 8 * (total + bs + 1));
  scatter.pool_out =
      state_.expected_token_pool.View(DType::kInt32, {table_.rows, token_pool_width_});
  Scatter(scatter, stream_);
  CopyBytesAsync(forward.valid_lens.data(), host.req_all_ids_lens.data(), 8 * bs, device_, stream_);
  forward.has_valid_lens = true;
}

PlanArgs CanaryManager::Impl::PlanArgsOf(const ForwardState& forward, size_t group,
                                         int64_t row_begin, int64_t row_end) const {
  const ForwardBatch& batch = forward.batch;
  const ForwardState::PerGroup& per_group = forward.groups[group];
  PlanArgs plan;
  plan.verify_plan_out = per_group.verify_plan;
  plan.write_plan_out = per_group.write_plan;
  plan.inputs.req_pool_indices = Slice1D(batch.req_pool_indices, row_begin, row_end);
  plan.inputs.prefix_lens = Slice1D(batch.prefix_lens, row_begin, row_end);
  plan.inputs.extend_seq_lens = Slice1D(batch.extend_seq_lens, row_begin, row_end);
  SetPlanTable(ForwardTokenTable(table_, batch), plan.inputs);
  plan.inputs.req_to_token_stride0 = batch.req_to_token_stride0;
  plan.inputs.swa_window_size = groups_[group].window;
  // SWA and compressed groups read their records through their slot table (0 = no record).
  plan.inputs.full_to_swa_index_mapping = SlotTable(groups_[group].spec);
  plan.verify_capacity =
      verify_path_->PlanCapacity(capacities_.verify_capacity, verify_entries_bound_);
  if (forward.has_valid_lens) {
    plan.inputs.req_to_verify_expected_tokens =
        state_.expected_token_pool.View(DType::kInt32, {table_.rows, token_pool_width_});
    plan.inputs.req_to_verify_expected_tokens_valid_lens =
        Slice1D(forward.valid_lens.View(DType::kInt64, {capacities_.write_req_capacity}), row_begin,
                row_end);
  }
  plan.inputs.kv_token_id_vs_position_offset = args_.kv_token_id_vs_position_offset;
  if (config_.verify_sample > 1) {
    plan.inputs.verify_sample = config_.verify_sample;
    plan.inputs.verify_phase = state_.verify_phase.View(DType::kInt64, {table_.rows});
  }
  const int64_t scratch_len = capacities_.write_req_capacity + 1;
  const int64_t scratch_index =
      verify_path_->ScratchesPerForward(static_cast<int64_t>(groups_.size())) > 1
          ? static_cast<int64_t>(group)
          : 0;
  plan.verify_offsets_scratch =
      forward.plan_scratch.View(DType::kInt64, {scratch_len}, 8 * scratch_len * scratch_index);
  return plan;
}

// PreForward and PostForward move the phase after their launches: an op that refuses the batch
// (a column shorter than batch_size, a wrong dtype) leaves the forward where it was, so EndStep
// cannot accept a step whose HEAD or TAIL did not run; AbandonStep starts over.
void CanaryManager::Impl::PreForward(int inner) {
  ForwardState& forward = ForwardAt(inner);
  CheckTransition(forward, Phase::kAfterPreOut, Phase::kAfterPreMaybeIn);
  Jitter(JitterPoint::kPreHead);
  const ForwardBatch& batch = forward.batch;
  for (size_t g = 0; g < groups_.size(); ++g) {
    // The fused path plans inside the HEAD stage: one launch less.
    if (!verify_path_->PlansInStage()) Plan(PlanArgsOf(forward, g, 0, batch.batch_size), stream_);
    const TensorView slot_table = SlotTable(groups_[g].spec);
    if (slot_table.defined()) {
      // A token without a slot in the group (0) is written to the padding slot, never verified.
      SwaTranslateArgs translate;
      translate.slot_indices = Slice1D(batch.out_cache_loc, 0, batch.num_tokens);
      translate.full_to_swa_index_mapping = slot_table;
      translate.out_slot_indices =
          forward.groups[g].swa_slots.View(DType::kInt64, {batch.num_tokens});
      SwaTranslate(translate, stream_);
    }
  }
  LaunchEndpoints(inner, Stage::kHead);
  Jitter(JitterPoint::kPostHead);
  forward.phase = Phase::kAfterPreMaybeIn;
}

void CanaryManager::Impl::PostForward(int inner) {
  ForwardState& forward = ForwardAt(inner);
  CheckTransition(forward, Phase::kAfterPreMaybeIn, Phase::kAfterPostMaybeIn);
  Jitter(JitterPoint::kPostAttn);  // the model has run: no finer hook than this one
  LaunchEndpoints(inner, Stage::kTail);
  Jitter(JitterPoint::kPostTail);
  // Snapshot: later inner forwards overwrite the live plans; phase 4 reads this copy.
  for (size_t g = 0; g < groups_.size(); ++g) {
    CopyBytesAsync(forward.snapshot_enable.data_as<char>() + 4 * g,
                   forward.groups[g].verify_plan.enable.data(), 4, device_, stream_);
  }
  forward.phase = Phase::kAfterPostMaybeIn;
}

std::optional<LaunchContext> CanaryManager::Impl::PairedContextOf(size_t group, Stage stage) const {
  if (!HalfActive(groups_[group], Half::kV)) return std::nullopt;
  return ContextOf(group, stage, Half::kV);
}

void CanaryManager::Impl::VerifyGroup(size_t group, Stage stage, const VerifyPlanView& plan,
                                      bool check_token) {
  VerifyArgs verify;
  verify.context = ContextOf(group, stage, Half::kK);
  verify.plan = plan;
  verify.check_verify_expected_token = check_token;
  verify.paired_context = PairedContextOf(group, stage);
  Verify(verify, stream_);
}

void CanaryManager::Impl::LaunchEndpoints(int inner, Stage stage) {
  ForwardState& forward = ForwardAt(inner);
  const ForwardBatch& batch = forward.batch;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ForwardState::PerGroup& per_group = forward.groups[g];
    WriteArgs write;
    write.context = ContextOf(g, stage, Half::kK);
    write.plan = per_group.write_plan;
    write.input_ids = Slice1D(batch.input_ids, 0, batch.num_tokens);
    write.positions = Slice1D(batch.positions, 0, batch.num_tokens);
    write.out_cache_loc = SlotTable(groups_[g].spec).defined()
                              ? per_group.swa_slots.View(DType::kInt64, {batch.num_tokens})
                              : Slice1D(batch.out_cache_loc, 0, batch.num_tokens);
    write.enable_write_input_assert = forward.write_assert;
    if (forward.write_assert) {
      write.expected_input_tokens = forward.expected_tokens.View(DType::kInt64, {batch.num_tokens});
      write.expected_input_positions =
          forward.expected_positions.View(DType::kInt64, {batch.num_tokens});
    }
    write.paired_context = PairedContextOf(g, stage);
    // An overflowed plan-array step has enable = 0 here: its rows are verified in ranges.
    StageCall call{.plan = PlanArgsOf(forward, g, 0, batch.batch_size),
                   .run_plan = stage == Stage::kHead && verify_path_->PlansInStage(),
                   .context = ContextOf(g, stage, Half::kK),
                   .paired_context = PairedContextOf(g, stage),
                   .check_token = config_.enable_verify_token_assert,
                   .write = write};
    // The forward's last in-graph verify has read its rows' phases: their next forward checks the
    // next 1/K of their prefixes (a TAIL split in phase 4 then samples with the next phases: any
    // phase's sample fits the ranges DecideSplit cut).
    if (stage == Stage::kTail && g + 1 == groups_.size() && config_.verify_sample > 1) {
      call.advance_phase = AdvanceVerifyPhaseArgs{
          .verify_phase = state_.verify_phase.View(DType::kInt64, {table_.rows}),
          .req_pool_indices = Slice1D(batch.req_pool_indices, 0, batch.batch_size)};
    }
    verify_path_->RunStage(call, stream_);
  }
}

void CanaryManager::Impl::EndStep() {
  if (!step_.in_step) ThrowError("kv-canary: end_step called without begin_step");
  // Every forward's phase first: a refused end_step leaves the step as it was, to be ended.
  for (int i = 0; i < step_.num_forwards; ++i) {
    CheckTransition(forwards_[i], Phase::kAfterPostMaybeIn, Phase::kIdle);
  }
  step_.in_step = false;
  for (int i = 0; i < step_.num_forwards; ++i) {
    ForwardState& forward = forwards_[i];
    Transition(forward, Phase::kAfterPostMaybeIn, Phase::kIdle);
    TickOverflowWarner(forward);
    RunSplitVerify(forward, Stage::kTail);
  }
  // After TAIL stored the fingerprints: the next step's TAIL must catch this flip.
  if (perturber_) perturber_->AfterForward();
  // The sweep walks the engine's radix view: if the view throws, the step still ends (its count,
  // report and checks) before the error reaches the engine.
  std::exception_ptr sweep_error;
  try {
    MaybeSweep();
  } catch (...) {
    sweep_error = std::current_exception();
  }
  if (config_.on_violation == OnViolation::kQuarantine) RecordStepForQuarantine();
  step_.outer += 1;
  PumpViolations();
  PumpRankSignal();
  CheckHealth();
  LogStats();
  ReportSwaDivergence();
  if (sweep_error) std::rethrow_exception(sweep_error);
}

void CanaryManager::Impl::Jitter(JitterPoint point, bool launch) {
  if (!jitter_) return;
  if (launch) jitter_->Launch(point, stream_);
  const int64_t ticks = jitter_->step_cycles()[static_cast<int>(point)];
  if (ticks > 0) {
    Emit({.kind = std::string("jitter_") + JitterPointName(point),
          .step = step_.outer,
          .replacement = ticks});
  }
}

ForwardState& CanaryManager::Impl::ForwardAt(int inner) {
  if (inner < 0 || inner >= step_.num_forwards) {
    ThrowError("kv-canary: inner forward ", inner, " is not active in this step (",
               step_.num_forwards, " forwards began)");
  }
  return forwards_[inner];
}

}  // namespace kvcanary::runtime
