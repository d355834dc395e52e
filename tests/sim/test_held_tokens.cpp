// Tests for sim/held_tokens: when a held token's verdict is known (its own step, the request's
// next hold_back forwards, or its finishing step) and how Release, Discard and Finished treat it.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "sim/held_tokens.h"

namespace kvcanary::sim {
namespace {

// The positions of `tokens`, in order.
std::vector<int64_t> Positions(const std::vector<HeldToken>& tokens) {
  std::vector<int64_t> positions;
  for (const HeldToken& token : tokens) positions.push_back(token.position);
  return positions;
}

// Holds the token of `position` of `request`, produced in `step`, as the oracle expects it.
void HoldGood(HeldTokens& held, int64_t request, int64_t position, int64_t step) {
  held.Hold(request, position, 100 + position, 100 + position, step);
}

TEST(HeldTokens, RefusesANegativeHoldBack) {
  EXPECT_THROW(HeldTokens(-1), std::logic_error);
  EXPECT_NO_THROW(HeldTokens(0));
  EXPECT_NO_THROW(HeldTokens(64));
}

TEST(HeldTokens, HoldBackOneWaitsForTheNextForwardsVerdict) {
  HeldTokens held(1);
  HoldGood(held, 7, 4, 10);
  EXPECT_TRUE(held.Holds(7));
  EXPECT_EQ(held.size(), 1);
  // No later forward yet: no verdict is enough, however late.
  EXPECT_TRUE(held.Release(10).empty());
  EXPECT_TRUE(held.Release(1000).empty());
  held.Forwarded(7, 12);
  // The forward of step 12 fed the token back; its verdict is not known at step 11.
  EXPECT_TRUE(held.Release(11).empty());
  const std::vector<HeldToken> released = held.Release(12);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].request, 7);
  EXPECT_EQ(released[0].position, 4);
  EXPECT_EQ(released[0].token, 104);
  EXPECT_EQ(released[0].produced_step, 10);
  EXPECT_EQ(released[0].verdict_step, 12);
  EXPECT_FALSE(held.Holds(7));
  EXPECT_EQ(held.size(), 0);
}

TEST(HeldTokens, AForwardInTheProducingStepDoesNotCount) {
  HeldTokens held(1);
  held.Forwarded(3, 5);  // before Hold, as the engine calls it
  HoldGood(held, 3, 0, 5);
  held.Forwarded(3, 5);  // even after Hold, a forward of the same step is not a later one
  EXPECT_TRUE(held.Release(5).empty());
  EXPECT_TRUE(held.Release(50).empty());
  held.Forwarded(3, 6);
  EXPECT_EQ(Positions(held.Release(6)), std::vector<int64_t>({0}));
}

TEST(HeldTokens, HoldBackZeroReleasesAtItsOwnStep) {
  HeldTokens held(0);
  HoldGood(held, 1, 9, 20);
  EXPECT_TRUE(held.Release(19).empty());
  const std::vector<HeldToken> released = held.Release(20);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].verdict_step, 20);
  EXPECT_EQ(held.size(), 0);
}

TEST(HeldTokens, HoldBackTwoCountsTwoLaterForwards) {
  HeldTokens held(2);
  HoldGood(held, 1, 0, 10);
  held.Forwarded(1, 11);
  EXPECT_TRUE(held.Release(11).empty());
  EXPECT_TRUE(held.Release(100).empty());
  held.Forwarded(1, 13);
  EXPECT_TRUE(held.Release(12).empty());
  EXPECT_EQ(Positions(held.Release(13)), std::vector<int64_t>({0}));
}

TEST(HeldTokens, FinishedMakesUnconsumedTokensWaitForTheFinishingStepOnly) {
  HeldTokens held(2);
  HoldGood(held, 4, 0, 10);
  held.Forwarded(4, 11);  // one of the two forwards position 0 waits for
  HoldGood(held, 4, 1, 11);
  held.Finished(4, 11);
  EXPECT_TRUE(held.Release(10).empty());
  const std::vector<HeldToken> released = held.Release(11);
  EXPECT_EQ(Positions(released), std::vector<int64_t>({0, 1}));
  for (const HeldToken& token : released) EXPECT_EQ(token.verdict_step, 11);
  EXPECT_FALSE(held.Holds(4));
}

TEST(HeldTokens, FinishedKeepsAVerdictStepAlreadyKnown) {
  HeldTokens held(1);
  HoldGood(held, 2, 0, 10);
  held.Forwarded(2, 11);  // position 0 waits for step 11
  HoldGood(held, 2, 1, 11);
  held.Finished(2, 12);   // position 1 waits for step 12
  EXPECT_EQ(Positions(held.Release(11)), std::vector<int64_t>({0}));
  EXPECT_TRUE(held.Holds(2));
  EXPECT_EQ(Positions(held.Release(12)), std::vector<int64_t>({1}));
}

TEST(HeldTokens, ReleaseKeepsOrderAndStopsAtTheFirstTokenNotReleasable) {
  HeldTokens held(1);
  HoldGood(held, 5, 0, 10);
  held.Forwarded(5, 11);
  HoldGood(held, 5, 1, 11);
  held.Forwarded(5, 12);
  HoldGood(held, 5, 2, 12);
  EXPECT_EQ(Positions(held.Release(12)), std::vector<int64_t>({0, 1}));
  EXPECT_EQ(held.size(), 1);

  // A later token whose verdict is known still waits behind an earlier one that is not.
  HeldTokens zero(0);
  HoldGood(zero, 5, 0, 20);
  HoldGood(zero, 5, 1, 10);
  EXPECT_TRUE(zero.Release(15).empty());
  EXPECT_EQ(zero.size(), 2);
  EXPECT_EQ(Positions(zero.Release(20)), std::vector<int64_t>({0, 1}));
}

TEST(HeldTokens, RequestsAreIndependent) {
  HeldTokens held(1);
  HoldGood(held, 1, 0, 10);
  HoldGood(held, 2, 0, 10);
  held.Forwarded(2, 11);  // request 1 ran no forward
  const std::vector<HeldToken> released = held.Release(11);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].request, 2);
  EXPECT_TRUE(held.Holds(1));
  EXPECT_FALSE(held.Holds(2));
  held.Forwarded(9, 12);  // a request holding nothing: no effect
  EXPECT_EQ(held.size(), 1);
}

TEST(HeldTokens, DiscardRemovesAndReturnsEveryTokenOfTheRequest) {
  HeldTokens held(1);
  HoldGood(held, 1, 0, 10);
  held.Forwarded(1, 11);
  HoldGood(held, 1, 1, 11);
  HoldGood(held, 2, 0, 11);
  const std::vector<HeldToken> discarded = held.Discard(1);
  EXPECT_EQ(Positions(discarded), std::vector<int64_t>({0, 1}));
  EXPECT_EQ(discarded[0].verdict_step, 11);  // releasable ones go too
  EXPECT_FALSE(held.Holds(1));
  EXPECT_TRUE(held.Holds(2));
  EXPECT_EQ(held.size(), 1);
  EXPECT_TRUE(held.Discard(1).empty());
  EXPECT_TRUE(held.Release(100).empty());  // nothing of request 1 comes back
}

TEST(HeldTokens, CorruptedComparesTheTokenWithTheOraclesToken) {
  HeldTokens held(0);
  held.Hold(1, 0, 42, 42, 3);
  held.Hold(1, 1, 43, 44, 3);
  const std::vector<HeldToken> released = held.Release(3);
  ASSERT_EQ(released.size(), 2u);
  EXPECT_FALSE(released[0].corrupted());
  EXPECT_TRUE(released[1].corrupted());
  EXPECT_EQ(released[1].token, 43);
  EXPECT_EQ(released[1].expected, 44);
}

}  // namespace
}  // namespace kvcanary::sim
