#include "kvcanary/runtime/capacities.h"

#include <gtest/gtest.h>

#include "runtime/error_message.h"

#include <optional>
#include <string>

#include "kvcanary/error.h"
#include "kvcanary/plan.h"

namespace kvcanary::runtime {
namespace {

struct CapacityVector {
  int64_t rtp, msl, pool, g, d, mpt;
  std::optional<int64_t> ch;
  int64_t verify, req, entry;
};

// Every row of SGLang's Capacities vector table.
const CapacityVector kVectors[] = {
    {100, 16, 100, 0, 0, 8192, std::nullopt, 300, 100, 8192},
    {100, 16, 7, 0, 0, 8192, std::nullopt, 21, 100, 8192},
    {100, 16, 500, 0, 0, 8192, std::nullopt, 1500, 100, 8192},
    {128, 16, 100, 0, 0, 8192, std::nullopt, 300, 128, 8192},
    {128, 16, 100, 256, 0, 8192, std::nullopt, 300, 256, 8192},
    {512, 16, 100, 32, 0, 8192, std::nullopt, 300, 512, 8192},
    {100, 16, 100, 0, 0, 8192, 512, 300, 100, 512},
    {64, 16, 100, 256, 4, 8192, 512, 300, 256, 1024},
    {16, 16, 100, 64, 0, 8192, 32, 300, 64, 64},
    // SGLang: verify 30; kvcanary lets the longest row fit (R2 in docs/ARCHITECTURE.md).
    {100, 64, 10, 0, 0, 8192, std::nullopt, 64, 100, 8192},
};

TEST(Capacities, SpecVectors) {
  for (size_t i = 0; i < std::size(kVectors); ++i) {
    const CapacityVector& v = kVectors[i];
    const Capacities c = Capacities::FromArgs(v.rtp, v.msl, v.pool, v.g, v.d, v.mpt, v.ch);
    EXPECT_EQ(c.verify_capacity, v.verify) << "row " << i;
    EXPECT_EQ(c.write_req_capacity, v.req) << "row " << i;
    EXPECT_EQ(c.write_entry_capacity, v.entry) << "row " << i;
  }
}

TEST(Capacities, NegativeChunkSizeMeansUnlimited) {
  const Capacities c = Capacities::FromArgs(100, 16, 100, 0, 0, 8192, -1);
  EXPECT_EQ(c.write_entry_capacity, 8192);
}

TEST(Capacities, ArgumentErrorsUseSGLangTexts) {
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(0, 16, 100, 0, 0, 8192, std::nullopt); }),
            "kv-canary: req_to_token_pool_size must be positive, got 0");
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, -3, 100, 0, 0, 8192, std::nullopt); }),
            "kv-canary: max_seq_len_per_req must be positive, got -3");
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, 16, 0, 0, 0, 8192, std::nullopt); }),
            "kv-canary: pool_slot_count must be positive, got 0");
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, 16, 100, -1, 0, 8192, std::nullopt); }),
            "kv-canary: cuda_graph_max_bs must be non-negative, got -1");
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, 16, 100, 0, -2, 8192, std::nullopt); }),
            "kv-canary: speculative_num_draft_tokens must be non-negative, got -2");
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, 16, 100, 0, 0, 0, std::nullopt); }),
            "kv-canary: max_prefill_tokens must be positive, got 0");
}

TEST(Capacities, ArgumentsAreCheckedInSignatureOrder) {
  // Both the pool size and the draft tokens are invalid: the earlier argument is named.
  EXPECT_EQ(ErrorMessage([] { Capacities::FromArgs(100, 16, -1, 0, -1, 8192, std::nullopt); }),
            "kv-canary: pool_slot_count must be positive, got -1");
}

// A forward's rows or tokens past an op's count could not be planned: refused, where a derived
// verify capacity past it is lowered by install instead.
TEST(Capacities, WriteCapacitiesPastAnOpsCountAreRefused) {
  EXPECT_EQ(ErrorMessage(
                [] { Capacities::FromArgs(100, 16, 100, 0, 0, int64_t{1} << 31, std::nullopt); }),
            "kv-canary: per_forward_write_entry_capacity must be in [1, 2147483647], got "
            "2147483648");
  EXPECT_EQ(ErrorMessage([] {
              Capacities::FromArgs(100, 16, 100, int64_t{1} << 31, 0, 8192, std::nullopt);
            }),
            "kv-canary: per_forward_write_req_capacity must be in [1, 2147483647], got "
            "2147483648");
  EXPECT_EQ(
      Capacities::FromArgs(100, 16, int64_t{1} << 31, 0, 0, 8192, std::nullopt).verify_capacity,
      int64_t{3} << 31);
}

TEST(Capacities, OverflowingProductThrows) {
  EXPECT_THROW(Capacities::FromArgs(int64_t{1} << 40, 16, 100, 0, int64_t{1} << 40, 8192,
                                    std::nullopt),
               Error);
}

TEST(Capacities, WorkspaceBytesFollowTheFormula) {
  const Capacities c = Capacities::FromArgs(64, 16, 100, 256, 4, 8192, 512);
  const int64_t per_group =
      VerifyPlanAllocationBytes(c.verify_capacity) + WritePlanAllocationBytes(c.write_req_capacity);
  for (int groups : {1, 2}) {
    const int64_t expected = groups * per_group + 16 * c.write_entry_capacity +
                             32 * c.write_req_capacity + 8 * (c.write_req_capacity + 1) +
                             groups * 8 * c.write_entry_capacity + ForwardSnapshotBytes(groups);
    EXPECT_EQ(ForwardWorkspaceBytes(c, groups), expected) << groups;
  }
  // Snapshot: enable per group, two int64 [12] counter arrays, write index, SWA totals.
  EXPECT_EQ(ForwardSnapshotBytes(2), 2 * 4 + 2 * 12 * 8 + 4 + 8);
  EXPECT_THROW(ForwardWorkspaceBytes(c, 0), Error);
  EXPECT_THROW(ForwardWorkspaceBytes(c, 3), Error);
}

TEST(Capacities, WorkspaceBytesGrowWithTheSecondGroup) {
  const Capacities c = Capacities::FromArgs(100, 16, 100, 0, 0, 8192, std::nullopt);
  // verify 300, req 100, entry 8192: the second group adds its plans and its slot buffer.
  const int64_t plans = (4 * 300 * 8 + 8) + ((2 * 100 + 1) * 8 + 4);
  EXPECT_EQ(ForwardWorkspaceBytes(c, 2) - ForwardWorkspaceBytes(c, 1), plans + 8 * 8192 + 4);
}

}  // namespace
}  // namespace kvcanary::runtime
