// The plan hand cases of spec/kernels.md §17 (H1-H6, and the SWA and clamp cases L1-L5) through
// the CUDA backend, with the inputs and expected values of tests/test_vectors.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "device_buffer.h"
#include "device_state.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::DevicePlanBuffers;
using testing::HostTensor;
using testing::PlanBuffers;

// Plan hand cases H1-H6: req_to_token[rp][c] = rp * 16 + c, width 16, verify capacity 16, write
// capacity 8, no LUT, no pool.
class CudaPlanHandCases : public testing::DeviceTest {
 protected:
  static HostTensor<int32_t> Table() {
    HostTensor<int32_t> table({4, 16});
    std::iota(table.values().begin(), table.values().end(), 0);
    return table;
  }
  static PlanBuffers Run(const testing::PlanBatch& in, int64_t verify_capacity = 16,
                         int64_t fill_slots = 0) {
    PlanBuffers initial(verify_capacity, 8);
    std::fill(initial.slots.values().begin(), initial.slots.values().end(), fill_slots);
    const DevicePlanBuffers plan(initial);
    testing::PlanOnCuda(plan, Table(), in);
    return plan.ToHost();
  }
  static void ExpectEntries(const PlanBuffers& plan, const std::vector<int64_t>& slots,
                            const std::vector<int64_t>& prevs,
                            const std::vector<int64_t>& positions) {
    ASSERT_EQ(plan.num_valid[0], static_cast<int32_t>(slots.size()));
    EXPECT_EQ(plan.enable[0], 1);
    for (size_t e = 0; e < slots.size(); ++e) {
      EXPECT_EQ(plan.slots[e], slots[e]) << e;
      EXPECT_EQ(plan.prevs[e], prevs[e]) << e;
      EXPECT_EQ(plan.positions[e], positions[e]) << e;
      EXPECT_EQ(plan.tokens[e], -1) << e;
    }
  }
  static void ExpectOffsets(const PlanBuffers& plan, const std::vector<int64_t>& head) {
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(plan.offsets[i], i < static_cast<int64_t>(head.size()) ? head[i] : 0) << i;
    }
  }
};

TEST_F(CudaPlanHandCases, H1FreshPrefillHasNoEntries) {
  const PlanBuffers plan = Run({{1}, {0}, {5}});
  ExpectEntries(plan, {}, {}, {});
  ExpectOffsets(plan, {0, 5});
  EXPECT_EQ(plan.seeds[0], -1);
  EXPECT_EQ(plan.num_valid_reqs[0], 1);
}

TEST_F(CudaPlanHandCases, H2DecodeVerifiesThePrefix) {
  const PlanBuffers plan = Run({{1}, {7}, {1}});
  ExpectEntries(plan, {16, 17, 18, 19, 20, 21, 22}, {-1, 16, 17, 18, 19, 20, 21},
                {0, 1, 2, 3, 4, 5, 6});
  ExpectOffsets(plan, {0, 1});
  EXPECT_EQ(plan.seeds[0], 22);
}

TEST_F(CudaPlanHandCases, H3PaddingRowContributesNothing) {
  const PlanBuffers plan = Run({{1, 0, 2}, {3, 5, 2}, {1, 1, 1}});
  ExpectEntries(plan, {16, 17, 18, 32, 33}, {-1, 16, 17, -1, 32}, {0, 1, 2, 0, 1});
  ExpectOffsets(plan, {0, 1, 1, 2});
  EXPECT_EQ(plan.seeds[0], 18);
  EXPECT_EQ(plan.seeds[1], -1);
  EXPECT_EQ(plan.seeds[2], 33);
  EXPECT_EQ(plan.num_valid_reqs[0], 3);
}

TEST_F(CudaPlanHandCases, H4OverflowDisablesVerifyAndWritesNoEntry) {
  const PlanBuffers plan = Run({{1, 2}, {5, 3}, {1, 1}}, /*verify_capacity=*/4, /*fill=*/99);
  EXPECT_EQ(plan.num_valid[0], 4);
  EXPECT_EQ(plan.enable[0], 0);
  for (int e = 0; e < 4; ++e) EXPECT_EQ(plan.slots[e], 99);
  ExpectOffsets(plan, {0, 1, 2});
  EXPECT_EQ(plan.seeds[0], 20);
  EXPECT_EQ(plan.seeds[1], 34);
}

TEST_F(CudaPlanHandCases, H5VerifyOnlyPlanHasNoSeed) {
  const PlanBuffers plan = Run({{1}, {6}, {0}});
  ExpectEntries(plan, {16, 17, 18, 19, 20, 21}, {-1, 16, 17, 18, 19, 20}, {0, 1, 2, 3, 4, 5});
  ExpectOffsets(plan, {0, 0});
  EXPECT_EQ(plan.seeds[0], -1);
}

TEST_F(CudaPlanHandCases, H6ShorterBatchZeroesStaleOffsets) {
  const DevicePlanBuffers plan{PlanBuffers(16, 8)};
  testing::PlanOnCuda(plan, Table(), {{1, 0, 2}, {3, 5, 2}, {1, 1, 1}});
  testing::PlanOnCuda(plan, Table(), {{1}, {0}, {5}});
  ExpectOffsets(plan.ToHost(), {0, 5});
}

// SWA and clamp cases L1-L5 (verify capacity 256, write capacity 4).
class CudaPlanSwaCases : public testing::DeviceTest {
 protected:
  static PlanBuffers Run(const HostTensor<int32_t>& table, const testing::PlanBatch& in) {
    const DevicePlanBuffers plan{PlanBuffers(256, 4)};
    testing::PlanOnCuda(plan, table, in);
    return plan.ToHost();
  }
  // width 256, row 1 slots 256 + pos; LUT len 1025, LUT[i] = i - 200 for i >= 300 else 0.
  static HostTensor<int32_t> WideTable() {
    HostTensor<int32_t> t({2, 256});
    for (int c = 0; c < 256; ++c) t.at(1, c) = 256 + c;
    return t;
  }
  static HostTensor<int64_t> ShiftLut() {
    HostTensor<int64_t> lut({1025});
    for (int i = 300; i < 1025; ++i) lut[i] = i - 200;
    return lut;
  }
};

TEST_F(CudaPlanSwaCases, L1WindowVerifiesTheLastWPositions) {
  const HostTensor<int64_t> lut = ShiftLut();
  const PlanBuffers plan = Run(WideTable(), {{1}, {200}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 128);
  EXPECT_EQ(plan.positions[0], 72);
  EXPECT_EQ(plan.slots[0], 128);
  EXPECT_EQ(plan.prevs[0], 127);
  EXPECT_EQ(plan.slots[127], 255);
  EXPECT_EQ(plan.positions[127], 199);
  EXPECT_EQ(plan.seeds[0], 255);
}

TEST_F(CudaPlanSwaCases, L2EvictedSlotsTranslateToZero) {
  const HostTensor<int64_t> lut = ShiftLut();
  const PlanBuffers plan = Run(WideTable(), {{1}, {100}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 100);
  for (int e = 0; e < 44; ++e) EXPECT_EQ(plan.slots[e], 0) << e;
  EXPECT_EQ(plan.slots[44], 100);
  EXPECT_EQ(plan.prevs[44], 0);
  EXPECT_EQ(plan.seeds[0], 155);
}

TEST_F(CudaPlanSwaCases, L3LutIndexPastTheEndClamps) {
  HostTensor<int64_t> lut({258});
  std::iota(lut.values().begin(), lut.values().end(), 1000);
  const PlanBuffers plan = Run(WideTable(), {{1}, {3}, {1}, 0, &lut});
  ASSERT_EQ(plan.num_valid[0], 3);
  const int64_t slots[] = {1256, 1257, 1257};
  const int64_t prevs[] = {-1, 1256, 1257};
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(plan.slots[e], slots[e]) << e;
    EXPECT_EQ(plan.prevs[e], prevs[e]) << e;
  }
  EXPECT_EQ(plan.seeds[0], 1257);
}

TEST_F(CudaPlanSwaCases, L4PositionsPastTheRowClampToItsLastColumn) {
  const HostTensor<int32_t> table({2, 4}, {0, 0, 0, 0, 10, 11, 12, 13});
  const PlanBuffers plan = Run(table, {{1}, {6}, {1}});
  const int64_t slots[] = {10, 11, 12, 13, 13, 13};
  const int64_t prevs[] = {-1, 10, 11, 12, 13, 13};
  ASSERT_EQ(plan.num_valid[0], 6);
  for (int e = 0; e < 6; ++e) {
    EXPECT_EQ(plan.slots[e], slots[e]) << e;
    EXPECT_EQ(plan.prevs[e], prevs[e]) << e;
  }
  EXPECT_EQ(plan.seeds[0], 13);
}

TEST_F(CudaPlanSwaCases, L5TokenPoolUsesBatchRowValidLensAndDraftOffset) {
  HostTensor<int32_t> table({3, 8});
  HostTensor<int32_t> pool({3, 8});
  for (int c = 0; c < 8; ++c) {
    table.at(2, c) = 40 + c;
    pool.at(2, c) = 100 + c;
  }
  const HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({0, 4});
  const PlanBuffers plan = Run(table, {{0, 2}, {9, 4}, {3, 1}, 0, nullptr, &pool, &valid_lens, 1});
  ASSERT_EQ(plan.num_valid[0], 4);
  const int64_t tokens[] = {101, 102, 103, -1};
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(plan.slots[e], 40 + e);
    EXPECT_EQ(plan.positions[e], e);
    EXPECT_EQ(plan.tokens[e], tokens[e]) << e;
  }
  EXPECT_EQ(plan.offsets[0], 0);
  EXPECT_EQ(plan.offsets[1], 0);
  EXPECT_EQ(plan.offsets[2], 1);
  EXPECT_EQ(plan.seeds[0], -1);
  EXPECT_EQ(plan.seeds[1], 43);
  EXPECT_EQ(plan.num_valid_reqs[0], 2);
}

}  // namespace
}  // namespace kvcanary
