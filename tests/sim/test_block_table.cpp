// Tests for sim/block_table: the paged layout's table and the arithmetic between slots and
// blocks, and the SlotAllocator as the block allocator (block 0 reserved, LIFO reuse).
#include "sim/block_table.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/device_memory.h"
#include "sim/slot_allocator.h"

namespace kvcanary::sim {
namespace {

using Ids = std::vector<int64_t>;

TEST(SimPaging, BlocksSpanningRoundsUp) {
  EXPECT_EQ(BlocksSpanning(0, 16), 0);
  EXPECT_EQ(BlocksSpanning(1, 16), 1);
  EXPECT_EQ(BlocksSpanning(16, 16), 1);
  EXPECT_EQ(BlocksSpanning(17, 16), 2);
  EXPECT_EQ(BlocksSpanning(5, 1), 5);
}

TEST(SimPaging, WholeBlocksOfListsEachBlockOnceInOrder) {
  EXPECT_EQ(WholeBlocksOf({12, 13, 14, 15, 4, 5, 6, 7}, 4), (Ids{3, 1}));
  // Within a block the slots may come in any order; the block is where its first slot is.
  EXPECT_EQ(WholeBlocksOf({9, 8, 11, 10}, 4), (Ids{2}));
  EXPECT_EQ(WholeBlocksOf({7, 3, 9}, 1), (Ids{7, 3, 9}));
  EXPECT_TRUE(WholeBlocksOf({}, 4).empty());
}

TEST(SimPaging, WholeBlocksOfRefusesPartsOfBlocks) {
  EXPECT_THROW(WholeBlocksOf({4, 5, 6}, 4), std::logic_error);           // a slot short
  EXPECT_THROW(WholeBlocksOf({5, 6, 7, 8}, 4), std::logic_error);        // straddles two blocks
  EXPECT_THROW(WholeBlocksOf({4, 5, 6, 7, 4, 5, 6, 7}, 4), std::logic_error);  // twice
  EXPECT_THROW(WholeBlocksOf({3, 3}, 1), std::logic_error);
}

TEST(SimBlockTable, MapsPositionsThroughBlocks) {
  BlockTable table(Device::CPU(), 3, 4, 16, nullptr);
  EXPECT_EQ(table.num_rows(), 3);
  EXPECT_EQ(table.max_blocks(), 4);
  table.Set(1, 0, 7);
  table.Set(1, 1, 2);
  EXPECT_EQ(table.Get(1, 0), 7);
  EXPECT_EQ(table.SlotAt(1, 0), 7 * 16);
  EXPECT_EQ(table.SlotAt(1, 15), 7 * 16 + 15);
  EXPECT_EQ(table.SlotAt(1, 16), 2 * 16);
  EXPECT_EQ(table.SlotAt(1, 20), 2 * 16 + 4);
  // Past the row's blocks the table reads the padding block: slot 0 at offset 0.
  EXPECT_EQ(table.SlotAt(1, 32), 0);
  const std::vector<int32_t> row = table.SlotRow(1, 18);
  ASSERT_EQ(row.size(), 18u);
  EXPECT_EQ(row[3], 7 * 16 + 3);
  EXPECT_EQ(row[17], 2 * 16 + 1);
  // The device view is the host table on the CPU: [rows, max_blocks] int32, contiguous.
  const TensorView view = table.View();
  EXPECT_EQ(view.dtype(), DType::kInt32);
  ASSERT_EQ(view.ndim(), 2);
  EXPECT_EQ(view.size(0), 3);
  EXPECT_EQ(view.size(1), 4);
  EXPECT_EQ(view.data_as<const int32_t>()[1 * 4 + 1], 2);
}

TEST(SimBlockTable, ClearRowReturnsItToPadding) {
  BlockTable table(Device::CPU(), 3, 4, 8, nullptr);
  table.Set(2, 0, 5);
  table.Set(2, 3, 6);
  table.ClearRow(2);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(table.Get(2, i), 0);
}

TEST(SimBlockTable, RefusesThePaddingRowAndEntriesOutOfRange) {
  BlockTable table(Device::CPU(), 3, 4, 8, nullptr);
  EXPECT_THROW(table.Set(0, 0, 1), std::out_of_range);
  EXPECT_THROW(table.Set(3, 0, 1), std::out_of_range);
  EXPECT_THROW(table.Set(1, 4, 1), std::out_of_range);
  EXPECT_THROW(table.Get(1, -1), std::out_of_range);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(table.Get(0, i), 0);
  EXPECT_THROW(BlockTable(Device::CPU(), 3, 4, 0, nullptr), Error);
  EXPECT_THROW(BlockTable(Device::CPU(), 0, 4, 8, nullptr), Error);
}

// On CUDA the host copy is authoritative: edits reach the device at Upload, row by row.
TEST(SimBlockTable, CudaUploadCopiesTheEditedRows) {
  if (!runtime::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const Device cuda = Device::CUDA(0);
  runtime::OwnedStream stream(cuda);
  BlockTable table(cuda, 3, 4, 16, stream.handle());
  table.Set(1, 2, 7);
  table.Set(2, 0, 5);
  const auto read_device = [&] {
    std::vector<int32_t> entries(3 * 4, -1);
    runtime::CopyBytesAsync(entries.data(), table.View().data(), 3 * 4 * 4, cuda, stream.handle());
    runtime::SynchronizeStream(cuda, stream.handle());
    return entries;
  };
  EXPECT_EQ(read_device()[1 * 4 + 2], 0);  // still only on the host
  table.Upload();
  std::vector<int32_t> device = read_device();
  EXPECT_EQ(device[1 * 4 + 2], 7);
  EXPECT_EQ(device[2 * 4 + 0], 5);
  EXPECT_EQ(table.SlotAt(1, 33), 7 * 16 + 1);  // the host copy answers lookups
  table.ClearRow(1);
  table.Upload();
  EXPECT_EQ(read_device()[1 * 4 + 2], 0);
}

// The block allocator is the slot allocator over block ids: block 0 (the padding slot's block)
// is never handed out, and a freed block is the next one handed out.
TEST(SimBlockAllocator, ReservesBlockZeroAndReusesTheLastFreedBlockFirst) {
  SlotAllocator blocks(4);  // blocks 1, 2, 3
  EXPECT_EQ(blocks.NumFree(), 3);
  EXPECT_FALSE(blocks.IsFree(0));
  EXPECT_EQ(*blocks.Allocate(3), (Ids{1, 2, 3}));
  EXPECT_FALSE(blocks.Allocate(1).has_value());
  blocks.Free({2});
  EXPECT_TRUE(blocks.IsFree(2));
  EXPECT_EQ(*blocks.Allocate(1), (Ids{2}));
  EXPECT_THROW(blocks.Free({0}), std::logic_error);
}

}  // namespace
}  // namespace kvcanary::sim
