// Finding the batch row of a verify entry. The CUDA fused verify guesses the row from the offsets
// and loads its inputs with its bounds (LocateRow), searching only when the guess is wrong; the CPU
// walks from one binary search (RowOfEntry). On any non-decreasing offsets, equal rows, random
// rows, empty rows and entries past the total alike, the two must name the same row for every
// entry, and LocateRow must hand back that row's first entry and inputs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/plan_math.h"

namespace kvcanary::testing {
namespace {

// Offsets as stage 1 writes them: scratch[r] = the lengths of rows [0, r), scratch[bs] the total.
std::vector<int64_t> OffsetsOf(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> scratch(lengths.size() + 1, 0);
  for (size_t r = 0; r < lengths.size(); ++r) scratch[r + 1] = scratch[r] + lengths[r];
  return scratch;
}

// The plan inputs of a batch whose row r has prefix 1000 + r in req_to_token row 7 * r.
struct Inputs {
  std::vector<int64_t> prefix_lens;
  std::vector<int64_t> req_pool_indices;
  PlanInputParams in;
  explicit Inputs(int64_t bs) : prefix_lens(bs), req_pool_indices(bs) {
    for (int64_t r = 0; r < bs; ++r) {
      prefix_lens[r] = 1000 + r;
      req_pool_indices[r] = 7 * r;
    }
    in.bs = bs;
    in.prefix_lens = prefix_lens.data();
    in.req_pool_indices = req_pool_indices.data();
  }
};

int64_t LocatedRowOf(const std::vector<int64_t>& scratch, const Inputs& inputs, int64_t e) {
  const LocatedRow row = LocateRow(scratch.data(), inputs.in, scratch.back(), e);
  EXPECT_EQ(row.begin, scratch[row.r]);
  EXPECT_EQ(row.prefix_len, 1000 + row.r);
  EXPECT_EQ(row.rp, 7 * row.r);
  return row.r;
}

// Every entry of the batch and a few past its end get the same row both ways.
void ExpectSameRows(const std::vector<int64_t>& lengths) {
  const std::vector<int64_t> scratch = OffsetsOf(lengths);
  const auto bs = static_cast<int64_t>(lengths.size());
  const Inputs inputs(bs);
  for (int64_t e = 0; e < scratch[bs] + 3; ++e) {
    ASSERT_EQ(LocatedRowOf(scratch, inputs, e), RowOfEntry(scratch.data(), bs, e))
        << "entry " << e << " of " << bs << " rows";
  }
}

TEST(RowOfEntry, EqualRowsAreFoundByTheGuessAlone) {
  for (int64_t bs : {1, 2, 3, 7, 64, 1000}) {
    for (int64_t length : {1, 2, 5, 33, 4096}) {
      if (bs * length > 300000) continue;
      ExpectSameRows(std::vector<int64_t>(bs, length));
    }
  }
  // The guess itself: entry e of bs equal rows of length L lies in row e / L.
  const std::vector<int64_t> scratch = OffsetsOf(std::vector<int64_t>(1024, 4097));
  for (int64_t e : {int64_t{0}, int64_t{4096}, int64_t{4097}, int64_t{1024 * 4097 - 1}}) {
    EXPECT_EQ(GuessRow(1024, scratch[1024], e), e / 4097);
  }
}

TEST(RowOfEntry, RandomAndEmptyRowsMatchTheSearch) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 300; ++round) {
    const int64_t bs = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<int64_t> lengths(bs);
    for (int64_t& length : lengths) {
      const uint64_t kind = rng() % 4;  // empty, short, long, equal to the first
      length = kind == 0   ? 0
               : kind == 1 ? int64_t(rng() % 4)
               : kind == 2 ? int64_t(rng() % 300)
                           : 17;
    }
    ExpectSameRows(lengths);
  }
}

// The row the kernel found before LocateRow loaded the inputs with the bounds (the reference for
// any offsets, decreasing ones included, where RowOfEntry's answer is not defined by the data).
int64_t RowFoundBefore(const int64_t* scratch, int64_t bs, int64_t e) {
  if (bs <= kSearchedBatchRows) return RowOfEntry(scratch, bs, e);
  const int64_t total = scratch[bs];
  if (total <= 0 || e < 0) return RowOfEntry(scratch, bs, e);
  const int64_t guess = GuessRow(bs, total, e);
  if (scratch[guess] > e) return RowOfEntryIn(scratch, 0, guess, e);
  if (guess + 1 == bs || scratch[guess + 1] > e) return guess;
  return RowOfEntryIn(scratch, guess + 1, bs, e);
}

TEST(RowOfEntry, AnyOffsetsGiveTheRowFoundBeforeAndOnlyRowsOfTheBatch) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 2000; ++round) {
    const int64_t bs = 1 + static_cast<int64_t>(rng() % 9);
    std::vector<int64_t> scratch(bs + 1);
    for (int64_t& offset : scratch) offset = static_cast<int64_t>(rng() % 41) - 10;
    const Inputs inputs(bs);
    for (int64_t e = -2; e < 35; ++e) {
      const int64_t r = LocatedRowOf(scratch, inputs, e);
      ASSERT_GE(r, 0);
      ASSERT_LT(r, bs);
      ASSERT_EQ(r, RowFoundBefore(scratch.data(), bs, e)) << "entry " << e << " of " << bs;
    }
  }
}

TEST(RowOfEntry, AnEmptyBatchTotalFallsBackToTheSearch) {
  ExpectSameRows({0});
  ExpectSameRows({0, 0, 0});
  ExpectSameRows({0, 0, 5, 0});
}

}  // namespace
}  // namespace kvcanary::testing
