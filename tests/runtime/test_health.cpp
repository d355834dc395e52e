#include "kvcanary/runtime/health.h"

#include <gtest/gtest.h>

#include "runtime/error_message.h"

#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {
namespace {

using Counters = std::array<int64_t, kNumLaunchTags>;

constexpr int kHeadKFull = 0, kHeadVFull = 1, kTailKFull = 2, kTailVFull = 3, kSweepKFull = 4,
              kSweepVFull = 5, kTailKSwa = 8;

// The six endpoints of an MHA pool's FULL group.
std::vector<int> MhaFullTags() {
  return {kHeadKFull, kHeadVFull, kTailKFull, kTailVFull, kSweepKFull, kSweepVFull};
}

// Counters where HEAD_K_FULL and TAIL_K_FULL ran `head` and `tail` times, every other tag never.
Counters HeadAndTailRuns(int64_t head, int64_t tail) {
  Counters counters{};
  counters[kHeadKFull] = head;
  counters[kTailKFull] = tail;
  return counters;
}

TEST(Health, StagesEveryHundredStepsAfterWarmUp) {
  const HealthChecker checker(MhaFullTags(), 0, false);
  EXPECT_FALSE(checker.ShouldStage(0));
  EXPECT_FALSE(checker.ShouldStage(99));
  EXPECT_TRUE(checker.ShouldStage(100));
  EXPECT_FALSE(checker.ShouldStage(101));
  EXPECT_FALSE(checker.ShouldStage(150));
  EXPECT_TRUE(checker.ShouldStage(1100));
  EXPECT_FALSE(HealthChecker({}, 0, false).ShouldStage(100));
}

// The first check (staged at 100, drained at 101) compares with zeros.
TEST(Health, FirstCheckComparesWithZeros) {
  HealthChecker stalled(MhaFullTags(), 0, false);
  EXPECT_EQ(ErrorMessage([&] { stalled.Drain(Counters{}, 101, false); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[HEAD_K_FULL, TAIL_K_FULL] at step=101; canary path is not executing");

  HealthChecker running(MhaFullTags(), 0, false);
  EXPECT_NO_THROW(running.Drain(HeadAndTailRuns(100, 100), 101, false));
}

// TAIL_K_FULL stalls between the checks staged at 1000 and 1100 while HEAD_K_FULL runs.
TEST(Health, StalledTagBetweenChecksRaises) {
  HealthChecker checker(MhaFullTags(), 0, false);
  Counters counters = HeadAndTailRuns(1000, 1000);
  ASSERT_NO_THROW(checker.Drain(counters, 1001, false));
  counters[kHeadKFull] = 1100;
  EXPECT_EQ(ErrorMessage([&] { checker.Drain(counters, 1101, false); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[TAIL_K_FULL] at step=1101; canary path is not executing");
  EXPECT_EQ(checker.checks(), 2);
}

TEST(Health, FailedCheckStillAdvancesTheBaseline) {
  HealthChecker checker({kHeadKFull, kTailKFull}, 0, false);
  EXPECT_THROW(checker.Drain(HeadAndTailRuns(5, 0), 101, false), Error);
  EXPECT_NO_THROW(checker.Drain(HeadAndTailRuns(6, 1), 201, false));
}

// With sweep_interval = 0 SWEEP tags are never expected.
TEST(Health, SweepTagsNotExpectedWithoutSweeps) {
  const HealthChecker checker(MhaFullTags(), 0, false);
  EXPECT_EQ(checker.ExpectedTags(true), (std::vector<int>{kHeadKFull, kTailKFull}));
}

// SWEEP tags are expected only if a pass ran since the previous check.
TEST(Health, SweepTagsExpectedOnlyAfterASweepPass) {
  const HealthChecker checker(MhaFullTags(), 250, false);
  EXPECT_EQ(checker.ExpectedTags(false), (std::vector<int>{kHeadKFull, kTailKFull}));
  EXPECT_EQ(checker.ExpectedTags(true),
            (std::vector<int>{kHeadKFull, kTailKFull, kSweepKFull}));

  HealthChecker draining(MhaFullTags(), 250, false);
  EXPECT_NO_THROW(draining.Drain(HeadAndTailRuns(1, 1), 101, false));
  EXPECT_EQ(ErrorMessage([&] { draining.Drain(HeadAndTailRuns(2, 2), 201, true); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[SWEEP_K_FULL] at step=201; canary path is not executing");
}

TEST(Health, VTagsExpectedOnlyWithMhaV) {
  const HealthChecker gated(MhaFullTags(), 4, false);
  const HealthChecker enabled(MhaFullTags(), 4, true);
  EXPECT_EQ(gated.ExpectedTags(true), (std::vector<int>{kHeadKFull, kTailKFull, kSweepKFull}));
  EXPECT_EQ(enabled.ExpectedTags(true), MhaFullTags());
}

TEST(Health, TagsAreReportedInAscendingOrderWhateverTheInputOrder) {
  HealthChecker checker({kTailKSwa, kHeadKFull}, 0, false);
  EXPECT_EQ(checker.active_tags(), (std::vector<int>{kHeadKFull, kTailKSwa}));
  EXPECT_EQ(ErrorMessage([&] { checker.Drain(Counters{}, 301, false); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[HEAD_K_FULL, TAIL_K_SWA] at step=301; canary path is not executing");
}

TEST(Health, TagClassification) {
  EXPECT_TRUE(IsVTag(kHeadVFull));
  EXPECT_TRUE(IsVTag(11));
  EXPECT_FALSE(IsVTag(kTailKSwa));
  EXPECT_TRUE(IsSweepTag(kSweepKFull));
  EXPECT_TRUE(IsSweepTag(10));
  EXPECT_TRUE(IsSweepTag(11));
  EXPECT_FALSE(IsSweepTag(kTailKSwa));
}

TEST(Health, RejectsTagsOutsideTheTable) {
  EXPECT_THROW(HealthChecker({12}, 0, false), Error);
  EXPECT_THROW(HealthChecker({-1}, 0, false), Error);
}

}  // namespace
}  // namespace kvcanary::runtime
