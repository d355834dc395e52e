// The quarantine matcher alone (src/runtime/affected_requests.h) over a CPU req_to_token: which
// recorded rows a violation row touches, for the cases the fake engine cannot stage.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/affected_requests.h"

namespace kvcanary::runtime {
namespace {

constexpr int64_t kRows = 4;
constexpr int64_t kWidth = 8;

// Request r holds slot 10 * r + p at position p; row 0 is padding.
struct Table {
  std::vector<int32_t> cells = std::vector<int32_t>(kRows * kWidth, 0);
  Table() {
    for (int64_t r = 1; r < kRows; ++r) {
      for (int64_t p = 0; p < kWidth; ++p) cells[r * kWidth + p] = static_cast<int32_t>(10 * r + p);
    }
  }
  TokenTable View() {
    TokenTable table;
    table.req_to_token = TensorView(cells.data(), DType::kInt32, Device::CPU(), {kRows, kWidth});
    table.rows = kRows;
    table.max_seq_len = kWidth;
    return table;
  }
};

RecordedForward Forward(Table& table, int64_t step, std::vector<int64_t> reqs,
                        std::vector<int64_t> lengths) {
  return RecordedForward{step, table.View(), std::move(reqs), std::move(lengths)};
}

ViolationRow Row(CanaryLaunchTag tag, int64_t slot, int64_t position, int64_t bits) {
  ViolationRow row;
  row.kernel_kind = static_cast<int64_t>(tag);
  row.slot_idx = slot;
  row.position = position;
  row.fail_reason_bits = bits;
  return row;
}

TEST(AffectedRequests, ASlotInsideTheReadLengthMatchesOnlyThere) {
  Table table;
  AffectedRequestTracker tracker;
  tracker.Record(Forward(table, 7, {0, 1, 2, 3}, {1, 6, 6, 3}));
  const ViolationRow inside =
      Row(CanaryLaunchTag::kHeadKFull, 24, 4, FailReason::kVerifyChainHashMismatch);
  EXPECT_EQ(tracker.Match({inside}, false, nullptr), (std::vector<int64_t>{2}));
  const std::vector<AffectedRequest> affected = tracker.Take();
  ASSERT_EQ(affected.size(), 1u);
  EXPECT_EQ(affected[0].req_pool_idx, 2);
  EXPECT_EQ(affected[0].slots, (std::vector<int64_t>{24}));
  EXPECT_EQ(affected[0].positions, (std::vector<int64_t>{4}));
  EXPECT_EQ(affected[0].step, 7);
  EXPECT_EQ(affected[0].fail_reason_bits, FailReason::kVerifyChainHashMismatch);
  EXPECT_TRUE(tracker.Take().empty());
  // Slot 35 is request 3's position 5, past the 3 positions request 3 reads or writes: no table
  // names it within a read length, so the TAIL row takes every recorded row (padding excepted).
  const ViolationRow beyond =
      Row(CanaryLaunchTag::kTailKFull, 35, 5, FailReason::kVerifyRealKvHashMismatch);
  EXPECT_EQ(tracker.Match({beyond}, false, nullptr), (std::vector<int64_t>{1, 2, 3}));
  for (const AffectedRequest& request : tracker.Take()) EXPECT_TRUE(request.slots.empty());
}

TEST(AffectedRequests, AnUnmatchedSweepRowTouchesNobody) {
  Table table;
  AffectedRequestTracker tracker;
  tracker.Record(Forward(table, 0, {1, 2}, {4, 4}));
  EXPECT_TRUE(tracker.Match({Row(CanaryLaunchTag::kSweepKFull, 99, 3, 1)}, false, nullptr).empty());
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kSweepKFull, 12, 2, 1)}, false, nullptr),
            (std::vector<int64_t>{1}));
}

TEST(AffectedRequests, WithoutTheSwaTableAnSwaRowTakesEveryRecordedRow) {
  Table table;
  AffectedRequestTracker tracker;
  tracker.Record(Forward(table, 0, {1, 2}, {4, 4}));
  // Slot 12 is request 1's in the full table, but an SWA row names an SWA slot.
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kHeadKSwa, 12, 2, 1)}, false, nullptr),
            (std::vector<int64_t>{1, 2}));
}

// With the SWA group's full_to_swa table, an SWA row names only the requests whose full slots
// translate to its SWA slot: here full slot 10 * r + p holds SWA slot 100 + 10 * r + p for the last
// two positions of a 4-token row (p = 2, 3) and none (0) before them, as a window of 2 would.
TEST(AffectedRequests, TheSwaTableNamesOnlyTheRequestsHoldingTheSwaSlot) {
  Table table;
  std::vector<int64_t> lut(10 * kRows, 0);
  for (int64_t r = 1; r < kRows; ++r) {
    for (int64_t p = 2; p < 4; ++p) lut[10 * r + p] = 100 + 10 * r + p;
  }
  AffectedRequestTracker tracker;
  tracker.SetSlotTable(
      /*swa_group=*/true,
      TensorView(lut.data(), DType::kInt64, Device::CPU(), {static_cast<int64_t>(lut.size())}));
  tracker.Record(Forward(table, 0, {1, 2, 3}, {4, 4, 4}));
  // SWA slot 123 is request 2's position 3 (full slot 23). FULL rows still match untranslated:
  // full slot 12 is request 1's position 2.
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kHeadKSwa, 123, 3, 1)}, false, nullptr),
            (std::vector<int64_t>{2}));
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kHeadKFull, 12, 2, 1)}, false, nullptr),
            (std::vector<int64_t>{1}));
  const std::vector<AffectedRequest> affected = tracker.Take();
  ASSERT_EQ(affected.size(), 2u);
  EXPECT_EQ(affected[1].req_pool_idx, 2);
  EXPECT_EQ(affected[1].slots, (std::vector<int64_t>{23}));
  EXPECT_EQ(affected[1].positions, (std::vector<int64_t>{3}));
  // An SWA slot no row translates to: a TAIL row takes every recorded row, a sweep row nobody.
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kTailVSwa, 150, 1, 1)}, false, nullptr),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(tracker.Match({Row(CanaryLaunchTag::kSweepKSwa, 150, 1, 1)}, false, nullptr).empty());
}

TEST(AffectedRequests, OnlyTheLastTwoStepsAreKept) {
  Table table;
  AffectedRequestTracker tracker;
  tracker.Record(Forward(table, 3, {1}, {8}));
  tracker.Record(Forward(table, 4, {2}, {8}));
  tracker.Record(Forward(table, 5, {3}, {8}));
  // Step 3 is forgotten: its request 1 is not matched, and the overflow takes steps 4 and 5.
  EXPECT_TRUE(tracker.Match({Row(CanaryLaunchTag::kSweepKFull, 12, 2, 1)}, false, nullptr).empty());
  EXPECT_EQ(tracker.Match({}, true, nullptr), (std::vector<int64_t>{2, 3}));
  for (const AffectedRequest& request : tracker.Take()) EXPECT_TRUE(request.ring_overflow);
}

TEST(AffectedRequests, AWriteRowMatchesTheRowThatWroteTheSlot) {
  Table table;
  AffectedRequestTracker tracker;
  tracker.Record(Forward(table, 0, {1, 2}, {5, 5}));
  const ViolationRow write =
      Row(CanaryLaunchTag::kHeadKFull, 23, 9, FailReason::kWritePositionMismatch);
  EXPECT_EQ(tracker.Match({write}, false, nullptr), (std::vector<int64_t>{2}));
  const std::vector<AffectedRequest> affected = tracker.Take();
  ASSERT_EQ(affected.size(), 1u);
  EXPECT_EQ(affected[0].req_pool_idx, 2);
  EXPECT_EQ(affected[0].positions, (std::vector<int64_t>{3}));
}

// A compressed group's rows name compressed slots: the table's slots are translated through its
// full->compressed table first. Full slot 10 * r + p closes compressed slot 10 * r + p / 4 when
// p % 4 == 3; every other full slot translates to 0, which names nobody.
TEST(AffectedRequests, ASlotTableTranslatesTheTableBeforeMatching) {
  Table table;
  std::vector<int64_t> lut(10 * kRows, 0);
  for (int64_t r = 1; r < kRows; ++r) {
    for (int64_t p = 3; p < kWidth; p += 4) lut[10 * r + p] = 10 * r + p / 4;
  }
  AffectedRequestTracker tracker;
  tracker.SetSlotTable(
      /*swa_group=*/false,
      TensorView(lut.data(), DType::kInt64, Device::CPU(), {static_cast<int64_t>(lut.size())}));
  tracker.Record(Forward(table, 2, {1, 2, 3}, {8, 8, 8}));
  // Compressed slot 21 is closed by request 2's position 7 (full slot 27); full slot 21 is
  // request 2's position 1 too, yet that is not the slot the row names.
  const ViolationRow head =
      Row(CanaryLaunchTag::kHeadKFull, 21, 7, FailReason::kVerifyPositionMismatch);
  EXPECT_EQ(tracker.Match({head}, false, nullptr), (std::vector<int64_t>{2}));
  const std::vector<AffectedRequest> affected = tracker.Take();
  ASSERT_EQ(affected.size(), 1u);
  EXPECT_EQ(affected[0].slots, (std::vector<int64_t>{27}));
  EXPECT_EQ(affected[0].positions, (std::vector<int64_t>{7}));
  // A sweep row at a compressed slot no row translates to touches nobody; a TAIL row at the
  // padding slot 0 matches no table position, so it takes every recorded row.
  EXPECT_TRUE(tracker.Match({Row(CanaryLaunchTag::kSweepKFull, 35, 3, 1)}, false, nullptr).empty());
  EXPECT_EQ(tracker.Match({Row(CanaryLaunchTag::kTailKFull, 0, 2, 1)}, false, nullptr),
            (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace kvcanary::runtime
