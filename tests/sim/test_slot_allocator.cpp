#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "sim/slot_allocator.h"

namespace kvcanary::sim {
namespace {

using Slots = std::vector<int64_t>;

TEST(SlotAllocator, FreshAllocatorHandsOutSlotsFromOneAndNeverThePaddingSlot) {
  SlotAllocator allocator(5);
  EXPECT_EQ(allocator.NumFree(), 4);
  EXPECT_FALSE(allocator.IsFree(0));
  EXPECT_EQ(allocator.Allocate(4), Slots({1, 2, 3, 4}));
  EXPECT_EQ(allocator.NumFree(), 0);
  EXPECT_EQ(allocator.Allocate(1), std::nullopt);
  EXPECT_EQ(allocator.Allocate(0), Slots{});
}

TEST(SlotAllocator, AFreedSlotIsTheNextOneHandedOut) {
  SlotAllocator allocator(10);
  const Slots first = *allocator.Allocate(3);  // 1 2 3
  EXPECT_EQ(first, Slots({1, 2, 3}));
  allocator.Free({2});
  EXPECT_EQ(allocator.Allocate(1), Slots({2}));
  allocator.Free({3});
  allocator.Free({1});
  EXPECT_EQ(allocator.Allocate(1), Slots({1}));  // the last freed first
  EXPECT_EQ(allocator.Allocate(1), Slots({3}));
  EXPECT_EQ(allocator.Allocate(1), Slots({4}));  // then the never-used ones
}

TEST(SlotAllocator, ABatchFreeIsHandedOutInItsOwnOrder) {
  SlotAllocator allocator(10);
  ASSERT_TRUE(allocator.Allocate(6));
  allocator.Free({5, 2, 4});
  EXPECT_EQ(allocator.Allocate(4), Slots({5, 2, 4, 7}));
}

TEST(SlotAllocator, AllocationIsAllOrNothing) {
  SlotAllocator allocator(4);  // slots 1..3
  ASSERT_TRUE(allocator.Allocate(2));
  EXPECT_EQ(allocator.Allocate(2), std::nullopt);
  EXPECT_EQ(allocator.NumFree(), 1);
  EXPECT_TRUE(allocator.IsFree(3));
  EXPECT_EQ(allocator.Allocate(1), Slots({3}));
}

TEST(SlotAllocator, IsFreeTracksEachSlot) {
  SlotAllocator allocator(4);
  EXPECT_TRUE(allocator.IsFree(1));
  ASSERT_TRUE(allocator.Allocate(1));
  EXPECT_FALSE(allocator.IsFree(1));
  EXPECT_TRUE(allocator.IsFree(2));
  EXPECT_FALSE(allocator.IsFree(4));  // out of range
  EXPECT_FALSE(allocator.IsFree(-1));
  allocator.Free({1});
  EXPECT_TRUE(allocator.IsFree(1));
}

TEST(SlotAllocator, DoubleFreeThrowsAndChangesNothing) {
  SlotAllocator allocator(6);
  ASSERT_TRUE(allocator.Allocate(3));  // 1 2 3
  allocator.Free({2});
  EXPECT_THROW(allocator.Free({2}), std::logic_error);
  // A list that frees a valid slot before hitting a free one must not free the valid one.
  EXPECT_THROW(allocator.Free({1, 4}), std::logic_error);
  EXPECT_FALSE(allocator.IsFree(1));
  // A duplicate inside one call is a double free too.
  EXPECT_THROW(allocator.Free({3, 3}), std::logic_error);
  EXPECT_FALSE(allocator.IsFree(3));
  EXPECT_EQ(allocator.NumFree(), 3);  // 2, 4, 5
}

TEST(SlotAllocator, FreeingThePaddingSlotOrAnOutOfRangeSlotThrows) {
  SlotAllocator allocator(4);
  ASSERT_TRUE(allocator.Allocate(3));
  EXPECT_THROW(allocator.Free({0}), std::logic_error);
  EXPECT_THROW(allocator.Free({4}), std::logic_error);
  EXPECT_THROW(allocator.Free({-2}), std::logic_error);
  EXPECT_EQ(allocator.NumFree(), 0);
  EXPECT_THROW(allocator.Allocate(-1), std::logic_error);
}

}  // namespace
}  // namespace kvcanary::sim
