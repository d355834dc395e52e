// Tests for sim/progress: silent when disabled, throttled redraws, a newline only when drawn.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/progress.h"

namespace kvcanary::sim {
namespace {

TEST(Progress, DisabledBarWritesNothing) {
  std::ostringstream out;
  {
    ProgressBar bar("sim default", 100, false, out);
    for (int i = 0; i <= 100; ++i) bar.Update(i, "running");
    bar.Finish();
    EXPECT_EQ(bar.redraws(), 0);
  }
  EXPECT_EQ(out.str(), "");
}

TEST(Progress, DrawsLabelCountPercentAndStatus) {
  std::ostringstream out;
  ProgressBar bar("sim default", 200, true, out);
  bar.Update(50, "3 running");
  EXPECT_EQ(out.str(),
            "\r\033[Ksim default [#######.......................] 50/200  25% 3 running");
}

TEST(Progress, RapidUpdatesAreThrottledButTheLastOneIsDrawn) {
  std::ostringstream out;
  ProgressBar bar("x", 1000, true, out);
  for (int i = 1; i < 1000; ++i) bar.Update(i, "");
  // A thousand updates take far less than 100 ms; allow for a stalled machine, not for a redraw
  // per update.
  EXPECT_LT(bar.redraws(), 50);
  const int64_t before = bar.redraws();
  bar.Update(1000, "done");
  EXPECT_EQ(bar.redraws(), before + 1);
  EXPECT_NE(out.str().rfind("1000/1000 100% done"), std::string::npos) << out.str();
}

TEST(Progress, FinishEndsTheLineOnceAndSilencesTheBar) {
  std::ostringstream out;
  ProgressBar bar("x", 10, true, out);
  bar.Update(3, "");
  bar.Finish();
  const std::string finished = out.str();
  EXPECT_EQ(finished.back(), '\n');
  bar.Finish();
  bar.Update(10, "late");
  EXPECT_EQ(out.str(), finished);
}

TEST(Progress, FinishDrawsAThrottledStateButDoesNotRepeatADrawnOne) {
  std::ostringstream drawn;
  ProgressBar complete("x", 10, true, drawn);
  complete.Update(10, "done");
  complete.Finish();
  EXPECT_EQ(complete.redraws(), 1);
  std::ostringstream throttled;
  ProgressBar bar("x", 10, true, throttled);
  bar.Update(1, "");
  bar.Update(2, "");  // within the redraw interval of the first: recorded, not drawn
  bar.Finish();
  EXPECT_NE(throttled.str().find("2/10"), std::string::npos) << throttled.str();
  EXPECT_EQ(throttled.str().back(), '\n');
}

TEST(Progress, FinishWithoutAnyDrawWritesNothing) {
  std::ostringstream out;
  ProgressBar bar("x", 10, true, out);
  bar.Finish();
  EXPECT_EQ(out.str(), "");
}

TEST(Progress, UnknownTotalShowsTheCountOnly) {
  std::ostringstream out;
  ProgressBar bar("x", 0, true, out);
  bar.Update(42, "");
  EXPECT_EQ(out.str(), "\r\033[Kx 42");
}

TEST(Progress, ExplicitModesOverrideTheTerminalCheck) {
  EXPECT_TRUE(ProgressEnabled("on"));
  EXPECT_FALSE(ProgressEnabled("off"));
}

}  // namespace
}  // namespace kvcanary::sim
