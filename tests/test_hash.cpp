// The hash test vectors of docs/format.md.
#include "kvcanary/hash.h"

#include <gtest/gtest.h>

namespace kvcanary {
namespace {

TEST(Hash, Splitmix64MatchesPinnedVectors) {
  const std::pair<uint64_t, uint64_t> pins[] = {
      {0x9E3779B97F4A7C15ull, 0xE220A8397B1DCDAFull}, {0x0000000000000001ull, 0x5692161D100B05E5ull},
      {0xDEADBEEFCAFEBABEull, 0x7AD6664F09FFE52Cull}, {0xFFFFFFFFFFFFFFFFull, 0xB4D055FCF2CBBD7Bull},
      {0x8000000000000000ull, 0x25C26EA579CEA98Aull}, {0xC0FFEE1234567890ull, 0xDE7FAE23A9A1B716ull},
      {0x0000000000000000ull, 0x0000000000000000ull}};
  for (const auto& [input, output] : pins) EXPECT_EQ(Splitmix64(input), output) << std::hex << input;
}

TEST(Hash, HeadHashIsSplitmixOfAnchorAsInt64) {
  EXPECT_EQ(ChainHeadHash(), 0xDE7FAE23A9A1B716ull);
  EXPECT_EQ(ToSigned(ChainHeadHash()), -2414019407054260458LL);
}

TEST(Hash, Mix3MatchesPinnedVectorsAndIsOrdered) {
  EXPECT_EQ(Splitmix64Mix3(0xDE7FAE23A9A1B716ull, ToUnsigned(-1), 0), 0xE5A9A05404A720CFull);
  EXPECT_EQ(Splitmix64Mix3(0, 0, 0), 0u);
  EXPECT_NE(Splitmix64Mix3(1, 2, 3), Splitmix64Mix3(3, 2, 1));
}

TEST(Hash, RecordHashFeedsPrevHashFirst) {
  EXPECT_EQ(RecordHash(11, 0, ToSigned(ChainHeadHash())), 0x89cd2abfbebc0649ull);
  EXPECT_EQ(ChainStep(ChainHeadHash(), 11, 0), 0x89cd2abfbebc0649ull);
}

TEST(Hash, FoldOfSixteenZeroBytesIsZero) {
  EXPECT_EQ(FoldRealKvBlock(0, 0, 0), 0u);
  EXPECT_EQ(CombineSourceHash(0, 0), 0u);
}

}  // namespace
}  // namespace kvcanary
