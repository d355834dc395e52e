#include "sim/held_tokens.h"

#include <stdexcept>

namespace kvcanary::sim {

HeldTokens::HeldTokens(int64_t hold_back, int64_t finish_delay)
    : hold_back_(hold_back), finish_delay_(finish_delay) {
  if (hold_back < 0) throw std::logic_error("kv-canary sim: hold_back must be >= 0");
  if (finish_delay < 0) throw std::logic_error("kv-canary sim: finish_delay must be >= 0");
}

void HeldTokens::Forwarded(int64_t request, int64_t step) {
  auto it = held_.find(request);
  if (it == held_.end()) return;
  for (HeldToken& token : it->second) {
    if (token.verdict_step >= 0 || token.produced_step >= step) continue;
    if (--token.forwards_left == 0) token.verdict_step = step;
  }
}

void HeldTokens::Hold(int64_t request, int64_t position, int64_t token, int64_t expected,
                      int64_t step) {
  HeldToken held;
  held.request = request;
  held.position = position;
  held.token = token;
  held.expected = expected;
  held.produced_step = step;
  held.forwards_left = hold_back_;
  held.verdict_step = hold_back_ == 0 ? step : -1;
  held_[request].push_back(held);
}

void HeldTokens::Finished(int64_t request, int64_t step) {
  auto it = held_.find(request);
  if (it == held_.end()) return;
  for (HeldToken& token : it->second) {
    if (token.verdict_step < 0) token.verdict_step = step + finish_delay_;
  }
}

std::vector<HeldToken> HeldTokens::Release(int64_t known_step) {
  std::vector<HeldToken> released;
  for (auto it = held_.begin(); it != held_.end();) {
    std::vector<HeldToken>& tokens = it->second;
    size_t n = 0;
    while (n < tokens.size() && tokens[n].verdict_step >= 0 && tokens[n].verdict_step <= known_step) {
      ++n;
    }
    released.insert(released.end(), tokens.begin(), tokens.begin() + static_cast<long>(n));
    tokens.erase(tokens.begin(), tokens.begin() + static_cast<long>(n));
    it = tokens.empty() ? held_.erase(it) : std::next(it);
  }
  return released;
}

std::vector<HeldToken> HeldTokens::Discard(int64_t request) {
  auto it = held_.find(request);
  if (it == held_.end()) return {};
  std::vector<HeldToken> discarded = std::move(it->second);
  held_.erase(it);
  return discarded;
}

int64_t HeldTokens::size() const {
  int64_t n = 0;
  for (const auto& [request, tokens] : held_) n += static_cast<int64_t>(tokens.size());
  return n;
}

}  // namespace kvcanary::sim
