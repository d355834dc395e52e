#include "kvcanary/runtime/stats.h"

#include <gtest/gtest.h>

namespace kvcanary::runtime {
namespace {

// SGLang's stats vector: period 5, MHA FULL-only (6 endpoints), Σ slot counters 1234 at step 5.
TEST(Stats, SpecVector) {
  EXPECT_TRUE(StatsDue(5, 5));
  EXPECT_EQ(FormatStatsLine(5, 1234, 0, 0, 6),
            "[canary] step=5 protected_tokens=1234 sweep_passes=0 violations=0 "
            "launch_tags_active=6/12");
}

TEST(Stats, DueOnlyOnNonZeroMultiplesOfAPositivePeriod) {
  EXPECT_FALSE(StatsDue(0, 5));
  EXPECT_FALSE(StatsDue(4, 5));
  EXPECT_TRUE(StatsDue(10, 5));
  EXPECT_FALSE(StatsDue(100, 0));
  EXPECT_FALSE(StatsDue(100, -1));
  EXPECT_TRUE(StatsDue(100, 100));
}

TEST(Stats, OtherFrozenLines) {
  EXPECT_EQ(FormatSweepLine(3, 8), "[canary] sweep succeeded 3 times (last_step=8)");
  EXPECT_EQ(FormatOverflowSkippedLine(2, 300),
            "kv-canary: per-forward verify skipped this step due to overflow (total=2, "
            "capacity=300); check ServerArgs / pool sizing");
  EXPECT_EQ(FormatSplitWarning(700, 300, "SWA", 3),
            "kv-canary: per-forward verify total=700 exceeds capacity=300 for group SWA; "
            "verified outside the graph in 3 chunks");
}

}  // namespace
}  // namespace kvcanary::runtime
