// Tests for the scheduler's quarantine support: Requeue and Resubmit send a request back to the
// head of the queue to be computed again from its token ids, and SetRowReleaseDelay keeps a
// released req_to_token row intact for a few Schedule calls.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "mini_engine.h"

namespace kvcanary::sim {
namespace {

// Expects `req` reset for admission with `outputs` output tokens: tokens = prompt + outputs.
void ExpectQueuedAgain(const Request& req, const Ids& outputs, int64_t times) {
  EXPECT_EQ(req.output, outputs);
  Ids tokens = req.spec.prompt;
  tokens.insert(tokens.end(), outputs.begin(), outputs.end());
  EXPECT_EQ(req.tokens, tokens);
  EXPECT_EQ(req.kv_len, 0);
  EXPECT_EQ(req.cached_len, 0);
  EXPECT_TRUE(req.slots.empty());
  EXPECT_EQ(req.row, 0);
  EXPECT_EQ(req.lock_node, RadixCache::kRoot);
  EXPECT_FALSE(req.prefill_done);
  EXPECT_FALSE(req.finished);
  EXPECT_EQ(req.finish_step, -1);
  EXPECT_EQ(req.recomputed, times);
}

// Steps once and expects a prefill whose first row computes all of request `id`'s tokens but its
// cached prefix, and produces its next token.
void ExpectRecomputedFirst(MiniEngine& engine, int64_t step, int64_t id, int64_t cached) {
  ASSERT_FALSE(engine.scheduler.waiting().empty());
  const auto len = static_cast<int64_t>(engine.scheduler.waiting().front()->tokens.size());
  ASSERT_EQ(engine.Step(step), Batch::kPrefill);
  const BatchRow& row = engine.batches.back().rows.at(0);
  EXPECT_EQ(row.req->spec.id, id);
  EXPECT_EQ(row.prefix_len, cached);
  EXPECT_EQ(row.prefix_len + row.extend_len, len);
  EXPECT_TRUE(row.produces_token);
}

// Submits request 0 (prompt 1..6, `max_new` outputs) and runs `steps` steps from step 0.
void RunRequestZero(MiniEngine& engine, int64_t max_new, int64_t steps) {
  engine.scheduler.Submit(Spec(0, Range(1, 6), max_new));
  engine.Run(0, steps);
}

// The one finished request, taken from the engine (null, and a failure, when there is not one).
std::unique_ptr<Request> TakeOnlyFinished(MiniEngine& engine) {
  EXPECT_EQ(engine.finished.size(), 1u);
  if (engine.finished.size() != 1) return nullptr;
  std::unique_ptr<Request> done = std::move(engine.finished[0]);
  engine.finished.clear();
  return done;
}

// Every produced token was the oracle's and no slot leaked.
void ExpectCorrectAndNoLeak(const MiniEngine& engine) {
  EXPECT_EQ(engine.mismatches, 0);
  engine.ExpectNoLeak();
}

TEST(SchedulerRequeue, RequeueFreesTheKvAndPutsTheRequestAtTheHead) {
  MiniEngine engine(128, Options(1, 64, 64, 64));
  engine.scheduler.Submit(Spec(1, Range(50, 4), 2, 1));  // waits: one request runs at a time
  RunRequestZero(engine, 5, 3);
  Request* req = engine.scheduler.running().at(0).get();
  const Ids first_outputs = req->output;
  ASSERT_EQ(first_outputs.size(), 3u);
  ASSERT_EQ(engine.allocator.NumFree(), 127 - 8);  // 6 prompt positions and 2 fed-back outputs

  engine.scheduler.Requeue(req, {}, 1);
  EXPECT_TRUE(engine.scheduler.running().empty());
  EXPECT_EQ(engine.allocator.NumFree(), 127);
  EXPECT_EQ(engine.table.NumFreeRows(), 1);
  EXPECT_EQ(engine.scheduler.stats().requeued, 1);
  ASSERT_EQ(engine.scheduler.waiting().size(), 2u);
  const Request& queued = *engine.scheduler.waiting().front();
  EXPECT_EQ(queued.spec.id, 0);
  ExpectQueuedAgain(queued, Ids(first_outputs.begin(), first_outputs.begin() + 1), 1);
  engine.ExpectNoLeak();

  ExpectRecomputedFirst(engine, 3, 0, 0);
  EXPECT_EQ(engine.batches.back().rows.at(0).extend_len, 7);  // 6 prompt tokens + 1 kept output
  engine.Run(4, 50);
  ASSERT_EQ(engine.finished.size(), 2u);
  const Request& done = *engine.finished[0];
  EXPECT_EQ(done.spec.id, 0);
  EXPECT_EQ(done.output.size(), 5u);
  // The oracle is deterministic: recomputing gives the same first outputs again.
  EXPECT_EQ(Ids(done.output.begin(), done.output.begin() + 3), first_outputs);
  EXPECT_EQ(done.recomputed, 1);
  ExpectCorrectAndNoLeak(engine);
}

TEST(SchedulerRequeue, RequeueUnlocksTheCachedPrefixAndKeepsTheKeptUnit) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  RunRequestZero(engine, 2, 10);
  ASSERT_EQ(engine.finished.size(), 1u);
  Ids prompt = engine.finished[0]->tokens;  // 6 prompt tokens + 2 outputs, 7 of them cached
  prompt.insert(prompt.end(), {700, 701, 702});
  engine.scheduler.Submit(Spec(1, prompt, 6, 10));
  engine.Run(10, 2);
  Request* req = engine.scheduler.running().at(0).get();
  ASSERT_EQ(req->cached_len, 7);
  const RadixCache::NodeId locked = req->lock_node;
  ASSERT_GT(engine.cache.LockRef(locked), 0);
  const int64_t kept = req->slots[8];  // one of its own slots, handed to "someone else"
  const int64_t owned = static_cast<int64_t>(req->slots.size()) - req->cached_len;
  const int64_t free_before = engine.allocator.NumFree();
  const int64_t cached_before = engine.cache.TotalCachedTokens();

  engine.scheduler.Requeue(req, {kept}, 0);
  EXPECT_EQ(engine.cache.LockRef(locked), 0);
  EXPECT_EQ(engine.cache.TotalCachedTokens(), cached_before);  // the prefix stays cached
  EXPECT_EQ(engine.cache.EvictableTokens(), cached_before);
  EXPECT_EQ(engine.allocator.NumFree(), free_before + owned - 1);
  EXPECT_FALSE(engine.allocator.IsFree(kept));
  ExpectQueuedAgain(*engine.scheduler.waiting().front(), {}, 1);

  engine.allocator.Free({kept});  // its new owner is done with it
  ExpectRecomputedFirst(engine, 12, 1, 7);
  engine.Run(13, 50);
  ASSERT_EQ(engine.finished.size(), 2u);
  EXPECT_EQ(engine.finished[1]->output.size(), 6u);
  ExpectCorrectAndNoLeak(engine);
}

TEST(SchedulerRequeue, ResubmitQueuesAFinishedRequestAgain) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  RunRequestZero(engine, 5, 10);
  std::unique_ptr<Request> done = TakeOnlyFinished(engine);
  ASSERT_NE(done, nullptr);
  const Ids first_outputs = done->output;
  ASSERT_EQ(first_outputs.size(), 5u);

  engine.scheduler.Resubmit(std::move(done), 2);
  EXPECT_EQ(engine.scheduler.stats().requeued, 1);
  ASSERT_EQ(engine.scheduler.waiting().size(), 1u);
  ExpectQueuedAgain(*engine.scheduler.waiting().front(),
                    Ids(first_outputs.begin(), first_outputs.begin() + 2), 1);
  // Its finished sequence went to the cache: all but the last of its 8 tokens are a prefix hit.
  ExpectRecomputedFirst(engine, 10, 0, 7);
  engine.Run(11, 20);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(engine.finished[0]->output, first_outputs);
  EXPECT_EQ(engine.finished[0]->recomputed, 1);
  EXPECT_EQ(engine.scheduler.stats().finished, 2);
  ExpectCorrectAndNoLeak(engine);
}

TEST(SchedulerRequeue, KeepOutputsIsClampedToTheOutputsThereAre) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  RunRequestZero(engine, 5, 2);
  Request* req = engine.scheduler.running().at(0).get();
  const Ids outputs = req->output;
  ASSERT_EQ(outputs.size(), 2u);
  engine.scheduler.Requeue(req, {}, 9);
  ExpectQueuedAgain(*engine.scheduler.waiting().front(), outputs, 1);
}

TEST(SchedulerRequeue, AFinishedRequestQueuedAgainRecomputesAtLeastItsLastOutput) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  RunRequestZero(engine, 5, 10);
  std::unique_ptr<Request> done = TakeOnlyFinished(engine);
  ASSERT_NE(done, nullptr);
  const Ids outputs = done->output;
  engine.scheduler.Resubmit(std::move(done), 5);
  ExpectQueuedAgain(*engine.scheduler.waiting().front(), Ids(outputs.begin(), outputs.end() - 1),
                    1);
  engine.Run(10, 10);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(engine.finished[0]->output, outputs);  // not a sixth output beyond max_new_tokens
  ExpectCorrectAndNoLeak(engine);
}

TEST(SchedulerRequeue, ARequestThatFilledTheContextRecomputesItsLastOutput) {
  MiniEngine engine(128, Options(2, 64, 64, 10));
  RunRequestZero(engine, 50, 10);  // 6 prompt tokens: finishes at 10 tokens, 4 outputs
  std::unique_ptr<Request> done = TakeOnlyFinished(engine);
  ASSERT_NE(done, nullptr);
  const Ids outputs = done->output;
  ASSERT_EQ(outputs.size(), 4u);
  engine.scheduler.Resubmit(std::move(done), 4);
  EXPECT_EQ(engine.scheduler.waiting().front()->output.size(), 3u);
  engine.Run(10, 10);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(engine.finished[0]->output, outputs);
  ExpectCorrectAndNoLeak(engine);
}

TEST(SchedulerRequeue, RequeueOfARequestNotRunningIsRefused) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  engine.scheduler.Submit(Spec(0, Range(1, 6), 5));
  Request* waiting = engine.scheduler.waiting().front().get();
  EXPECT_THROW(engine.scheduler.Requeue(waiting, {}, 0), std::logic_error);
  EXPECT_EQ(engine.scheduler.stats().requeued, 0);
  EXPECT_EQ(engine.scheduler.waiting().size(), 1u);
}

// One row (max_running_reqs 1); request 0 finishes in step 0, request 1 arrives at step 1.
struct OneRowEngine {
  MiniEngine engine{128, Options(1, 64, 64, 64)};
  int64_t row = 0;
  Ids slots;
  explicit OneRowEngine(int64_t delay) {
    engine.scheduler.SetRowReleaseDelay(delay);
    engine.scheduler.Submit(Spec(0, Range(1, 4), 1));
    engine.scheduler.Submit(Spec(1, Range(50, 4), 1, 1));
    EXPECT_EQ(engine.Step(0), Batch::kPrefill);
    row = engine.batches.back().rows.at(0).row;
    slots = engine.batches.back().rows.at(0).new_slots;
    EXPECT_EQ(engine.finished.size(), 1u);
  }
  bool RowIntact() const {
    for (size_t pos = 0; pos < slots.size(); ++pos) {
      if (engine.table.Get(row, static_cast<int64_t>(pos)) != slots[pos]) return false;
    }
    return true;
  }
};

TEST(SchedulerRowDelay, AReleasedRowWaitsTwoScheduleCallsWithItsEntries) {
  OneRowEngine t(2);
  EXPECT_EQ(t.engine.table.NumFreeRows(), 0);
  EXPECT_TRUE(t.RowIntact());
  // The only row still waits out its delay and nothing runs: idle, not a pool too small.
  EXPECT_EQ(t.engine.Step(1), Batch::kIdle);
  EXPECT_TRUE(t.engine.batches.back().reason.empty());
  EXPECT_EQ(t.engine.scheduler.waiting().size(), 1u);
  EXPECT_TRUE(t.RowIntact());
  EXPECT_EQ(t.engine.table.NumFreeRows(), 0);
  // The second Schedule call frees it and admits request 1 into it.
  ASSERT_EQ(t.engine.Step(2), Batch::kPrefill);
  EXPECT_EQ(t.engine.batches.back().rows.at(0).req->spec.id, 1);
  EXPECT_EQ(t.engine.batches.back().rows.at(0).row, t.row);
  EXPECT_EQ(t.engine.finished.size(), 2u);
  EXPECT_EQ(t.engine.mismatches, 0);
}

TEST(SchedulerRowDelay, WithoutADelayTheRowIsZeroedAndReusedAtOnce) {
  OneRowEngine t(0);
  EXPECT_EQ(t.engine.table.NumFreeRows(), 1);
  for (int64_t pos = 0; pos < 4; ++pos) EXPECT_EQ(t.engine.table.Get(t.row, pos), 0) << pos;
  ASSERT_EQ(t.engine.Step(1), Batch::kPrefill);
  EXPECT_EQ(t.engine.batches.back().rows.at(0).row, t.row);
}

TEST(SchedulerRowDelay, ARequeuedRequestsRowWaitsToo) {
  MiniEngine engine(128, Options(1, 64, 64, 64));
  engine.scheduler.SetRowReleaseDelay(2);
  RunRequestZero(engine, 5, 2);
  Request* req = engine.scheduler.running().at(0).get();
  const int64_t row = req->row;
  const int64_t first_slot = req->slots[0];
  engine.scheduler.Requeue(req, {}, 0);
  EXPECT_EQ(engine.table.Get(row, 0), first_slot);  // the late report still reads it
  EXPECT_EQ(engine.Step(2), Batch::kIdle);
  ExpectRecomputedFirst(engine, 3, 0, 0);
  engine.Run(4, 20);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(engine.mismatches, 0);
}

TEST(SchedulerRowDelay, PagedRequeueKeepsTheBlockTableRowAndRecomputesInWholeBlocks) {
  SchedulerOptions options = Options(1, 64, 64, 64);
  options.block_size = 4;
  MiniEngine engine(128, options);
  engine.scheduler.SetRowReleaseDelay(2);
  engine.scheduler.Submit(Spec(0, Range(1, 10), 6));
  engine.Run(0, 3);
  Request* req = engine.scheduler.running().at(0).get();
  const int64_t row = req->row;
  const Ids outputs = req->output;
  const int32_t first_block = engine.blocks.Get(row, 0);
  ASSERT_NE(first_block, 0);
  const int64_t free_before = engine.allocator.NumFree();
  const int64_t held = BlocksSpanning(static_cast<int64_t>(req->slots.size()), 4);
  engine.scheduler.Requeue(req, {}, 2);
  EXPECT_EQ(engine.allocator.NumFree(), free_before + held);
  EXPECT_EQ(engine.blocks.Get(row, 0), first_block);  // kept for a late report
  EXPECT_EQ(engine.Step(3), Batch::kIdle);
  EXPECT_EQ(engine.blocks.Get(row, 0), first_block);
  ExpectRecomputedFirst(engine, 4, 0, 0);
  engine.Run(5, 20);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(Ids(engine.finished[0]->output.begin(), engine.finished[0]->output.begin() + 3),
            outputs);
  ExpectCorrectAndNoLeak(engine);
}

}  // namespace
}  // namespace kvcanary::sim
