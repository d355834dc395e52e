// Verify on the CPU buffers only the rows that can still reach the ring: a long, fully corrupt
// prefix checked in parallel chunks records the same rows and counts as with a ring that holds
// them all, while the rows past the ring are counted, not kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary::testing {
namespace {

// Entries 0..n-1 check slots 1..n in one chain; no record was ever written, so every entry fails.
struct CorruptPrefix {
  explicit CorruptPrefix(int64_t n) : n(n), plan(n, 1) {
    for (int64_t e = 0; e < n; ++e) {
      plan.slots[e] = e + 1;
      plan.prevs[e] = e == 0 ? -1 : e;
      plan.positions[e] = e;
    }
    plan.num_valid[0] = static_cast<int32_t>(n);
  }
  // Runs verify with a ring of `ring_capacity` rows starting at write index `start`.
  CanaryState Run(int64_t ring_capacity, int32_t start = 0) const {
    CanaryState state(n + 1, ring_capacity);
    state.write_index[0] = start;
    Verify(VerifyArgs{state.Context(), plan.verify(), false, std::nullopt});
    return state;
  }
  int64_t n;
  PlanBuffers plan;
};

TEST(VerifyRingBound, RowsPastTheRingAreCountedAndTheRingHoldsTheFirstOnes) {
  const CorruptPrefix prefix(20000);  // well above the parallel threshold: several chunks
  const CanaryState all = prefix.Run(/*ring_capacity=*/20000);
  ASSERT_EQ(all.write_index[0], 20000);  // every entry failed and fit
  const std::vector<ViolationRow> every = all.rows();
  for (int64_t capacity : {1, 2, 5000, 12345}) {
    const CanaryState small = prefix.Run(capacity);
    EXPECT_EQ(small.write_index[0], 20000) << capacity;
    const std::vector<ViolationRow> kept = small.rows();
    ASSERT_EQ(static_cast<int64_t>(kept.size()), capacity);
    EXPECT_TRUE(std::equal(kept.begin(), kept.end(), every.begin())) << capacity;
  }
}

TEST(VerifyRingBound, ARingAlreadyPartlyFullTakesOnlyWhatIsLeft) {
  const CorruptPrefix prefix(9000);
  const CanaryState all = prefix.Run(/*ring_capacity=*/9000);
  const CanaryState late = prefix.Run(/*ring_capacity=*/10, /*start=*/7);
  EXPECT_EQ(late.write_index[0], 7 + 9000);
  // Slots 7..9 of the ring hold the launch's first three rows.
  const std::vector<ViolationRow> every = all.rows();
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t* c = late.ring.values().data() + (7 + i) * kViolationFields;
    EXPECT_EQ((ViolationRow{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]}), every[i]) << i;
  }
}

}  // namespace
}  // namespace kvcanary::testing
