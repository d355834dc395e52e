// Finding the batch row of a verify entry. The CUDA fused verify guesses the row from the offsets
// (GuessedRowOfEntry) and searches only when the guess is wrong; the CPU walks from one binary
// search (RowOfEntry). On any non-decreasing offsets, equal rows, random rows, empty rows and
// entries past the total alike, the two must name the same row for every entry.
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

// Every entry of the batch and a few past its end get the same row both ways.
void ExpectSameRows(const std::vector<int64_t>& lengths) {
  const std::vector<int64_t> scratch = OffsetsOf(lengths);
  const auto bs = static_cast<int64_t>(lengths.size());
  for (int64_t e = 0; e < scratch[bs] + 3; ++e) {
    ASSERT_EQ(GuessedRowOfEntry(scratch.data(), bs, e), RowOfEntry(scratch.data(), bs, e))
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
    EXPECT_EQ(GuessedRowOfEntry(scratch.data(), 1024, e), e / 4097);
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

TEST(RowOfEntry, AnEmptyBatchTotalFallsBackToTheSearch) {
  ExpectSameRows({0});
  ExpectSameRows({0, 0, 0});
  ExpectSameRows({0, 0, 5, 0});
}

}  // namespace
}  // namespace kvcanary::testing
