// What the engine hands out: each sampled token's oracle expectation, finished requests (their
// whole output checked against the oracle first) and the violations the runtime reported; and
// the running requests a caller may look up or abort.
#include "kvcanary/hash.h"
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

void Engine::Abort(Request* req, const std::vector<int64_t>& keep) {
  if (held_) held_->Discard(req->spec.id);
  ForgetRequest(req->spec.id);
  scheduler_->Abort(req, keep);
}

}  // namespace kvcanary::sim
