#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "kvcanary/error.h"
#include "sim/workload.h"

namespace kvcanary::sim {
namespace {

WorkloadOptions SmallOptions(uint64_t seed) {
  WorkloadOptions options;
  options.seed = seed;
  options.num_requests = 40;
  options.num_system_prompts = 3;
  options.system_prompt_len_min = 10;
  options.system_prompt_len_max = 20;
  options.user_len_min = 2;
  options.user_len_max = 6;
  options.max_new_tokens_min = 3;
  options.max_new_tokens_max = 9;
  options.follow_up_prob = 0.5;
  options.arrival_per_step_max = 3;
  options.vocab_size = 500;
  return options;
}

bool SameSpec(const RequestSpec& a, const RequestSpec& b) {
  return a.id == b.id && a.arrival_step == b.arrival_step && a.prompt == b.prompt &&
         a.max_new_tokens == b.max_new_tokens && a.parent_id == b.parent_id && a.turn == b.turn;
}

TEST(Workload, TheSameSeedGivesTheSameRequests) {
  Workload a(SmallOptions(11));
  Workload b(SmallOptions(11));
  ASSERT_EQ(a.initial_requests().size(), 40u);
  ASSERT_EQ(b.initial_requests().size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_TRUE(SameSpec(a.initial_requests()[i], b.initial_requests()[i])) << i;
  }
  const std::vector<int64_t> output = {7, 8, 9};
  for (const RequestSpec& spec : a.initial_requests()) {
    const auto fa = a.FollowUp(spec, output, 100);
    const auto fb = b.FollowUp(spec, output, 100);
    ASSERT_EQ(fa.has_value(), fb.has_value());
    if (fa) {
      EXPECT_TRUE(SameSpec(*fa, *fb));
    }
  }
}

TEST(Workload, AnotherSeedGivesOtherRequests) {
  Workload a(SmallOptions(11));
  Workload b(SmallOptions(12));
  int same = 0;
  for (size_t i = 0; i < 40; ++i) {
    same += a.initial_requests()[i].prompt == b.initial_requests()[i].prompt;
  }
  EXPECT_LT(same, 5);
}

TEST(Workload, PromptsAreASharedSystemPromptPlusAUserTurnWithinTheRanges) {
  const WorkloadOptions options = SmallOptions(3);
  Workload workload(options);
  std::set<size_t> used_prompts;
  int64_t last_arrival = 0;
  for (const RequestSpec& spec : workload.initial_requests()) {
    bool found = false;
    for (size_t s = 0; s < workload.system_prompts().size(); ++s) {
      const auto& system = workload.system_prompts()[s];
      if (spec.prompt.size() > system.size() &&
          std::equal(system.begin(), system.end(), spec.prompt.begin())) {
        const auto user = static_cast<int64_t>(spec.prompt.size() - system.size());
        if (user >= options.user_len_min && user <= options.user_len_max) {
          found = true;
          used_prompts.insert(s);
        }
      }
    }
    EXPECT_TRUE(found) << spec.id;
    for (int64_t token : spec.prompt) {
      EXPECT_GE(token, 1);
      EXPECT_LT(token, options.vocab_size);
    }
    EXPECT_GE(spec.max_new_tokens, options.max_new_tokens_min);
    EXPECT_LE(spec.max_new_tokens, options.max_new_tokens_max);
    EXPECT_EQ(spec.parent_id, -1);
    // Arrivals never go back and advance by at most one step at a time.
    EXPECT_GE(spec.arrival_step, last_arrival);
    EXPECT_LE(spec.arrival_step, last_arrival + 1);
    last_arrival = spec.arrival_step;
  }
  EXPECT_EQ(used_prompts.size(), 3u);  // 40 draws over 3 prompts
  // At most 3 per step means at least 14 steps for 40 requests.
  EXPECT_GE(last_arrival, 13);
}

TEST(Workload, AFollowUpExtendsTheConversation) {
  WorkloadOptions options = SmallOptions(5);
  options.follow_up_prob = 1.0;
  Workload workload(options);
  const RequestSpec& first = workload.initial_requests()[0];
  const std::vector<int64_t> output = {4, 5, 6};
  const auto next = workload.FollowUp(first, output, 17);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->id, 40);  // after the initial ids
  EXPECT_EQ(next->parent_id, first.id);
  EXPECT_EQ(next->arrival_step, 17);
  EXPECT_EQ(next->turn, 1);
  ASSERT_GT(next->prompt.size(), first.prompt.size() + output.size());
  EXPECT_TRUE(std::equal(first.prompt.begin(), first.prompt.end(), next->prompt.begin()));
  EXPECT_TRUE(std::equal(output.begin(), output.end(), next->prompt.begin() + first.prompt.size()));
}

TEST(Workload, FollowUpsStopAtTheTurnAndContextLimits) {
  WorkloadOptions options = SmallOptions(5);
  options.follow_up_prob = 1.0;
  options.max_turns = 3;
  Workload workload(options);
  RequestSpec spec = workload.initial_requests()[0];
  int turns = 1;
  while (auto next = workload.FollowUp(spec, {1, 2}, 0)) {
    spec = *next;
    ++turns;
  }
  EXPECT_EQ(turns, 3);

  options.max_turns = 100;
  options.max_context_len = 60;
  Workload bounded(options);
  spec = bounded.initial_requests()[0];
  while (auto next = bounded.FollowUp(spec, {1, 2}, 0)) {
    EXPECT_LT(static_cast<int64_t>(next->prompt.size()) + next->max_new_tokens, 60);
    spec = *next;
  }
  EXPECT_GT(spec.turn, 0);
}

TEST(Workload, FollowUpProbabilityZeroNeverFollowsUp) {
  WorkloadOptions options = SmallOptions(5);
  options.follow_up_prob = 0.0;
  Workload workload(options);
  for (const RequestSpec& spec : workload.initial_requests()) {
    EXPECT_FALSE(workload.FollowUp(spec, {1}, 0).has_value());
  }
}

TEST(Workload, InvalidOptionsThrow) {
  WorkloadOptions options = SmallOptions(1);
  options.user_len_max = 1;  // below the min of 2
  EXPECT_THROW(Workload{options}, Error);
  options = SmallOptions(1);
  options.follow_up_prob = 1.5;
  EXPECT_THROW(options.Validate(), Error);
  options = SmallOptions(1);
  options.max_context_len = 30;  // 20 + 6 + 9 = 35 does not fit
  EXPECT_THROW(options.Validate(), Error);
  options.max_context_len = 36;
  EXPECT_NO_THROW(options.Validate());
}

TEST(Workload, UniformIntCoversItsClosedRange) {
  std::mt19937_64 rng(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = UniformInt(rng, -2, 2);
    EXPECT_GE(v, -2);
    EXPECT_LE(v, 2);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
  const double r = UniformReal(rng);
  EXPECT_GE(r, 0.0);
  EXPECT_LT(r, 1.0);
}

}  // namespace
}  // namespace kvcanary::sim
