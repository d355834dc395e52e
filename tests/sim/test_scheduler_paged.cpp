// Tests for the scheduler's paged layout: blocks as the allocation unit, the block table rows,
// the prefix cache sharing whole blocks, and blocks given back at finish, eviction and abort.
#include <gtest/gtest.h>

#include <vector>

#include "kvcanary/error.h"
#include "mini_engine.h"

namespace kvcanary::sim {
namespace {

SchedulerOptions Paged(int64_t block_size, int64_t max_running = 4) {
  SchedulerOptions options = Options(max_running, 64, 64, 64);
  options.block_size = block_size;
  return options;
}

TEST(PagedScheduler, ARequestFillsItsLastBlockBeforeTakingANewOne) {
  MiniEngine engine(64, Paged(4));  // blocks 1..15
  engine.scheduler.Submit(Spec(0, Range(1, 6), 5));
  ASSERT_EQ(engine.Step(0), Batch::kPrefill);
  const Request& req = *engine.scheduler.running().front();
  // Positions 0..5 in blocks 1 and 2: slots 4..7, then 8 and 9.
  EXPECT_EQ(req.slots, (Ids{4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(engine.blocks.Get(req.row, 0), 1);
  EXPECT_EQ(engine.blocks.Get(req.row, 1), 2);
  EXPECT_EQ(engine.allocator.NumFree(), 13);
  // The decodes of positions 6 and 7 finish block 2; position 8 opens block 3.
  for (int64_t step = 1; step <= 3; ++step) ASSERT_EQ(engine.Step(step), Batch::kDecode);
  EXPECT_EQ(engine.batches[1].rows[0].new_slots, (Ids{10}));
  EXPECT_EQ(engine.batches[2].rows[0].new_slots, (Ids{11}));
  EXPECT_EQ(engine.batches[3].rows[0].new_slots, (Ids{12}));
  EXPECT_EQ(engine.blocks.Get(req.row, 2), 3);
  EXPECT_EQ(engine.allocator.NumFree(), 12);
  engine.ExpectNoLeak();
  engine.Run(4, 20);
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_EQ(engine.produced, 5);
}

TEST(PagedScheduler, FinishCachesWholeBlocksAndFreesThePartlyFilledOne) {
  MiniEngine engine(64, Paged(4));
  engine.scheduler.Submit(Spec(0, Range(1, 10), 1));
  engine.Run(0, 10);
  ASSERT_EQ(engine.finished.size(), 1u);
  // 10 positions have KV: blocks of positions 0..7 go to the cache, the block of 8..9 is freed.
  EXPECT_EQ(engine.cache.TotalCachedTokens(), 8);
  EXPECT_EQ(engine.allocator.NumFree(), 13);
  engine.ExpectNoLeak();
}

TEST(PagedScheduler, APrefixHitSharesWholeBlocksOnly) {
  MiniEngine engine(64, Paged(4));
  engine.scheduler.Submit(Spec(0, Range(1, 10), 1));
  engine.Run(0, 10);
  const Ids first_blocks = {engine.finished[0]->slots[0] / 4, engine.finished[0]->slots[4] / 4};
  // The same 10 tokens and two more: 11 are looked up, whole pages of them match (8).
  Ids prompt = Range(1, 10);
  prompt.push_back(500);
  prompt.push_back(501);
  engine.scheduler.Submit(Spec(1, prompt, 3, 10));
  ASSERT_EQ(engine.Step(10), Batch::kPrefill);
  const Request& req = *engine.scheduler.running().front();
  EXPECT_EQ(req.cached_len, 8);
  EXPECT_EQ(engine.batches.back().rows[0].prefix_len, 8);
  EXPECT_EQ(engine.blocks.Get(req.row, 0), first_blocks[0]);
  EXPECT_EQ(engine.blocks.Get(req.row, 1), first_blocks[1]);
  // Position 8 starts a block of the request's own.
  EXPECT_EQ(req.slots[8] % 4, 0);
  EXPECT_NE(req.slots[8] / 4, first_blocks[0]);
  EXPECT_NE(req.slots[8] / 4, first_blocks[1]);
  engine.Run(11, 20);
  EXPECT_EQ(engine.mismatches, 0);
  engine.ExpectNoLeak();
}

TEST(PagedScheduler, EvictionUnderPressureFreesWholeBlocks) {
  MiniEngine engine(48, Paged(4, 2));  // 11 usable blocks
  for (int64_t id = 0; id < 12; ++id) {
    engine.scheduler.Submit(Spec(id, Range(100 * id + 1, 9), 3, 2 * id));
  }
  ASSERT_NE(engine.Run(0, 400), Batch::kPoolTooSmall) << engine.batches.back().reason;
  EXPECT_TRUE(engine.scheduler.Done());
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_GT(engine.scheduler.stats().evicted_tokens, 0);
  EXPECT_EQ(engine.scheduler.stats().evicted_tokens % 4, 0);
  engine.ExpectNoLeak();
}

TEST(PagedScheduler, AbortFreesTheOwnedBlocksButTheKeptOne) {
  MiniEngine engine(64, Paged(4));
  engine.scheduler.Submit(Spec(0, Range(1, 10), 20));
  engine.Run(0, 3);
  Request* req = engine.scheduler.running().front().get();
  const int64_t row = req->row;
  const int64_t kept = req->slots[4] / 4;
  const int64_t free_before = engine.allocator.NumFree();
  const int64_t held = BlocksSpanning(static_cast<int64_t>(req->slots.size()), 4);
  engine.scheduler.Abort(req, {kept});
  EXPECT_EQ(engine.allocator.NumFree(), free_before + held - 1);
  EXPECT_FALSE(engine.allocator.IsFree(kept));
  for (int64_t i = 0; i < engine.blocks.max_blocks(); ++i) EXPECT_EQ(engine.blocks.Get(row, i), 0);
}

TEST(PagedScheduler, RefusesABlockTableOfAnotherShape) {
  MiniEngine engine(64, Paged(4));
  BlockTable other_size(Device::CPU(), 5, 16, 8, nullptr);
  EXPECT_THROW(engine.scheduler.SetBlockTable(&other_size), Error);
  BlockTable too_narrow(Device::CPU(), 5, 15, 4, nullptr);
  EXPECT_THROW(engine.scheduler.SetBlockTable(&too_narrow), Error);
}

}  // namespace
}  // namespace kvcanary::sim
