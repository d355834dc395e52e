#include "kvcanary/runtime/token_oracle.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "runtime/blake2b.h"

namespace kvcanary::runtime {
namespace {

std::string Hex(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const uint8_t b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i % 251);
  return bytes;
}

// RFC 7693 Appendix A: BLAKE2b-512("abc").
TEST(Blake2b, Rfc7693AppendixA) {
  EXPECT_EQ(Hex(Blake2b("abc", 3, 64)),
            "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
            "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923");
}

// Block boundaries (exactly one block, one byte more, two blocks, many), against Python's
// hashlib.blake2b: the last full block must be the final one, not followed by an empty block.
TEST(Blake2b, BlockBoundariesMatchReference) {
  struct Case {
    size_t n;
    const char* digest64_prefix;
    const char* digest8;
  };
  const Case cases[] = {{128, "2319e3789c47e2daa5fe807f61bec2a1", "c2d13df1b6617e82"},
                        {129, "f59711d44a031d5f97a9413c065d1e61", "f667e47a6d5350a6"},
                        {256, "93463ac058b6163eb43be3f5bb32b285", "511a778d539d7a3c"},
                        {1000, "c11e1c0340bd7e5a1b275f1230c962fa", "669ca836a838577f"}};
  for (const Case& c : cases) {
    const std::vector<uint8_t> input = Pattern(c.n);
    EXPECT_EQ(Hex(Blake2b(input.data(), c.n, 64)).substr(0, 32), c.digest64_prefix) << c.n;
    EXPECT_EQ(Hex(Blake2b(input.data(), c.n, 8)), c.digest8) << c.n;
  }
}

TEST(Blake2b, ShortDigestIsNotAPrefixOfTheLongOne) {
  const std::vector<uint8_t> long_digest = Blake2b("abc", 3, 64);
  const std::vector<uint8_t> short_digest = Blake2b("abc", 3, 8);
  EXPECT_NE(short_digest, std::vector<uint8_t>(long_digest.begin(), long_digest.begin() + 8));
}

TEST(Blake2b, RejectsDigestLengthOutsideOneToSixtyFour) {
  EXPECT_THROW(Blake2b("abc", 3, 0), Error);
  EXPECT_THROW(Blake2b("abc", 3, 65), Error);
}

// SGLang's token-oracle vectors.
TEST(TokenOracle, RequestIdHashVectors) {
  EXPECT_EQ(RequestIdHash("req-0"), -8966579018032821426);
  EXPECT_EQ(static_cast<uint64_t>(RequestIdHash("req-0")), 0x83904fe3dbaecb4eull);
  EXPECT_EQ(RequestIdHash("abc"), 6455300059550759896);
  EXPECT_EQ(RequestIdHash(""), -5426141060434712860);
}

TEST(TokenOracle, HashOracleVectors) {
  const HashOracle oracle(32000);
  const std::pair<int64_t, std::vector<int32_t>> rows[] = {
      {1, {2789, 0, 15856, 14730}},  // position 1: splitmix64(0) = 0
      {7, {3604, 16492, 7132, 31252}},
      {-5, {10062, 14407, 8691, 12983}},
  };
  for (const auto& [gid, tokens] : rows) {
    for (int64_t position = 0; position < 4; ++position) {
      EXPECT_EQ(oracle.Token(gid, position), tokens[position]) << gid << " " << position;
    }
  }
}

TEST(TokenOracle, RequestIdFeedsTheOracle) {
  const HashOracle oracle(151936);
  EXPECT_EQ(oracle.vocab_size(), 151936);
  EXPECT_EQ(oracle.Token(RequestIdHash("req-0"), 10), 124981);
}

TEST(TokenOracle, GroupIdPrefersTheBootstrapRoom) {
  EXPECT_EQ(OracleGroupId(42, "req-0"), 42);
  EXPECT_EQ(OracleGroupId(0, "req-0"), 0);
  EXPECT_EQ(OracleGroupId(-1, "req-0"), RequestIdHash("req-0"));
  EXPECT_EQ(OracleGroupId(std::nullopt, "abc"), 6455300059550759896);
}

TEST(TokenOracle, TokensStayBelowTheVocabulary) {
  const HashOracle oracle(3);
  for (int64_t position = 0; position < 100; ++position) {
    const int32_t token = oracle.Token(-123456789, position);
    EXPECT_GE(token, 0);
    EXPECT_LT(token, 3);
  }
  const HashOracle widest(int64_t{1} << 31);
  EXPECT_GE(widest.Token(99, 5), 0);
}

TEST(TokenOracle, RejectsVocabularyOutsideInt32Tokens) {
  EXPECT_THROW(HashOracle(0), Error);
  EXPECT_THROW(HashOracle(-1), Error);
  EXPECT_THROW(HashOracle((int64_t{1} << 31) + 1), Error);
}

}  // namespace
}  // namespace kvcanary::runtime
