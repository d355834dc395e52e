// HeldTokens: the tokens an engine with the quarantine policy has sampled but not yet delivered.
//
// A sampled token is not known good when its step ends: the canary reports what a step's
// launches found one step later, and a token corrupted on its way from the sampler back into the
// model (the next-token feedback) is only checked when the request's next forward writes it into
// the cache. So each token waits for the verdict of the step that produced it and of the
// request's next `hold_back` forwards; a request that finishes waits for its last forward's, or
// with `finish_delay` for the step that many after it (the step of a verification run after its
// last forward: with sampled verify, VerifyRecordsNow of its slots). The
// engine releases tokens once the runtime has reported every violation of the step each one
// waits for, and discards a request's tokens when a violation names it.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace kvcanary::sim {

struct HeldToken {
  int64_t request = 0;   // RequestSpec::id
  int64_t position = 0;  // index in the request's tokens
  int64_t token = 0;     // what the user would receive
  int64_t expected = 0;  // the oracle's token for the same history
  int64_t produced_step = 0;
  int64_t forwards_left = 0;  // later forwards of the request it still waits for
  int64_t verdict_step = -1;  // the step whose verdict releases it; -1 while forwards_left > 0

  bool corrupted() const { return token != expected; }
};

// Thread safety: none. Steps are the runtime's outer steps (CanaryManager::outer_step()).
class HeldTokens {
 public:
  // REQUIRES: hold_back >= 0, finish_delay >= 0.
  explicit HeldTokens(int64_t hold_back, int64_t finish_delay = 0);

  // The request ran a forward in `step`: tokens produced in earlier steps count it. Call before
  // Hold of the token this forward produced.
  void Forwarded(int64_t request, int64_t step);
  void Hold(int64_t request, int64_t position, int64_t token, int64_t expected, int64_t step);
  // The request finished in `step`: no forward will consume its tokens, so each waits for the
  // verdict of step + finish_delay.
  void Finished(int64_t request, int64_t step);
  // Removes and returns, request by request and in order, the leading tokens whose verdict step
  // is at most `known_step`.
  std::vector<HeldToken> Release(int64_t known_step);
  // Removes and returns every token of the request.
  std::vector<HeldToken> Discard(int64_t request);
  bool Holds(int64_t request) const { return held_.count(request) > 0; }
  int64_t size() const;

 private:
  int64_t hold_back_ = 1;
  int64_t finish_delay_ = 0;
  std::map<int64_t, std::vector<HeldToken>> held_;  // by request, in position order
};

}  // namespace kvcanary::sim
