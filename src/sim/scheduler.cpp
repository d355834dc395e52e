#include "sim/scheduler.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kvcanary/error.h"

namespace kvcanary::sim {

void SchedulerOptions::Validate() const {
  auto positive = [](const char* name, int64_t value) {
    if (value < 1) ThrowError("kv-canary sim: ", name, ": expected >= 1, got ", value);
  };
  positive("max_running_reqs", max_running_reqs);
  positive("chunk_size", chunk_size);
  positive("prefill_token_budget", prefill_token_budget);
  positive("block_size", block_size);
  if (max_context_len < 2) {
    ThrowError("kv-canary sim: max_context_len: expected >= 2, got ", max_context_len);
  }
}

int64_t Batch::NumTokens() const {
  int64_t n = 0;
  for (const BatchRow& row : rows) n += row.extend_len;
  return n;
}

int64_t Batch::NumProducing() const {
  return std::count_if(rows.begin(), rows.end(),
                       [](const BatchRow& row) { return row.produces_token; });
}

Scheduler::Scheduler(const SchedulerOptions& options, SlotAllocator& allocator,
                     ReqToTokenTable& table, RadixCache& cache)
    : options_(options), allocator_(allocator), table_(table), cache_(cache) {
  options_.Validate();
  if (table.num_rows() != options_.max_running_reqs + 1 ||
      table.width() != options_.max_context_len) {
    ThrowError("kv-canary sim: req_to_token: expected [", options_.max_running_reqs + 1, ", ",
               options_.max_context_len, "], got [", table.num_rows(), ", ", table.width(), "]");
  }
  if (cache.page_size() != options_.block_size) {
    ThrowError("kv-canary sim: radix cache page size: expected ", options_.block_size, ", got ",
               cache.page_size());
  }
}

void Scheduler::SetBlockTable(BlockTable* blocks) {
  if (blocks != nullptr &&
      (blocks->block_size() != options_.block_size || blocks->num_rows() != table_.num_rows() ||
       blocks->max_blocks() < Units(options_.max_context_len))) {
    ThrowError("kv-canary sim: block table: expected ", table_.num_rows(), " rows of at least ",
               Units(options_.max_context_len), " blocks of ", options_.block_size, ", got ",
               blocks->num_rows(), " rows of ", blocks->max_blocks(), " blocks of ",
               blocks->block_size());
  }
  blocks_ = blocks;
}

void Scheduler::Submit(RequestSpec spec) {
  const auto len = static_cast<int64_t>(spec.prompt.size());
  if (len < 1 || len >= options_.max_context_len) {
    ThrowError("kv-canary sim: request ", spec.id, ": prompt length: expected in [1, ",
               options_.max_context_len - 1, "], got ", len);
  }
  if (spec.max_new_tokens < 1) {
    ThrowError("kv-canary sim: request ", spec.id, ": max_new_tokens: expected >= 1, got ",
               spec.max_new_tokens);
  }
  auto req = std::make_unique<Request>();
  req->tokens = spec.prompt;
  req->spec = std::move(spec);
  waiting_.push_back(std::move(req));
}

int64_t Scheduler::KvTotal(const Request& req) const {
  if (options_.prefill_only) return static_cast<int64_t>(req.spec.prompt.size());
  const int64_t final_len =
      std::min(static_cast<int64_t>(req.spec.prompt.size()) + req.spec.max_new_tokens,
               options_.max_context_len);
  return final_len - 1;
}

int64_t Scheduler::Reserved() const {
  int64_t reserved = 0;
  for (const auto& req : running_) {
    const int64_t held = Units(static_cast<int64_t>(req->slots.size()));
    reserved += std::max<int64_t>(0, Units(KvTotal(*req)) - held);
  }
  return reserved;
}

Batch Scheduler::Schedule(int64_t step) {
  Batch batch;
  batch.step = step;
  last_refusal_.clear();
  ReleaseDueRows();
  SchedulePrefill(step, batch);
  if (!batch.rows.empty()) {
    batch.kind = Batch::kPrefill;
    stats_.prefill_batches += 1;
    return batch;
  }
  ScheduleDecode(batch);
  if (!batch.rows.empty()) {
    batch.kind = Batch::kDecode;
    stats_.decode_batches += 1;
    return batch;
  }
  if (!running_.empty()) {
    // Admission control should make this unreachable; a fault that leaks slots can reach it.
    batch.kind = Batch::kPoolTooSmall;
    batch.reason = std::to_string(running_.size()) + " running request(s) cannot get a KV slot (" +
                   std::to_string(allocator_.NumFree()) + " free, " +
                   std::to_string(cache_.EvictableTokens()) + " evictable)";
  } else if (!last_refusal_.empty()) {
    // Nothing holds a slot or a lock, yet the head of the queue does not fit: it never will.
    batch.kind = Batch::kPoolTooSmall;
    batch.reason = last_refusal_;
  }
  return batch;
}

bool Scheduler::Extend(Request& req, int64_t limit, Batch& batch) {
  const int64_t n = std::min({req.seq_len() - req.kv_len, options_.chunk_size, limit});
  std::optional<std::vector<int64_t>> slots = Grow(req, n);
  if (!slots) return false;
  BatchRow row;
  row.req = &req;
  row.row = req.row;
  row.prefix_len = req.kv_len;
  row.extend_len = n;
  row.new_slots = std::move(*slots);
  row.produces_token = req.kv_len + n == req.seq_len();
  batch.rows.push_back(std::move(row));
  stats_.prefill_tokens += n;
  return true;
}

void Scheduler::SchedulePrefill(int64_t step, Batch& batch) {
  int64_t budget = options_.prefill_token_budget;
  // Chunked prefills already under way go first, so a long prompt is never starved by new ones.
  for (const auto& req : running_) {
    if (req->prefill_done) continue;
    if (budget == 0 || !Extend(*req, budget, batch)) return;
    budget -= batch.rows.back().extend_len;
  }
  // Then admissions, first come first served: the first arrived request that cannot be admitted
  // blocks the ones behind it (no overtaking, as SGLang's FCFS policy).
  for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0;) {
    Request& req = **it;
    if (req.spec.arrival_step > step) {
      ++it;
      continue;
    }
    if (static_cast<int64_t>(running_.size()) >= options_.max_running_reqs) return;
    if (!Admit(req, step, &last_refusal_)) return;
    running_.push_back(std::move(*it));
    it = waiting_.erase(it);
    // Admission reserved every slot the request can use, so this cannot run dry.
    if (!Extend(req, budget, batch)) throw std::logic_error("kv-canary sim: reservation broken");
    budget -= batch.rows.back().extend_len;
  }
}

bool Scheduler::Admit(Request& req, int64_t step, std::string* why) {
  // The last prompt token is never matched: its forward must run to produce the first output.
  const std::vector<int64_t> key(req.tokens.begin(), req.tokens.end() - 1);
  RadixCache::MatchResult match =
      options_.reuse_prefix ? cache_.MatchPrefix(key) : RadixCache::MatchResult{};
  cache_.Lock(match.last_node);
  const auto resident = static_cast<int64_t>(match.slots.size());
  // The match is whole blocks, and so is everything the cache could evict.
  const int64_t need = Units(KvTotal(req)) - Units(resident);
  const int64_t available =
      allocator_.NumFree() + cache_.EvictableTokens() / options_.block_size - Reserved();
  if (need > available) {
    cache_.Unlock(match.last_node);
    *why = "request " + std::to_string(req.spec.id) + " needs " + std::to_string(need) +
           (options_.block_size == 1 ? " KV slots" : " KV blocks") +
           " beyond its cached prefix of " + std::to_string(resident) + ", but only " +
           std::to_string(available) + " of the pool's " +
           std::to_string(allocator_.num_slots() - 1) + " are free or evictable";
    return false;
  }
  const std::optional<int64_t> row = table_.AllocateRow();
  if (!row) {
    // Below max_running_reqs only while rows of finished requests wait out their release delay:
    // the request waits for them (not a refusal: they come back by themselves).
    if (rows_to_release_.empty()) {
      throw std::logic_error("kv-canary sim: no req_to_token row below max_running_reqs");
    }
    cache_.Unlock(match.last_node);
    return false;
  }

  std::vector<int64_t> prefix = std::move(match.slots);
  RadixCache::NodeId lock = match.last_node;
  if (match.host_only_tokens > 0 && restore_) {
    std::optional<std::vector<int64_t>> fresh = AllocateSlots(match.host_only_tokens);
    if (!fresh) throw std::logic_error("kv-canary sim: reservation broken (host restore)");
    size_t offset = 0;
    for (RadixCache::NodeId node : match.host_nodes) {
      const size_t len = static_cast<size_t>(cache_.KeyLength(node));
      const std::vector<int64_t> part(fresh->begin() + offset, fresh->begin() + offset + len);
      restore_(node, cache_.HostSlots(node), part);
      cache_.LoadBack(node, part);
      offset += len;
    }
    prefix.insert(prefix.end(), fresh->begin(), fresh->end());
    // Move the lock to the deepest restored node: it covers the resident part too.
    cache_.Lock(match.host_nodes.back());
    cache_.Unlock(lock);
    lock = match.host_nodes.back();
    req.host_restored_len = match.host_only_tokens;
  }

  req.row = *row;
  Place(req, 0, prefix);
  req.cached_len = static_cast<int64_t>(prefix.size());
  req.kv_len = req.cached_len;
  req.slots = std::move(prefix);
  req.lock_node = lock;
  req.admit_step = step;
  stats_.admitted += 1;
  stats_.looked_up_tokens += static_cast<int64_t>(key.size());
  stats_.prefix_hit_tokens += resident;
  stats_.host_hit_tokens += req.host_restored_len;
  return true;
}

void Scheduler::ScheduleDecode(Batch& batch) {
  for (const auto& req : running_) {
    if (!req->prefill_done) continue;
    const int64_t pos = req->seq_len() - 1;
    std::optional<std::vector<int64_t>> slot = Grow(*req, 1);
    if (!slot) continue;  // unreachable under admission control; Schedule reports a stall
    BatchRow row;
    row.req = req.get();
    row.row = req->row;
    row.prefix_len = pos;
    row.extend_len = 1;
    row.new_slots = std::move(*slot);
    row.produces_token = true;
    batch.rows.push_back(std::move(row));
    stats_.decode_tokens += 1;
  }
}

std::vector<std::unique_ptr<Request>> Scheduler::Complete(const Batch& batch,
                                                          const std::vector<int64_t>& sampled) {
  if (static_cast<int64_t>(sampled.size()) != batch.NumProducing()) {
    throw std::logic_error("kv-canary sim: Complete got " + std::to_string(sampled.size()) +
                           " sampled tokens for " + std::to_string(batch.NumProducing()) +
                           " producing rows");
  }
  size_t next = 0;
  for (const BatchRow& row : batch.rows) {
    Request& req = *row.req;
    req.kv_len = row.prefix_len + row.extend_len;
    if (!row.produces_token) continue;
    const int64_t token = sampled[next++];
    req.tokens.push_back(token);
    req.output.push_back(token);
    if (!req.prefill_done) {
      req.prefill_done = true;
      req.first_token_step = batch.step;
    }
    if (options_.prefill_only || static_cast<int64_t>(req.output.size()) >= req.spec.max_new_tokens ||
        req.seq_len() >= options_.max_context_len) {
      req.finished = true;
      req.finish_step = batch.step;
    }
  }
  std::vector<std::unique_ptr<Request>> finished;
  for (auto it = running_.begin(); it != running_.end();) {
    if (!(*it)->finished) {
      ++it;
      continue;
    }
    Retire(**it);
    finished.push_back(std::move(*it));
    it = running_.erase(it);
  }
  return finished;
}

}  // namespace kvcanary::sim
