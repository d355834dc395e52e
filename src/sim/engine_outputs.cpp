// What the engine hands out: each sampled token's oracle expectation, finished requests (their
// whole output checked against the oracle first) and the violations the runtime reported; and
// the running requests a caller may look up or abort.
#include <set>
#include <stdexcept>
#include <string>

#include "kvcanary/hash.h"
#include "kvcanary/runtime/radix_view.h"
#include "sim/engine.h"

namespace kvcanary::sim {

int64_t Engine::OracleToken(const Request& req, ExpectedState& state, int64_t seq_len) const {
  while (state.length() < seq_len) state.Append(req.tokens[state.length()]);
  const int64_t query = req.tokens[seq_len - 1];
  if (!swa_) return state.NextToken(query);
  return oracle_.TokenOf(state.Hash(query) ^ Splitmix64(ExpectedSwaHash(req, seq_len, query)));
}

ExpectedState& Engine::ExpectedFor(const Request& req) {
  auto it = expected_.find(req.spec.id);
  if (it == expected_.end()) it = expected_.emplace(req.spec.id, oracle_.NewExpectedState()).first;
  return it->second;
}

void Engine::Finish(std::unique_ptr<Request> done) {
  if (held_ && held_->Holds(done->spec.id)) {
    finishing_.push_back(std::move(done));
    return;
  }
  // The whole output against an oracle run from the prompt: with quarantine, every token a user
  // received must be the model's.
  ExpectedState state = oracle_.NewExpectedState();
  const auto prompt = static_cast<int64_t>(done->spec.prompt.size());
  bool wrong = false;
  for (size_t k = 0; k < done->output.size() && !wrong; ++k) {
    wrong = done->output[k] != OracleToken(*done, state, prompt + static_cast<int64_t>(k));
  }
  stats_.outputs_checked += 1;
  stats_.outputs_wrong += wrong ? 1 : 0;
  finished_.push_back(std::move(done));
}

std::vector<std::unique_ptr<Request>> Engine::TakeFinished() {
  std::vector<std::unique_ptr<Request>> taken;
  taken.swap(finished_);
  return taken;
}

std::vector<ReportedViolation> Engine::TakeViolations() {
  std::vector<ReportedViolation> taken;
  taken.swap(violations_);
  violations_seen_ = 0;
  return taken;
}

Request* Engine::FindRunning(int64_t id) const {
  for (const std::unique_ptr<Request>& req : scheduler_->running()) {
    if (req->spec.id == id) return req.get();
  }
  return nullptr;
}

void Engine::ForgetRequest(int64_t id) {
  expected_.erase(id);
  last_true_sample_.erase(id);
  if (swa_) swa_->ReleaseAll(id);
}

void Engine::Abort(Request* req) {
  if (held_) held_->Discard(req->spec.id);
  ForgetRequest(req->spec.id);
  // Not a fixed list of the fault's units: the victim may have been handed its freed slot back
  // itself, and keeping that one would leak it.
  scheduler_->Abort(req, UnitsOwnedElsewhere(*req));
}

void Engine::CheckUnitOwnership() const {
  std::set<int64_t> held;
  for (const std::unique_ptr<Request>& req : scheduler_->running()) {
    const std::set<int64_t> own = OwnUnits(*req);
    held.insert(own.begin(), own.end());
  }
  for (int64_t slot : runtime::WalkRadix(*radix_).slot_indices) held.insert(slot / Unit());
  const auto fail = [](int64_t unit, const char* what) {
    throw std::logic_error("kv-canary sim: allocation unit " + std::to_string(unit) + " " + what);
  };
  for (int64_t unit : held) {
    if (allocator_->IsFree(unit)) fail(unit, "is held by a request or the cache but free");
  }
  for (int64_t unit = 1; unit < allocator_->num_slots(); ++unit) {
    if (!allocator_->IsFree(unit) && held.count(unit) == 0) {
      fail(unit, "is allocated but no request or cached prefix holds it (leaked)");
    }
  }
}

}  // namespace kvcanary::sim
