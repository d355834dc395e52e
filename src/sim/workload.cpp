#include "sim/workload.h"

#include "kvcanary/error.h"
#include "kvcanary/hash.h"

namespace kvcanary::sim {
namespace {

// Salts that keep the generator streams of different purposes apart.
constexpr uint64_t kFollowUpSalt = 0xF011'0F01'1000'0001ull;

void CheckRange(const char* name, int64_t lo, int64_t hi, int64_t least) {
  if (lo < least) ThrowError("kv-canary sim: ", name, "_min: expected >= ", least, ", got ", lo);
  if (hi < lo) ThrowError("kv-canary sim: ", name, "_max: expected >= ", lo, ", got ", hi);
}

std::vector<int64_t> RandomTokens(std::mt19937_64& rng, int64_t n, int64_t vocab_size) {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  for (int64_t& t : tokens) t = UniformInt(rng, 1, vocab_size - 1);
  return tokens;
}

}  // namespace

int64_t UniformInt(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  // span == 0 only for the full 64-bit range; the modulo bias is at most span / 2^64, far below
  // anything a report can show.
  return span == 0 ? static_cast<int64_t>(rng()) : lo + static_cast<int64_t>(rng() % span);
}

double UniformReal(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // 53 bits / 2^53
}

void WorkloadOptions::Validate() const {
  if (num_requests < 0)
    ThrowError("kv-canary sim: num_requests: expected >= 0, got ", num_requests);
  if (num_system_prompts < 1) {
    ThrowError("kv-canary sim: num_system_prompts: expected >= 1, got ", num_system_prompts);
  }
  CheckRange("system_prompt_len", system_prompt_len_min, system_prompt_len_max, 0);
  CheckRange("user_len", user_len_min, user_len_max, 1);
  CheckRange("max_new_tokens", max_new_tokens_min, max_new_tokens_max, 1);
  if (!(follow_up_prob >= 0.0 && follow_up_prob <= 1.0)) {
    ThrowError("kv-canary sim: follow_up_prob: expected in [0, 1], got ", follow_up_prob);
  }
  if (max_turns < 1) ThrowError("kv-canary sim: max_turns: expected >= 1, got ", max_turns);
  if (vocab_size < 2) ThrowError("kv-canary sim: vocab_size: expected >= 2, got ", vocab_size);
  const int64_t first_turn =
      static_cast<int64_t>(system_prompt_len_max) + user_len_max + max_new_tokens_max;
  if (max_context_len > 0 && first_turn >= max_context_len) {
    ThrowError("kv-canary sim: max_context_len: expected > ", first_turn,
               " (longest system prompt + user turn + output), got ", max_context_len);
  }
}

Workload::Workload(const WorkloadOptions& options) : options_(options) {
  options_.Validate();
  std::mt19937_64 rng(options_.seed);
  for (int i = 0; i < options_.num_system_prompts; ++i) {
    const int64_t len =
        UniformInt(rng, options_.system_prompt_len_min, options_.system_prompt_len_max);
    system_prompts_.push_back(RandomTokens(rng, len, options_.vocab_size));
  }
  int64_t step = 0;
  int64_t arriving = 0;  // still to arrive at `step`
  for (int i = 0; i < options_.num_requests; ++i) {
    if (options_.arrival_per_step_max > 0) {
      while (arriving == 0) {
        arriving = UniformInt(rng, 1, options_.arrival_per_step_max);
        if (i > 0) ++step;
      }
      --arriving;
    }
    RequestSpec spec;
    spec.id = next_id_++;
    spec.arrival_step = step;
    spec.prompt = system_prompts_[UniformInt(rng, 0, options_.num_system_prompts - 1)];
    const auto user = RandomTokens(
        rng, UniformInt(rng, options_.user_len_min, options_.user_len_max), options_.vocab_size);
    spec.prompt.insert(spec.prompt.end(), user.begin(), user.end());
    spec.max_new_tokens = UniformInt(rng, options_.max_new_tokens_min, options_.max_new_tokens_max);
    initial_.push_back(std::move(spec));
  }
}

std::optional<RequestSpec> Workload::FollowUp(const RequestSpec& finished,
                                              const std::vector<int64_t>& output, int64_t now) {
  if (finished.turn + 1 >= options_.max_turns) return std::nullopt;
  // Seeded from the seed and the finished request alone, so the follow-up of a request does not
  // depend on which requests happened to finish before it.
  std::mt19937_64 rng(Splitmix64Mix3(options_.seed, ToUnsigned(finished.id), kFollowUpSalt));
  if (UniformReal(rng) >= options_.follow_up_prob) return std::nullopt;
  RequestSpec spec;
  spec.prompt = finished.prompt;
  spec.prompt.insert(spec.prompt.end(), output.begin(), output.end());
  const auto user = RandomTokens(rng, UniformInt(rng, options_.user_len_min, options_.user_len_max),
                                 options_.vocab_size);
  spec.prompt.insert(spec.prompt.end(), user.begin(), user.end());
  spec.max_new_tokens = UniformInt(rng, options_.max_new_tokens_min, options_.max_new_tokens_max);
  if (options_.max_context_len > 0 &&
      static_cast<int64_t>(spec.prompt.size()) + spec.max_new_tokens >= options_.max_context_len) {
    return std::nullopt;
  }
  spec.id = next_id_++;
  spec.arrival_step = now;
  spec.parent_id = finished.id;
  spec.turn = finished.turn + 1;
  return spec;
}

}  // namespace kvcanary::sim
