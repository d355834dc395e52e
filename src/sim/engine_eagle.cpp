// Speculative decoding, EAGLE-style (--draft-forwards D > 1). A decode step runs D inner forwards:
// forward 0 is the plain decode (it writes the accepted token at position L - 1 and samples the
// token of L), forward j >= 1 writes draft j - 1 of every drafting request at position L - 1 + j.
// The canary sees one StepInput of D forwards, so forward j's verify reads the drafts forwards
// 1..j-1 wrote in the same step, and its write chains from them.
//
// The draft model guesses the oracle's next token with a seeded hit rate. After sampling, the
// oracle model run on the pool (the target) accepts the drafts while they equal its own tokens;
// the accepted drafts' KV stays, the target's token after the last accepted one is the bonus, and
// the rejected drafts' slots and table entries are freed.
#include <algorithm>
#include <chrono>

#include "kvcanary/checked.h"
#include "sim/engine.h"

namespace kvcanary::sim {
namespace {

// Columns of a draft forward's inputs, as engine.cpp lays out forward 0's.
enum DraftColumn { kRows, kPrefix, kExtend, kIds, kPositions, kSlots, kNumColumns };

// The chance the draft model proposes the oracle's token: with two drafts per step, both are
// accepted about half the time.
constexpr double kDraftHitRate = 0.7;

// Draft forwards the step runs: as many as the longest request's drafts.
int64_t DraftDepth(const std::vector<DraftRow>& drafts) {
  int64_t depth = 0;
  for (const DraftRow& draft : drafts) {
    depth = std::max<int64_t>(depth, static_cast<int64_t>(draft.slots.size()));
  }
  return depth;
}

// The draft forwards' input columns: [D - 1, kNumColumns, rows] int64.
runtime::DeviceBuffer DraftBuffer(Device device, int64_t draft_forwards, int64_t rows) {
  return runtime::DeviceBuffer(
      device, CheckedMul("draft buffer bytes", 8 * kNumColumns, draft_forwards - 1, rows));
}

double SecondsOf(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void Engine::DescribeDraftForwards(runtime::InstallArgs& args) const {
  if (options_.draft_forwards <= 1) return;
  args.num_inner_forwards = static_cast<int>(options_.draft_forwards);
  args.speculative_num_draft_tokens = options_.draft_forwards - 1;
}

void Engine::ProposeDrafts(const Batch& batch, EngineHooks& hooks) {
  drafts_.clear();
  if (batch.kind != Batch::kDecode || options_.draft_forwards <= 1) return;
  if (draft_buffer_.data() == nullptr) {  // the first drafts of the run
    draft_buffer_ = DraftBuffer(device_, options_.draft_forwards, table_->num_rows());
    draft_rng_.seed(options_.seed * 0xD1B54A32D192ED03ull + 5);
  }
  std::bernoulli_distribution guesses_right(kDraftHitRate);
  for (const BatchRow& row : batch.rows) {
    if (!row.produces_token) continue;
    Request& req = *row.req;
    const int64_t start = req.seq_len();
    // The accepted drafts and the bonus never finish the request nor fill its context: it
    // finishes through a plain decode, within the slots admission control planned for it.
    const int64_t count =
        std::min({options_.draft_forwards - 1, options_.max_context_len - start - 2,
                  req.spec.max_new_tokens - static_cast<int64_t>(req.output.size()) - 2});
    if (count <= 0) continue;
    std::optional<std::vector<int64_t>> slots = scheduler_->AllocateSlots(count);
    if (!slots) continue;
    DraftRow draft{&req, start, *slots, {}, {}};
    ExpectedState& truth = ExpectedFor(req);
    OracleToken(req, truth, start);  // folds the request's tokens up to `start`
    ExpectedState guess = truth;
    int64_t query = req.tokens[start - 1];
    for (int64_t j = 0; j < count; ++j) {
      const int64_t right = guess.NextToken(query);
      const int64_t wrong = right % (oracle_.vocab_size() - 1) + 1;  // another token in [1, V)
      query = guesses_right(draft_rng_) ? right : wrong;
      guess.Append(query);  // the draft model continues from its own guess
      draft.tokens.push_back(query);
      draft.positions.push_back(start + j);
      table_->Set(req.row, start + j, draft.slots[j]);
    }
    drafts_.push_back(std::move(draft));
  }
  hooks.OnDrafts(*this, drafts_);
}

void Engine::DescribeDrafts(runtime::StepInput& input) {
  const int64_t rows = table_->num_rows();
  for (int64_t j = 0; j < DraftDepth(drafts_); ++j) {
    std::vector<int64_t> columns[kNumColumns];
    runtime::ForwardHostInput host;
    for (const DraftRow& draft : drafts_) {
      if (j >= static_cast<int64_t>(draft.slots.size())) continue;
      const int64_t values[kNumColumns] = {draft.req->row,  draft.start + j,    1,
                                           draft.tokens[j], draft.positions[j], draft.slots[j]};
      for (int c = 0; c < kNumColumns; ++c) columns[c].push_back(values[c]);
      // The write-input assert expects what the draft model proposed, where it should go.
      host.expected_input_tokens.push_back(draft.tokens[j]);
      host.expected_input_positions.push_back(draft.start + j);
    }
    host.req_pool_indices = columns[kRows];
    host.prefix_lens = columns[kPrefix];
    host.extend_seq_lens = columns[kExtend];
    runtime::ForwardBatch forward;
    forward.batch_size = static_cast<int64_t>(columns[kRows].size());
    forward.num_tokens = forward.batch_size;
    TensorView* views[kNumColumns] = {&forward.req_pool_indices, &forward.prefix_lens,
                                      &forward.extend_seq_lens,  &forward.input_ids,
                                      &forward.positions,        &forward.out_cache_loc};
    for (int c = 0; c < kNumColumns; ++c) {
      const int64_t offset = 8 * rows * (kNumColumns * j + c);
      runtime::CopyBytesAsync(draft_buffer_.data_as<char>() + offset, columns[c].data(),
                              8 * forward.batch_size, device_, stream_->handle());
      *views[c] = draft_buffer_.View(DType::kInt64, {rows}, offset);
    }
    // The draft forwards read the table the decode's forward reads.
    forward.req_to_token = input.forwards[0].req_to_token;
    forward.req_to_token_stride0 = input.forwards[0].req_to_token_stride0;
    input.forwards.push_back(forward);
    input.host.push_back(host);
  }
}

double Engine::RunDraftForwards() {
  double canary_seconds = 0;
  for (int64_t j = 0; j < DraftDepth(drafts_); ++j) {
    const int inner = static_cast<int>(j + 1);
    if (canary_) canary_seconds += SecondsOf([&] { canary_->PreForward(inner); });
    for (const DraftRow& draft : drafts_) {
      if (j >= static_cast<int64_t>(draft.slots.size())) continue;
      pool_->WriteToken(draft.slots[j], draft.tokens[j], draft.positions[j]);
      slot_contents_[draft.slots[j]] = {draft.tokens[j], draft.positions[j]};
    }
    if (canary_) canary_seconds += SecondsOf([&] { canary_->PostForward(inner); });
  }
  return canary_seconds;
}

void Engine::AcceptDrafts() {
  for (const DraftRow& draft : drafts_) {
    Request& req = *draft.req;
    const int64_t count = static_cast<int64_t>(draft.slots.size());
    // Draft 0 guessed the token the decode just sampled; each later draft must equal the
    // target's token after the drafts before it, read from the pool as attention reads it.
    std::vector<int64_t> appended;
    int64_t accepted = draft.tokens[0] == req.tokens[draft.start] ? 1 : 0;
    const int32_t* slot_row = table_->HostRow(req.row);
    for (int64_t j = 1; accepted == j && j <= count; ++j) {
      const int64_t target =
          oracle_.NextTokenFromPool(*pool_, slot_row, draft.start + j, draft.tokens[j - 1]);
      appended.push_back(target);  // an accepted draft's token, or the bonus after the last one
      if (j < count && draft.tokens[j] == target) accepted = j + 1;
    }
    std::vector<int64_t> rejected(draft.slots.begin() + accepted, draft.slots.end());
    for (int64_t j = accepted; j < count; ++j) table_->Set(req.row, draft.start + j, 0);
    allocator_->Free(rejected);
    req.slots.insert(req.slots.end(), draft.slots.begin(), draft.slots.begin() + accepted);
    req.kv_len = draft.start + accepted;
    for (int64_t token : appended) {
      SampledToken sampled{&req, req.seq_len(), token, 0};
      sampled.expected = OracleToken(req, ExpectedFor(req), req.seq_len());
      if (sampled.actual != sampled.expected) stats_.oracle_mismatches += 1;
      last_sampled_.push_back(sampled);
      req.tokens.push_back(token);
      req.output.push_back(token);
    }
    if (!appended.empty()) last_true_sample_[req.spec.id] = appended.back();
    stats_.tokens_generated += static_cast<int64_t>(appended.size());
  }
  drafts_.clear();
}

}  // namespace kvcanary::sim
