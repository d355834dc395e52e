// The simulator's seeded workload: requests built from a small pool of shared system prompts plus
// a random user turn, and multi-turn follow-ups that resend the whole conversation, so prefix
// sharing is heavy (what a radix cache and its sweeps exist for).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace kvcanary::sim {

struct WorkloadOptions {
  uint64_t seed = 1;               // every draw derives from it
  int num_requests = 64;           // initial requests (follow-ups come on top)
  int num_system_prompts = 4;      // the shared prefixes every first turn starts with
  int system_prompt_len_min = 32;  // system prompt length range, tokens
  int system_prompt_len_max = 128;
  int user_len_min = 8;  // user turn length range (first turns and follow-ups)
  int user_len_max = 64;
  int max_new_tokens_min = 8;  // output length range
  int max_new_tokens_max = 64;
  double follow_up_prob = 0.3;   // chance that a finished request gets a follow-up
  int max_turns = 4;             // conversation length cap (turn 0 is the first request)
  int arrival_per_step_max = 4;  // each step 1..max initial requests arrive; <= 0: all at 0
  int64_t vocab_size = 32000;    // tokens are drawn from [1, vocab_size)
  // A follow-up whose prompt + max_new_tokens would reach this is not made (0 = no limit).
  int64_t max_context_len = 0;

  // Throws kvcanary::Error naming the first invalid field (min > max, non-positive lengths, a
  // probability outside [0, 1], vocab_size < 2, or a first turn that cannot fit
  // max_context_len).
  void Validate() const;
};

struct RequestSpec {
  int64_t id = 0;
  int64_t arrival_step = 0;
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 0;
  int64_t parent_id = -1;  // the request this one follows up, or -1
  int turn = 0;
};

// Thread safety: none. Deterministic: the same options give the same initial requests, and the
// same FollowUp calls (in the same order) give the same follow-ups. A follow-up's content depends
// only on the seed and its inputs, not on how many other follow-ups were drawn before; only its
// id depends on the call order.
class Workload {
 public:
  explicit Workload(const WorkloadOptions& options);

  // The initial requests, ids 0..num_requests-1, in arrival order.
  const std::vector<RequestSpec>& initial_requests() const { return initial_; }
  const std::vector<std::vector<int64_t>>& system_prompts() const { return system_prompts_; }

  // With probability follow_up_prob (and while under max_turns and max_context_len), the next
  // turn of `finished`'s conversation: prompt = finished.prompt + output + a new user turn,
  // arriving at `now`, with a fresh id.
  std::optional<RequestSpec> FollowUp(const RequestSpec& finished,
                                      const std::vector<int64_t>& output, int64_t now);

 private:
  WorkloadOptions options_;
  std::vector<std::vector<int64_t>> system_prompts_;
  std::vector<RequestSpec> initial_;
  int64_t next_id_ = 0;
};

// Portable draws from a mt19937_64 (the std distributions differ between standard libraries, and
// a report must not change with the toolchain).
int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi);  // [lo, hi]
double UniformReal(std::mt19937_64& rng);                          // [0, 1)

}  // namespace kvcanary::sim
