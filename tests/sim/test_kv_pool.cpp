#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "kvcanary/error.h"
#include "sim/kv_bytes.h"
#include "sim/kv_pool.h"

namespace kvcanary::sim {
namespace {

std::vector<uint8_t> Expected(int64_t token, int64_t position, int layer, int kv, int64_t bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  FillKvBytes(token, position, layer, kv, out.data(), bytes);
  return out;
}

std::vector<uint8_t> Row(const KvPool& pool, int layer, int kv, int64_t slot) {
  const uint8_t* p = pool.HostRow(layer, kv, slot);
  return std::vector<uint8_t>(p, p + pool.bytes_per_token());
}

TEST(FillKvBytes, IsDeterministicAndDependsOnEveryInputInTheFirst16Bytes) {
  constexpr int64_t kBytes = 48;
  const auto base = Expected(17, 5, 1, 0, kBytes);
  EXPECT_EQ(base, Expected(17, 5, 1, 0, kBytes));
  const std::vector<std::vector<uint8_t>> changed = {
      Expected(18, 5, 1, 0, kBytes), Expected(17, 6, 1, 0, kBytes), Expected(17, 5, 0, 0, kBytes),
      Expected(17, 5, 1, 1, kBytes)};
  for (const auto& other : changed) {
    // Every one of the first 16 bytes differs with overwhelming likelihood; at least most must.
    int differing = 0;
    for (int b = 0; b < 16; ++b) differing += base[b] != other[b];
    EXPECT_GE(differing, 12);
  }
}

TEST(FillKvBytes, WordsOfOneRowDiffer) {
  const auto row = Expected(3, 0, 0, 0, 64);
  std::set<uint64_t> words;
  for (int w = 0; w < 8; ++w) {
    uint64_t word;
    std::memcpy(&word, row.data() + 8 * w, 8);
    words.insert(word);
  }
  EXPECT_EQ(words.size(), 8u);
}

TEST(FillKvBytes, ATrailingPartialWordIsThePrefixOfTheFullOne) {
  const auto full = Expected(9, 4, 2, 1, 16);
  const auto part = Expected(9, 4, 2, 1, 12);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin()));
}

TEST(KvPool, WriteTokenFillsEveryLayerAndHalf) {
  KvPool pool(Device::CPU(), 8, 3, 32, nullptr);
  EXPECT_EQ(pool.SlotBytes(), 3 * 2 * 32);
  pool.WriteToken(5, 1234, 77);
  for (int layer = 0; layer < 3; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      EXPECT_EQ(Row(pool, layer, kv, 5), Expected(1234, 77, layer, kv, 32));
      EXPECT_EQ(Row(pool, layer, kv, 4), std::vector<uint8_t>(32, 0));  // neighbours untouched
    }
  }
  const TensorView view = pool.Layer(2, 1);
  EXPECT_EQ(view.size(0), 8);
  EXPECT_EQ(view.size(1), 32);
  EXPECT_EQ(view.dtype(), DType::kUInt8);
  EXPECT_EQ(view.data_as<uint8_t>() + 5 * 32, pool.HostRow(2, 1, 5));  // CPU: the same memory
}

TEST(KvPool, FlipByteChangesExactlyOneByte) {
  KvPool pool(Device::CPU(), 4, 2, 16, nullptr);
  pool.WriteToken(2, 9, 3);
  const auto before = Row(pool, 1, 0, 2);
  pool.FlipByte(1, 0, 2, 7);
  const auto after = Row(pool, 1, 0, 2);
  for (int b = 0; b < 16; ++b) {
    EXPECT_EQ(after[b], b == 7 ? static_cast<uint8_t>(before[b] ^ 0xFF) : before[b]) << b;
  }
  EXPECT_EQ(Row(pool, 1, 1, 2), Expected(9, 3, 1, 1, 16));
  EXPECT_THROW(pool.FlipByte(0, 0, 2, 16), std::out_of_range);
}

TEST(KvPool, CopyZeroAndHostRoundTrip) {
  KvPool pool(Device::CPU(), 6, 2, 16, nullptr);
  pool.WriteToken(1, 50, 0);
  pool.CopySlot(3, 1);
  for (int layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) EXPECT_EQ(Row(pool, layer, kv, 3), Row(pool, layer, kv, 1));
  }
  std::vector<uint8_t> saved;
  pool.ReadSlotToHost(1, saved);
  ASSERT_EQ(static_cast<int64_t>(saved.size()), pool.SlotBytes());
  // Layer-major, K before V.
  EXPECT_TRUE(std::equal(saved.begin() + 32, saved.begin() + 48, Row(pool, 1, 0, 1).begin()));
  pool.ZeroSlot(1);
  EXPECT_EQ(Row(pool, 0, 0, 1), std::vector<uint8_t>(16, 0));
  EXPECT_EQ(Row(pool, 1, 1, 1), std::vector<uint8_t>(16, 0));
  pool.WriteSlotFromHost(4, saved);
  for (int layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      EXPECT_EQ(Row(pool, layer, kv, 4), Expected(50, 0, layer, kv, 16));
    }
  }
  EXPECT_THROW(pool.WriteSlotFromHost(4, std::vector<uint8_t>(3)), std::invalid_argument);
  EXPECT_THROW(pool.WriteToken(6, 1, 1), std::out_of_range);
}

TEST(KvPool, InvalidGeometryThrows) {
  EXPECT_THROW(KvPool(Device::CPU(), 1, 1, 16, nullptr), Error);
  EXPECT_THROW(KvPool(Device::CPU(), 4, 0, 16, nullptr), Error);
  EXPECT_THROW(KvPool(Device::CPU(), 4, 1, 24, nullptr), Error);
}

TEST(KvPool, CudaMirrorFollowsTheDevice) {
  if (!runtime::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  runtime::OwnedStream stream(Device::CUDA(0));
  KvPool pool(Device::CUDA(0), 8, 2, 32, stream.handle());
  pool.WriteToken(3, 7, 2);
  pool.FlipByte(1, 1, 3, 0);
  pool.CopySlot(5, 3);
  std::vector<uint8_t> saved;
  pool.ReadSlotToHost(5, saved);
  auto expected = Expected(7, 2, 1, 1, 32);
  expected[0] ^= 0xFF;
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), saved.begin() + 96));
  pool.FetchToHost();
  EXPECT_EQ(Row(pool, 1, 1, 5), expected);
}

}  // namespace
}  // namespace kvcanary::sim
