#include "sim/engine.h"

#include <algorithm>
#include <chrono>

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/hash.h"
#include "kvcanary/runtime/config.h"
#include "sim/kv_bytes.h"

namespace kvcanary::sim {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The table lives in a wider parent (a data-parallel shard), so a hard-coded row stride is a
// real bug the plan op can catch (the stride_view fault).
constexpr int64_t kShardPadding = 64;

// Columns of the forward-input buffer.
enum Column { kRows, kPrefix, kExtend, kIds, kPositions, kSlots, kNumColumns };

// The layer count as the pool and the oracle take it; a count past int refused, not truncated.
int LayersOf(const SimOptions& options) {
  return CheckedNarrow<int>("num_layers", options.num_layers);
}

runtime::Config CanaryConfig(const SimOptions& options) {
  runtime::Config config;
  config.mode = runtime::ParseMode(options.mode);
  config.real_data = runtime::ParseRealData(options.real_data);
  config.on_violation = runtime::ParseOnViolation(options.on_violation);
  config.fingerprint_layers = runtime::ParseFingerprintLayers(options.fingerprint_layers);
  config.sweep_interval = config.mode == runtime::Mode::kNone ? 0 : options.sweep_interval;
  config.ring_capacity = options.ring_capacity;
  config.verify_sample = options.verify_sample;
  config.jitter_enabled = options.jitter;
  config.jitter_max_cycles = options.jitter_max_cycles;
  config.jitter_seed = options.seed;
  config.stats_print_every_n_steps = 100;
  config.enable_write_input_assert = true;
  config.enable_mha_v = true;
  return config;
}

}  // namespace

Engine::Engine(const SimOptions& options, std::string name, runtime::LogSink* log,
               EngineRole role)
    : options_(options),
      name_(std::move(name)),
      device_(options.device == "cuda" ? Device::CUDA(0) : Device::CPU()),
      oracle_(LayersOf(options), options.bytes_per_token, options.vocab_size) {
  stream_ = std::make_unique<runtime::OwnedStream>(device_);
  const StreamHandle stream = stream_->handle();
  pool_ = std::make_unique<KvPool>(device_, options.num_slots, LayersOf(options),
                                   options.bytes_per_token, stream);
  table_ = std::make_unique<ReqToTokenTable>(device_, options.max_running_reqs,
                                             options.max_context_len, stream,
                                             options.max_context_len + kShardPadding);
  // Paged: blocks are the allocation unit, and the cache shares whole blocks.
  const int64_t unit = std::max<int64_t>(options.block_size, 1);
  allocator_ = std::make_unique<SlotAllocator>(options.num_slots / unit);
  radix_ = std::make_unique<RadixCache>(unit);
  radix_->SetSlotDependentRecords(options.compress_ratio > 1);
  SchedulerOptions scheduler_options;
  scheduler_options.max_running_reqs = options.max_running_reqs;
  scheduler_options.chunk_size = options.chunk_size;
  scheduler_options.prefill_token_budget = options.prefill_token_budget;
  scheduler_options.max_context_len = options.max_context_len;
  scheduler_options.prefill_only = role == EngineRole::kPrefill;
  scheduler_options.reuse_prefix = options.swa_window == 0;
  scheduler_options.block_size = unit;
  role_ = role;
  scheduler_ = std::make_unique<Scheduler>(scheduler_options, *allocator_, *table_, *radix_);
  if (options.block_size > 0) {
    blocks_ = std::make_unique<BlockTable>(device_, table_->num_rows(),
                                           BlocksSpanning(options.max_context_len, unit), unit,
                                           stream);
    scheduler_->SetBlockTable(blocks_.get());
  }

  slot_contents_.assign(options.num_slots, {0, 0});
  token_capacity_ = CheckedAdd("batch token capacity",
                               std::max(options.prefill_token_budget, options.max_running_reqs), 1);
  batch_buffer_ = runtime::DeviceBuffer(
      device_, CheckedMul("batch buffer bytes", 8, kNumColumns, token_capacity_));

  if (options.host_tier) {
    radix_->EnableHostTier(true);
    host_kv_.resize(options.host_slots);
    host_contents_.resize(options.host_slots);
    for (int64_t h = options.host_slots - 1; h >= 0; --h) host_free_.push_back(h);
    if (options.l3_slots > 0) l3_ = std::make_unique<L3Tier>(options.host_slots + options.l3_slots);
    scheduler_->SetEvictCallback(
        [this](RadixCache::NodeId, const std::vector<int64_t>& device) { return BackupToHost(device); });
    scheduler_->SetRestoreCallback([this](RadixCache::NodeId, const std::vector<int64_t>& host,
                                          const std::vector<int64_t>& device) {
      RestoreFromHost(host, device);
    });
  }

  canary_ = runtime::CanaryManager::Install(CanaryConfig(options), InstallArgsFor(log));
  if (canary_ && options.on_violation == "quarantine" && role != EngineRole::kPrefill) {
    // Tokens wait for their verdict, and a request's row stays as it was until the report that
    // may name it (one step after its last forward) has been read.
    // With sampled verify a finished request's tokens wait for the verification of its slots
    // run after its last forward (VerifyRecordsNow), reported one step later.
    held_ = std::make_unique<HeldTokens>(QuarantineHoldBack(options),
                                         options.verify_sample > 1 ? 1 : 0);
    scheduler_->SetRowReleaseDelay(2);
  }
  if (canary_) {
    canary_->MarkInitFinished();
    canary_->AttachRadixCache(radix_.get());
    canary_->SetViolationListener([this](const runtime::ViolationRow& row, int64_t) {
      violations_.push_back(
          ReportedViolation{row, stats_.steps, runtime::FormatViolationFirstLine(row)});
    });
  }
}

Engine::~Engine() = default;

runtime::InstallArgs Engine::InstallArgsFor(runtime::LogSink* log) {
  runtime::InstallArgs args;
  args.device = device_;
  args.stream = stream_->handle();
  runtime::GroupSpec full;
  full.kind = runtime::GroupKind::kFull;
  full.num_slots = options_.num_slots;
  full.bytes_per_token = options_.bytes_per_token;
  if (blocks_) {
    args.block_table = blocks_->View();
    args.block_size = blocks_->block_size();
    DescribePagedPool(full);
  } else {
    args.req_to_token = table_->View();
    DescribePerTokenPool(full);
  }
  DescribePoolKind(full);
  full.host_slots = options_.host_tier ? options_.host_slots : 0;
  args.groups = {full};
  if (options_.swa_window > 0) {
    swa_ = std::make_unique<SwaState>(device_, options_.num_slots, options_.swa_num_slots,
                                      LayersOf(options_), options_.bytes_per_token,
                                      options_.swa_window, stream_->handle());
    runtime::GroupSpec swa;
    swa.kind = runtime::GroupKind::kSwa;
    swa.num_slots = options_.swa_num_slots;
    swa.k_layer0 = swa_->pool().Layer(0, 0);
    swa.v_layer0 = swa_->pool().Layer(0, 1);
    swa.bytes_per_token = options_.bytes_per_token;
    swa.full_to_swa = swa_->LutView();
    args.groups.push_back(swa);
    args.swa_window_size = options_.swa_window;
  }
  args.pool_slot_count = options_.num_slots;
  args.max_prefill_tokens = token_capacity_;
  DescribeDraftForwards(args);
  args.log = log;
  return args;
}


void Engine::DescribeForward(const Batch& batch, const ForwardView& view,
                             runtime::StepInput& input) {
  runtime::ForwardHostInput host;
  std::vector<int64_t> ids, slots;
  size_t token = 0;
  for (const BatchRow& row : batch.rows) {
    host.req_pool_indices.push_back(row.row);
    host.prefix_lens.push_back(row.prefix_len);
    host.extend_seq_lens.push_back(row.extend_len);
    for (int64_t i = 0; i < row.extend_len; ++i) {
      const int64_t pos = row.prefix_len + i;
      ids.push_back(row.req->tokens[pos]);
      slots.push_back(view.out_cache_loc[token++]);
      // The write-input assert compares with what the sampler produced, not with what the
      // scheduler fed back: the two differ exactly when the feedback path is broken.
      int64_t expected = row.req->tokens[pos];
      const auto sampled = last_true_sample_.find(row.req->spec.id);
      if (pos == row.req->seq_len() - 1 && sampled != last_true_sample_.end() &&
          pos >= static_cast<int64_t>(row.req->spec.prompt.size())) {
        expected = sampled->second;
      }
      host.expected_input_tokens.push_back(expected);
      host.expected_input_positions.push_back(pos);
    }
  }
  const int64_t bs = static_cast<int64_t>(batch.rows.size());
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n + 1 > token_capacity_ || bs + 1 > token_capacity_) {
    ThrowError("kv-canary sim: ", name_, " batch of ", n, " tokens exceeds the engine's ",
               token_capacity_ - 1);
  }
  const std::vector<int64_t>* columns[kNumColumns] = {
      &host.req_pool_indices, &host.prefix_lens, &host.extend_seq_lens, &ids, &view.positions,
      &slots};
  runtime::ForwardBatch forward;
  forward.batch_size = bs;
  forward.num_tokens = n;
  TensorView* views[kNumColumns] = {&forward.req_pool_indices, &forward.prefix_lens,
                                    &forward.extend_seq_lens, &forward.input_ids,
                                    &forward.positions, &forward.out_cache_loc};
  for (int c = 0; c < kNumColumns; ++c) {
    const int64_t offset = 8 * c * token_capacity_;
    runtime::CopyBytesAsync(batch_buffer_.data_as<char>() + offset, columns[c]->data(),
                            8 * static_cast<int64_t>(columns[c]->size()), device_,
                            stream_->handle());
    *views[c] = batch_buffer_.View(DType::kInt64, {token_capacity_}, offset);
  }
  if (blocks_) {
    DescribeBlocks(batch, forward, host);
  } else {
    forward.req_to_token = view.table_stride == table_->row_pitch()
                               ? table_->View()
                               : table_->ViewWithRowStride(view.table_stride);
    forward.req_to_token_stride0 = view.stride0;
  }
  input.forwards = {forward};
  input.host = {host};
  DescribeDrafts(input);
}

void Engine::RunModel(const Batch& batch, const ForwardView& view) {
  // The forward writes the KV of every new token at the position it was given.
  int64_t token = 0;
  for (const BatchRow& row : batch.rows) {
    for (int64_t i = 0; i < row.extend_len; ++i, ++token) {
      const int64_t slot = view.out_cache_loc[token];
      WriteTokenKv(slot, row.req->tokens[row.prefix_len + i], view.positions[token]);
      slot_contents_[slot] = {row.req->tokens[row.prefix_len + i], view.positions[token]};
    }
  }
  // Attention reads every prefix slot through req_to_token (with the stride the engine uses).
  pool_->FetchToHost();
  last_sampled_.clear();
  for (const BatchRow& row : batch.rows) {
    if (!row.produces_token) continue;
    const int64_t seq_len = row.prefix_len + row.extend_len;
    const int64_t query = row.req->tokens[seq_len - 1];
    const int32_t* slot_row = table_->HostData() + row.row * view.table_stride;
    SampledToken sampled;
    sampled.req = row.req;
    sampled.position = seq_len;
    sampled.expected = OracleToken(*row.req, ExpectedFor(*row.req), seq_len);
    if (swa_) {
      // Hybrid model: full layers attend to everything, sliding-window layers to the last W.
      const uint64_t actual = oracle_.HashFromPool(*pool_, slot_row, seq_len, query) ^
                              Splitmix64(SwaHash(slot_row, seq_len, query));
      sampled.actual = oracle_.TokenOf(actual);
    } else {
      sampled.actual = oracle_.NextTokenFromPool(*pool_, slot_row, seq_len, query);
    }
    if (sampled.actual != sampled.expected) stats_.oracle_mismatches += 1;
    last_sampled_.push_back(sampled);
  }
}

bool Engine::Step(int64_t step, EngineHooks& hooks) {
  const auto step_start = Clock::now();
  double canary_seconds = 0;
  auto timed = [&](auto&& call) {
    const auto start = Clock::now();
    call();
    canary_seconds += SecondsSince(start);
  };
  hooks_ = &hooks;
  Batch batch = scheduler_->Schedule(step);
  if (l3_) {
    ReleaseTierIds(radix_->TakeReleasedHostSlots());
  } else {
    for (int64_t host_slot : radix_->TakeReleasedHostSlots()) host_free_.push_back(host_slot);
  }
  if (batch.kind == Batch::kPoolTooSmall) {
    throw UsageError("pool too small: " + batch.reason);
  }
  if (batch.kind == Batch::kIdle) {
    if (canary_) Drain(1);
    return false;
  }
  ForwardView view;
  for (const BatchRow& row : batch.rows) {
    for (int64_t i = 0; i < row.extend_len; ++i) view.positions.push_back(row.prefix_len + i);
    view.out_cache_loc.insert(view.out_cache_loc.end(), row.new_slots.begin(), row.new_slots.end());
  }
  view.table_stride = table_->row_pitch();
  view.stride0 = table_->row_pitch();
  hooks.BeforeForward(*this, batch, view);
  if (swa_) {
    // New tokens get their SWA slots before the canary reads the full->SWA table.
    int64_t token = 0;
    for (const BatchRow& row : batch.rows) {
      for (int64_t i = 0; i < row.extend_len; ++i, ++token) {
        swa_->Assign(row.req->spec.id, row.prefix_len + i, view.positions[token],
                     row.new_slots[i], row.req->tokens[row.prefix_len + i]);
      }
    }
    swa_->Upload();
  }
  if (blocks_) {
    DeriveReqToToken(batch);
    blocks_->Upload();
  }
  ProposeDrafts(batch, hooks);
  table_->Upload();
  runtime::StepInput input;
  DescribeForward(batch, view, input);
  const int64_t outer = canary_ ? canary_->outer_step() : 0;
  if (held_) RecordRowOwners(batch, outer);
  if (canary_) {
    timed([&] {
      // The plan op may refuse the forward in phase 1 (split verification plans there) or 2.
      try {
        canary_->BeginStep(input);
        canary_->PreForward(0);
      } catch (const Error& error) {
        if (!hooks.OnApiError(*this, error.what())) throw;
        // Fall back to the table's real stride and describe the forward again.
        canary_->AbandonStep();
        view.stride0 = table_->row_pitch();
        DescribeForward(batch, view, input);
        canary_->BeginStep(input);
        canary_->PreForward(0);
      }
    });
  }
  RunModel(batch, view);
  if (canary_) timed([&] { canary_->PostForward(0); });
  canary_seconds += RunDraftForwards();
  hooks.AfterForward(*this, batch);
  if (canary_) timed([&] { canary_->EndStep(); });

  std::vector<int64_t> sampled;
  for (const SampledToken& token : last_sampled_) {
    sampled.push_back(token.actual);
    last_true_sample_[token.req->spec.id] = token.actual;
  }
  hooks.OnSampled(*this, batch, sampled);
  stats_.tokens_generated += static_cast<int64_t>(sampled.size());
  if (role_ == EngineRole::kPrefill) {
    // The prompt's KV leaves before Complete hands its slots to the radix cache.
    size_t next = 0;
    for (const BatchRow& row : batch.rows) {
      if (row.produces_token) transfers_.push_back(BuildTransfer(*row.req, sampled[next++]));
    }
  }
  std::vector<std::unique_ptr<Request>> done = scheduler_->Complete(batch, sampled);
  // Complete has handed the finished requests' slots to the cache and freed the duplicates, but
  // nothing allocates before this verification runs: none of those slots is written again first.
  if (held_ && options_.verify_sample > 1) VerifyFinishedSlots(done);
  AcceptDrafts();
  if (held_) HoldSampled(batch, sampled, outer, done);
  for (std::unique_ptr<Request>& req : done) {
    ForgetRequest(req->spec.id);
    Finish(std::move(req));
  }
  if (swa_) {
    // Tokens that left every window give their SWA slot back.
    for (const auto& req : scheduler_->running()) {
      swa_->ReleaseBefore(req->spec.id, req->kv_len - options_.swa_window);
    }
  }
  if (held_) AfterVerdict(outer);
  stats_.steps += 1;
  stats_.canary_seconds += canary_seconds;
  stats_.step_seconds += SecondsSince(step_start);
  return true;
}

void Engine::Drain(int steps) {
  if (!canary_) return;
  for (int i = 0; i < steps; ++i) {
    runtime::StepInput input;
    runtime::ForwardBatch forward;
    forward.req_pool_indices = batch_buffer_.View(DType::kInt64, {0});
    forward.prefix_lens = forward.req_pool_indices;
    forward.extend_seq_lens = forward.req_pool_indices;
    forward.input_ids = forward.req_pool_indices;
    forward.positions = forward.req_pool_indices;
    forward.out_cache_loc = forward.req_pool_indices;
    input.forwards = {forward};
    input.host = {runtime::ForwardHostInput{}};
    const int64_t outer = canary_->outer_step();
    canary_->BeginStep(input);
    canary_->PreForward(0);
    canary_->PostForward(0);
    canary_->EndStep();
    if (held_) AfterVerdict(outer);
  }
}

}  // namespace kvcanary::sim
