// The scheduler's KV space: how a request gets its allocation units (slots, or blocks in the
// paged layout) and its table entries, and how it gives them back when it finishes or is
// aborted. Scheduling itself is in scheduler.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim/scheduler.h"

namespace kvcanary::sim {

std::optional<std::vector<int64_t>> Scheduler::AllocateSlots(int64_t n) {
  if (allocator_.NumFree() < n) {
    const int64_t tokens = (n - allocator_.NumFree()) * options_.block_size;
    std::vector<int64_t> evicted = cache_.Evict(tokens, on_evict_);
    stats_.evicted_tokens += static_cast<int64_t>(evicted.size());
    allocator_.Free(WholeBlocksOf(evicted, options_.block_size));
  }
  return allocator_.Allocate(n);
}

std::optional<std::vector<int64_t>> Scheduler::Grow(Request& req, int64_t n) {
  const int64_t bs = options_.block_size;
  const auto have = static_cast<int64_t>(req.slots.size());
  std::optional<std::vector<int64_t>> units = AllocateSlots(Units(have + n) - Units(have));
  if (!units) return std::nullopt;
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int64_t pos = have; pos < have + n; ++pos) {
    // A position in the last block already held continues it; the others start new units.
    const int64_t index = pos / bs;
    const int64_t block =
        index < Units(have) ? req.slots[index * bs] / bs : (*units)[index - Units(have)];
    slots[pos - have] = block * bs + pos % bs;
  }
  Place(req, have, slots);
  req.slots.insert(req.slots.end(), slots.begin(), slots.end());
  return slots;
}

void Scheduler::Place(const Request& req, int64_t pos, const std::vector<int64_t>& slots) {
  table_.SetRange(req.row, pos, slots);
  if (blocks_ == nullptr) return;
  const int64_t bs = options_.block_size;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t at = pos + static_cast<int64_t>(i);
    if (at % bs == 0) blocks_->Set(req.row, at / bs, slots[i] / bs);
  }
}

void Scheduler::ReleaseRow(Request& req) {
  if (row_release_delay_ > 0) {
    rows_to_release_.emplace_back(req.row, row_release_delay_);
  } else {
    if (blocks_ != nullptr) blocks_->ClearRow(req.row);
    table_.FreeRow(req.row);
  }
  req.row = 0;
}

void Scheduler::ReleaseDueRows() {
  for (auto it = rows_to_release_.begin(); it != rows_to_release_.end();) {
    if (--it->second > 0) {
      ++it;
      continue;
    }
    if (blocks_ != nullptr) blocks_->ClearRow(it->first);
    table_.FreeRow(it->first);
    it = rows_to_release_.erase(it);
  }
}

void Scheduler::Retire(Request& req) {
  // As SGLang's cache_finished_req: the KV of tokens [0, L-1) exists (the last sampled token was
  // never fed back), so that is what the cache learns.
  const std::vector<int64_t> key(req.tokens.begin(), req.tokens.end() - 1);
  if (req.slots.size() != key.size()) {
    throw std::logic_error("kv-canary sim: request " + std::to_string(req.spec.id) + " has " +
                           std::to_string(req.slots.size()) + " slots for " +
                           std::to_string(key.size()) + " positions at finish");
  }
  // Paged: only whole blocks are cached; the partly filled last block is the request's own.
  const int64_t bs = options_.block_size;
  const size_t whole = key.size() / static_cast<size_t>(bs) * static_cast<size_t>(bs);
  std::vector<int64_t> freed = WholeBlocksOf(
      cache_.Insert(std::vector<int64_t>(key.begin(), key.begin() + whole),
                    std::vector<int64_t>(req.slots.begin(), req.slots.begin() + whole)),
      bs);
  if (whole < key.size()) freed.push_back(req.slots[whole] / bs);
  allocator_.Free(freed);
  cache_.Unlock(req.lock_node);
  ReleaseRow(req);
  stats_.finished += 1;
}

std::optional<Request*> Scheduler::AdmitPrefilled(const RequestSpec& spec,
                                                  std::vector<int64_t> tokens, int64_t step) {
  // PD runs per token (ValidateOptions refuses --pd with --block-size): units are slots here.
  auto req = std::make_unique<Request>();
  req->spec = spec;
  req->tokens = std::move(tokens);
  req->output.assign(req->tokens.begin() + static_cast<int64_t>(spec.prompt.size()),
                     req->tokens.end());
  const int64_t prompt_len = static_cast<int64_t>(spec.prompt.size());
  if (static_cast<int64_t>(running_.size()) >= options_.max_running_reqs ||
      KvTotal(*req) > allocator_.NumFree() + cache_.EvictableTokens() - Reserved()) {
    return std::nullopt;
  }
  const std::optional<int64_t> row = table_.AllocateRow();
  if (!row) return std::nullopt;
  std::optional<std::vector<int64_t>> slots = AllocateSlots(prompt_len);
  if (!slots) {
    table_.FreeRow(*row);
    return std::nullopt;
  }
  req->row = *row;
  table_.SetRange(req->row, 0, *slots);
  req->slots = std::move(*slots);
  req->kv_len = prompt_len;
  req->prefill_done = true;
  req->admit_step = step;
  req->first_token_step = step;
  stats_.admitted += 1;
  running_.push_back(std::move(req));
  return running_.back().get();
}

void Scheduler::ReleaseKv(Request& req, const std::vector<int64_t>& keep) {
  // The cached prefix stays with the cache (only unlocked); the request's own units are freed,
  // except those a fault handed to someone else.
  std::vector<int64_t> owned;
  for (size_t pos = static_cast<size_t>(req.cached_len); pos < req.slots.size(); ++pos) {
    const int64_t unit = req.slots[pos] / options_.block_size;
    if (std::find(keep.begin(), keep.end(), unit) != keep.end()) continue;
    if (std::find(owned.begin(), owned.end(), unit) != owned.end()) continue;
    if (allocator_.IsFree(unit)) continue;
    owned.push_back(unit);
  }
  allocator_.Free(owned);
  cache_.Unlock(req.lock_node);
  ReleaseRow(req);
}

std::vector<std::unique_ptr<Request>>::iterator Scheduler::FindRunning(const Request* req) {
  auto it = std::find_if(running_.begin(), running_.end(),
                         [req](const std::unique_ptr<Request>& r) { return r.get() == req; });
  if (it == running_.end()) throw std::logic_error("kv-canary sim: request not running");
  return it;
}

void Scheduler::Abort(Request* req, const std::vector<int64_t>& keep) {
  auto it = FindRunning(req);
  ReleaseKv(*req, keep);
  req->finished = true;
  stats_.aborted += 1;
  running_.erase(it);
}

void Scheduler::Requeue(Request* req, const std::vector<int64_t>& keep, int64_t keep_outputs) {
  auto it = FindRunning(req);
  ReleaseKv(*req, keep);
  std::unique_ptr<Request> owned = std::move(*it);
  running_.erase(it);
  RequeueReleased(std::move(owned), keep_outputs);
}

void Scheduler::Resubmit(std::unique_ptr<Request> req, int64_t keep_outputs) {
  RequeueReleased(std::move(req), keep_outputs);
}

void Scheduler::RequeueReleased(std::unique_ptr<Request> req, int64_t keep_outputs) {
  // At least one output is left to produce: a request queued again with every output it may have
  // would prefill past max_new_tokens (or the context, or a prefill-only request's prompt).
  const auto prompt = static_cast<int64_t>(req->spec.prompt.size());
  const int64_t most = options_.prefill_only
                           ? 0
                           : std::min(req->spec.max_new_tokens, options_.max_context_len - prompt) - 1;
  const auto kept = std::clamp<int64_t>(
      keep_outputs, 0, std::min(static_cast<int64_t>(req->output.size()), most));
  req->output.resize(static_cast<size_t>(kept));
  req->tokens = req->spec.prompt;
  req->tokens.insert(req->tokens.end(), req->output.begin(), req->output.end());
  req->row = 0;
  req->slots.clear();
  req->cached_len = 0;
  req->host_restored_len = 0;
  req->kv_len = 0;
  req->lock_node = RadixCache::kRoot;
  req->prefill_done = false;
  req->finished = false;
  req->finish_step = -1;
  req->recomputed += 1;
  stats_.requeued += 1;
  waiting_.push_front(std::move(req));
}

}  // namespace kvcanary::sim
