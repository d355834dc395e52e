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

// The six endpoints of an MHA pool's FULL group (§3.3).
std::vector<int> MhaFullTags() {
  return {kHeadKFull, kHeadVFull, kTailKFull, kTailVFull, kSweepKFull, kSweepVFull};
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

// §18: the first check (staged at 100, drained at 101) compares with zeros.
TEST(Health, FirstCheckComparesWithZeros) {
  HealthChecker stalled(MhaFullTags(), 0, false);
  EXPECT_EQ(ErrorMessage([&] { stalled.Drain(Counters{}, 101, false); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[HEAD_K_FULL, TAIL_K_FULL] at step=101; canary path is not executing");

  HealthChecker running(MhaFullTags(), 0, false);
  Counters counters{};
  counters[kHeadKFull] = 100;
  counters[kTailKFull] = 100;
  EXPECT_NO_THROW(running.Drain(counters, 101, false));
}

// §18: TAIL_K_FULL stalls between the checks staged at 1000 and 1100 while HEAD_K_FULL runs.
TEST(Health, StalledTagBetweenChecksRaises) {
  HealthChecker checker(MhaFullTags(), 0, false);
  Counters counters{};
  counters[kHeadKFull] = 1000;
  counters[kTailKFull] = 1000;
  ASSERT_NO_THROW(checker.Drain(counters, 1001, false));
  counters[kHeadKFull] = 1100;
  EXPECT_EQ(ErrorMessage([&] { checker.Drain(counters, 1101, false); }),
            "kv-canary: kernel_run_counter did not increase since previous check for "
            "tags=[TAIL_K_FULL] at step=1101; canary path is not executing");
  EXPECT_EQ(checker.checks(), 2);
}

TEST(Health, FailedCheckStillAdvancesTheBaseline) {
  HealthChecker checker({kHeadKFull, kTailKFull}, 0, false);
  Counters counters{};
  counters[kHeadKFull] = 5;
  EXPECT_THROW(checker.Drain(counters, 101, false), Error);
  counters[kHeadKFull] = 6;
  counters[kTailKFull] = 1;
  EXPECT_NO_THROW(checker.Drain(counters, 201, false));
}

// §18: with sweep_interval = 0 SWEEP tags are never expected.
TEST(Health, SweepTagsNotExpectedWithoutSweeps) {
  const HealthChecker checker(MhaFullTags(), 0, false);
  EXPECT_EQ(checker.ExpectedTags(true), (std::vector<int>{kHeadKFull, kTailKFull}));
}

// §17 R4: SWEEP tags are expected only if a pass ran since the previous check.
TEST(Health, SweepTagsExpectedOnlyAfterASweepPass) {
  const HealthChecker checker(MhaFullTags(), 250, false);
  EXPECT_EQ(checker.ExpectedTags(false), (std::vector<int>{kHeadKFull, kTailKFull}));
  EXPECT_EQ(checker.ExpectedTags(true),
            (std::vector<int>{kHeadKFull, kTailKFull, kSweepKFull}));

  HealthChecker draining(MhaFullTags(), 250, false);
  Counters counters{};
  counters[kHeadKFull] = 1;
  counters[kTailKFull] = 1;
  EXPECT_NO_THROW(draining.Drain(counters, 101, false));
  counters[kHeadKFull] = 2;
  counters[kTailKFull] = 2;
  EXPECT_EQ(ErrorMessage([&] { draining.Drain(counters, 201, true); }),
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
