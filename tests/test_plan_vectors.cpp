// The published plan hand cases (docs/format.md): H1-H6 on a plain table, L1-L5 with SWA windows,
// LUT clamps, short rows and the expected-token pool. Every case runs on the CPU and on CUDA
// (BackendRunner) against the same expected entries.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend_runner.h"
#include "kvcanary/kvcanary.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::BackendTest;
using testing::HostTensor;
using testing::PlanBuffers;

// Plan hand cases: req_to_token[rp][c] = rp * 16 + c, width 16, verify capacity 16, write
// capacity 8, no LUT, no pool.
class PlanHandCases : public BackendTest {
 protected:
  PlanHandCases() : req_to_token({4, 16}), plan_(16, 8) {
    for (int64_t i = 0; i < 64; ++i) req_to_token[i] = static_cast<int32_t>(i);
  }

  // Plans the batch into plan_ (its verify capacity is its arrays').
  void Run(std::vector<int64_t> rp, std::vector<int64_t> prefix, std::vector<int64_t> extend) {
    HostTensor<int64_t> rp_t = HostTensor<int64_t>::Of(rp);
    HostTensor<int64_t> prefix_t = HostTensor<int64_t>::Of(prefix);
    HostTensor<int64_t> extend_t = HostTensor<int64_t>::Of(extend);
    backend.Plan(testing::PlanCallOver(plan_, rp_t.view(), prefix_t.view(), extend_t.view(),
                                       req_to_token.view()));
  }

  void ExpectEntries(const std::vector<int64_t>& slots, const std::vector<int64_t>& prevs,
                     const std::vector<int64_t>& positions) {
    ASSERT_EQ(plan_.num_valid[0], static_cast<int32_t>(slots.size()));
    EXPECT_EQ(plan_.enable[0], 1);
    for (size_t e = 0; e < slots.size(); ++e) {
      EXPECT_EQ(plan_.slots[e], slots[e]) << e;
      EXPECT_EQ(plan_.prevs[e], prevs[e]) << e;
      EXPECT_EQ(plan_.positions[e], positions[e]) << e;
      EXPECT_EQ(plan_.tokens[e], -1) << e;
    }
  }

  void ExpectOffsets(const std::vector<int64_t>& head) {
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(plan_.offsets[i], i < static_cast<int64_t>(head.size()) ? head[i] : 0) << i;
    }
  }

  HostTensor<int32_t> req_to_token;
  PlanBuffers plan_;
};

TEST_P(PlanHandCases, H1FreshPrefillHasNoEntries) {
  Run({1}, {0}, {5});
  ExpectEntries({}, {}, {});
  ExpectOffsets({0, 5});
  EXPECT_EQ(plan_.seeds[0], -1);
  EXPECT_EQ(plan_.num_valid_reqs[0], 1);
}

TEST_P(PlanHandCases, H2DecodeVerifiesThePrefix) {
  Run({1}, {7}, {1});
  ExpectEntries({16, 17, 18, 19, 20, 21, 22}, {-1, 16, 17, 18, 19, 20, 21}, {0, 1, 2, 3, 4, 5, 6});
  ExpectOffsets({0, 1});
  EXPECT_EQ(plan_.seeds[0], 22);
}

TEST_P(PlanHandCases, H3PaddingRowContributesNothing) {
  Run({1, 0, 2}, {3, 5, 2}, {1, 1, 1});
  ExpectEntries({16, 17, 18, 32, 33}, {-1, 16, 17, -1, 32}, {0, 1, 2, 0, 1});
  ExpectOffsets({0, 1, 1, 2});
  EXPECT_EQ(plan_.seeds[0], 18);
  EXPECT_EQ(plan_.seeds[1], -1);
  EXPECT_EQ(plan_.seeds[2], 33);
  EXPECT_EQ(plan_.num_valid_reqs[0], 3);
}

TEST_P(PlanHandCases, H4OverflowDisablesVerifyAndWritesNoEntry) {
  plan_ = PlanBuffers(4, 8);
  std::fill(plan_.slots.values().begin(), plan_.slots.values().end(), 99);
  Run({1, 2}, {5, 3}, {1, 1});
  EXPECT_EQ(plan_.num_valid[0], 4);
  EXPECT_EQ(plan_.enable[0], 0);
  for (int e = 0; e < 4; ++e) EXPECT_EQ(plan_.slots[e], 99);
  ExpectOffsets({0, 1, 2});
  EXPECT_EQ(plan_.seeds[0], 20);
  EXPECT_EQ(plan_.seeds[1], 34);
}

TEST_P(PlanHandCases, H5VerifyOnlyPlanHasNoSeed) {
  Run({1}, {6}, {0});
  ExpectEntries({16, 17, 18, 19, 20, 21}, {-1, 16, 17, 18, 19, 20}, {0, 1, 2, 3, 4, 5});
  ExpectOffsets({0, 0});
  EXPECT_EQ(plan_.seeds[0], -1);
}

TEST_P(PlanHandCases, H6ShorterBatchZeroesStaleOffsets) {
  Run({1, 0, 2}, {3, 5, 2}, {1, 1, 1});
  Run({1}, {0}, {5});
  ExpectOffsets({0, 5});
}

// SWA and clamp cases L1-L5.
class PlanSwaCases : public BackendTest {
 protected:
  struct Inputs {
    std::vector<int64_t> rp, prefix, extend;
    int64_t window = 0;
    const HostTensor<int64_t>* lut = nullptr;
    const HostTensor<int32_t>* pool = nullptr;
    const HostTensor<int64_t>* valid_lens = nullptr;
    int64_t offset = 0;
  };

  PlanBuffers Run(const HostTensor<int32_t>& req_to_token, const Inputs& in,
                  int64_t capacity = 256) {
    PlanBuffers plan(capacity, 4);
    HostTensor<int64_t> rp = HostTensor<int64_t>::Of(in.rp);
    HostTensor<int64_t> prefix = HostTensor<int64_t>::Of(in.prefix);
    HostTensor<int64_t> extend = HostTensor<int64_t>::Of(in.extend);
    PlanArgs args =
        testing::PlanCallOver(plan, rp.view(), prefix.view(), extend.view(), req_to_token.view());
    args.inputs.swa_window_size = in.window;
    if (in.lut) args.inputs.full_to_swa_index_mapping = in.lut->view();
    if (in.pool) args.inputs.req_to_verify_expected_tokens = in.pool->view();
    if (in.valid_lens) args.inputs.req_to_verify_expected_tokens_valid_lens = in.valid_lens->view();
    args.inputs.kv_token_id_vs_position_offset = in.offset;
    backend.Plan(args);
    return plan;
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

TEST_P(PlanSwaCases, L1WindowVerifiesTheLastWPositions) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut = ShiftLut();
  PlanBuffers plan = Run(table, {{1}, {200}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 128);
  EXPECT_EQ(plan.positions[0], 72);
  EXPECT_EQ(plan.slots[0], 128);
  EXPECT_EQ(plan.prevs[0], 127);
  EXPECT_EQ(plan.slots[127], 255);
  EXPECT_EQ(plan.positions[127], 199);
  EXPECT_EQ(plan.seeds[0], 255);
}

TEST_P(PlanSwaCases, L2EvictedSlotsTranslateToZero) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut = ShiftLut();
  PlanBuffers plan = Run(table, {{1}, {100}, {1}, 128, &lut});
  ASSERT_EQ(plan.num_valid[0], 100);
  for (int e = 0; e < 44; ++e) EXPECT_EQ(plan.slots[e], 0) << e;
  EXPECT_EQ(plan.slots[44], 100);
  EXPECT_EQ(plan.prevs[44], 0);
  EXPECT_EQ(plan.seeds[0], 155);
}

TEST_P(PlanSwaCases, L3LutIndexPastTheEndClamps) {
  HostTensor<int32_t> table = WideTable();
  HostTensor<int64_t> lut({258});
  std::iota(lut.values().begin(), lut.values().end(), 1000);
  PlanBuffers plan = Run(table, {{1}, {3}, {1}, 0, &lut});
  ASSERT_EQ(plan.num_valid[0], 3);
  EXPECT_EQ(testing::Head(plan.slots, 3), (std::vector<int64_t>{1256, 1257, 1257}));
  EXPECT_EQ(testing::Head(plan.prevs, 3), (std::vector<int64_t>{-1, 1256, 1257}));
  EXPECT_EQ(plan.seeds[0], 1257);
}

TEST_P(PlanSwaCases, L4PositionsPastTheRowClampToItsLastColumn) {
  HostTensor<int32_t> table({2, 4}, {0, 0, 0, 0, 10, 11, 12, 13});
  PlanBuffers plan = Run(table, {{1}, {6}, {1}});
  const int64_t slots[] = {10, 11, 12, 13, 13, 13};
  const int64_t prevs[] = {-1, 10, 11, 12, 13, 13};
  ASSERT_EQ(plan.num_valid[0], 6);
  for (int e = 0; e < 6; ++e) {
    EXPECT_EQ(plan.slots[e], slots[e]) << e;
    EXPECT_EQ(plan.prevs[e], prevs[e]) << e;
  }
  EXPECT_EQ(plan.seeds[0], 13);
}

TEST_P(PlanSwaCases, L5TokenPoolUsesBatchRowValidLensAndDraftOffset) {
  HostTensor<int32_t> table({3, 8});
  HostTensor<int32_t> pool({3, 8});
  for (int c = 0; c < 8; ++c) {
    table.at(2, c) = 40 + c;
    pool.at(2, c) = 100 + c;
  }
  HostTensor<int64_t> valid_lens = HostTensor<int64_t>::Of({0, 4});
  PlanBuffers plan = Run(table, {{0, 2}, {9, 4}, {3, 1}, 0, nullptr, &pool, &valid_lens, 1});
  ASSERT_EQ(plan.num_valid[0], 4);
  const int64_t tokens[] = {101, 102, 103, -1};
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(plan.slots[e], 40 + e);
    EXPECT_EQ(plan.positions[e], e);
    EXPECT_EQ(plan.tokens[e], tokens[e]) << e;
  }
  EXPECT_EQ(testing::Head(plan.offsets, 3), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(testing::Head(plan.seeds, 2), (std::vector<int64_t>{-1, 43}));
  EXPECT_EQ(plan.num_valid_reqs[0], 2);
}

KVC_ON_EVERY_BACKEND(PlanHandCases);
KVC_ON_EVERY_BACKEND(PlanSwaCases);

}  // namespace
}  // namespace kvcanary
