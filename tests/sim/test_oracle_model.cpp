#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kvcanary/error.h"
#include "sim/kv_pool.h"
#include "sim/oracle_model.h"

namespace kvcanary::sim {
namespace {

constexpr int kLayers = 2;
constexpr int64_t kBytes = 64;
// A large vocabulary, so that "the token changed" fails by collision with odds of 2^-30 per check.
constexpr int64_t kVocab = int64_t{1} << 30;

// A pool holding one sequence at scattered slots, with its req_to_token row.
struct Fixture {
  KvPool pool{Device::CPU(), 64, kLayers, kBytes, nullptr};
  OracleModel model{kLayers, kBytes, kVocab};
  std::vector<int64_t> tokens;
  std::vector<int32_t> row;

  explicit Fixture(int64_t len, uint64_t seed = 7) {
    std::mt19937_64 rng(seed);
    for (int64_t p = 0; p < len; ++p) {
      tokens.push_back(1 + static_cast<int64_t>(rng() % 1000));
      const auto slot = static_cast<int32_t>(1 + (p * 37) % 63);  // distinct for len <= 63
      row.push_back(slot);
      pool.WriteToken(slot, tokens.back(), p);
    }
  }
  int64_t Actual(int64_t query) const {
    return model.NextTokenFromPool(pool, row.data(), static_cast<int64_t>(row.size()), query);
  }
  int64_t Expected(int64_t query) const { return model.ExpectedNextToken(tokens, query); }
};

TEST(OracleModel, ACorrectCacheGivesTheExpectedToken) {
  for (int64_t len : {1, 2, 7, 33, 63}) {
    Fixture f(len);
    const int64_t query = f.tokens.back();
    EXPECT_EQ(f.Actual(query), f.Expected(query)) << len;
    // The generic reader path agrees with the pool fast path.
    const auto reader = [&](int layer, int kv, int64_t p) {
      return f.pool.HostRow(layer, kv, f.row[p]);
    };
    EXPECT_EQ(f.model.NextToken(reader, len, query), f.Actual(query));
    EXPECT_EQ(f.model.Hash(reader, len, query),
              f.model.HashFromPool(f.pool, f.row.data(), len, query));
  }
}

TEST(OracleModel, TheTokenDependsOnTheQueryAndIsNeverZero) {
  Fixture f(10);
  EXPECT_NE(f.Actual(5), f.Actual(6));
  OracleModel tiny(kLayers, kBytes, 2);  // vocab {0, 1}: only 1 may come out
  for (int64_t q = 0; q < 50; ++q) {
    EXPECT_EQ(tiny.NextTokenFromPool(f.pool, f.row.data(), 10, q), 1);
  }
}

TEST(OracleModel, AFlippedByteAnywhereChangesTheToken) {
  constexpr int64_t kLen = 20;
  Fixture f(kLen);
  const int64_t query = f.tokens.back();
  const int64_t expected = f.Expected(query);
  const uint64_t expected_hash = f.model.HashFromPool(f.pool, f.row.data(), kLen, query);
  int checks = 0;
  for (int64_t p = 0; p < kLen; ++p) {
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int64_t byte :
             {int64_t{0}, int64_t{7}, int64_t{15}, int64_t{16}, int64_t{40}, kBytes - 1}) {
          f.pool.FlipByte(layer, kv, f.row[p], byte);
          EXPECT_NE(f.model.HashFromPool(f.pool, f.row.data(), kLen, query), expected_hash);
          EXPECT_NE(f.Actual(query), expected)
              << "p=" << p << " layer=" << layer << " kv=" << kv << " byte=" << byte;
          f.pool.FlipByte(layer, kv, f.row[p], byte);  // restore
          ++checks;
        }
      }
    }
  }
  EXPECT_EQ(checks, kLen * kLayers * 2 * 6);
  EXPECT_EQ(f.Actual(query), expected);  // every flip was undone
}

TEST(OracleModel, AWrongSlotMappingChangesTheToken) {
  constexpr int64_t kLen = 30;
  Fixture f(kLen);
  const int64_t query = f.tokens.back();
  const int64_t expected = f.Expected(query);
  for (int64_t p = 0; p < kLen; ++p) {
    const int32_t saved = f.row[p];
    // Another live slot of the same sequence, the padding slot, and a slot out of the pool.
    for (int32_t wrong : {f.row[(p + 1) % kLen], int32_t{0}, int32_t{1000}, int32_t{-3}}) {
      f.row[p] = wrong;
      EXPECT_NE(f.Actual(query), expected) << "p=" << p << " slot=" << wrong;
    }
    f.row[p] = saved;
  }
  // Two positions swapped: the same bytes in another order.
  std::swap(f.row[3], f.row[4]);
  EXPECT_NE(f.Actual(query), expected);
}

TEST(OracleModel, TheSameTokenAtAnotherPositionIsADifferentRow) {
  // A stale slot holding the right token at the wrong position must not pass.
  KvPool pool(Device::CPU(), 8, kLayers, kBytes, nullptr);
  OracleModel model(kLayers, kBytes, kVocab);
  pool.WriteToken(1, 42, 0);
  pool.WriteToken(2, 42, 5);  // same token, position 5
  const int32_t wrong[] = {2};
  EXPECT_NE(model.NextTokenFromPool(pool, wrong, 1, 42), model.ExpectedNextToken({42}, 42));
  const int32_t right[] = {1};
  EXPECT_EQ(model.NextTokenFromPool(pool, right, 1, 42), model.ExpectedNextToken({42}, 42));
}

TEST(OracleModel, ExpectedStateMatchesTheFullRecomputationAtEveryLength) {
  Fixture f(40);
  ExpectedState state = f.model.NewExpectedState();
  std::vector<int64_t> prefix;
  for (int64_t token : f.tokens) {
    state.Append(token);
    prefix.push_back(token);
    EXPECT_EQ(state.length(), static_cast<int64_t>(prefix.size()));
    EXPECT_EQ(state.NextToken(token), f.model.ExpectedNextToken(prefix, token));
    EXPECT_EQ(state.NextToken(token),
              f.model.NextTokenFromPool(f.pool, f.row.data(), state.length(), token));
  }
  // A copy continues independently.
  ExpectedState fork = state;
  fork.Append(5);
  EXPECT_EQ(state.length(), 40);
  EXPECT_NE(fork.Hash(1), state.Hash(1));
}

TEST(OracleModel, OddRowSizesFoldEveryWord) {
  // 8, 16 and 24 bytes past the last group of 32 take the tail branch.
  for (int64_t bytes : {16, 48, 80, 8, 24}) {
    OracleModel model(1, bytes, kVocab);
    std::vector<uint8_t> row(static_cast<size_t>(bytes), 3);
    const auto read = [&](int, int, int64_t) -> const uint8_t* { return row.data(); };
    const uint64_t before = model.Hash(read, 2, 9);
    row.back() ^= 1;
    EXPECT_NE(model.Hash(read, 2, 9), before) << bytes;
    // A null row folds as zeros.
    std::fill(row.begin(), row.end(), 0);
    const auto null = [](int, int, int64_t) -> const uint8_t* { return nullptr; };
    EXPECT_EQ(model.Hash(null, 3, 9), model.Hash(read, 3, 9)) << bytes;
  }
}

TEST(OracleModel, InvalidGeometryThrows) {
  EXPECT_THROW(OracleModel(0, 64, 100), Error);
  EXPECT_THROW(OracleModel(1, 12, 100), Error);
  EXPECT_THROW(OracleModel(1, 64, 1), Error);
  OracleModel model(3, 64, 100);
  KvPool pool(Device::CPU(), 4, 2, 64, nullptr);
  const int32_t row[] = {1};
  EXPECT_THROW(model.NextTokenFromPool(pool, row, 1, 1), Error);
}

}  // namespace
}  // namespace kvcanary::sim
