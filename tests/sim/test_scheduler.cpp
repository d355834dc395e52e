#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kvcanary/error.h"
#include "mini_engine.h"

namespace kvcanary::sim {
namespace {

TEST(Scheduler, PrefillChunksRespectTheChunkSizeAndTheBudget) {
  MiniEngine engine(200, Options(4, 4, 6, 64));
  for (int64_t id = 0; id < 3; ++id) engine.scheduler.Submit(Spec(id, Range(100 * id + 1, 10), 2));
  ASSERT_EQ(engine.Step(0), Batch::kPrefill);
  const Batch& first = engine.batches.back();
  ASSERT_EQ(first.rows.size(), 2u);  // 4 + 2 exhaust the budget of 6
  EXPECT_EQ(first.rows[0].extend_len, 4);
  EXPECT_EQ(first.rows[1].extend_len, 2);
  EXPECT_EQ(engine.scheduler.running().size(), 2u);
  EXPECT_EQ(engine.scheduler.waiting().size(), 1u);
  engine.Run(1, 200);
  EXPECT_TRUE(engine.scheduler.Done());
  EXPECT_EQ(engine.finished.size(), 3u);
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_EQ(engine.produced, 6);
  for (const Batch& batch : engine.batches) {
    if (batch.kind != Batch::kPrefill) continue;
    EXPECT_LE(batch.NumTokens(), 6);
    for (const BatchRow& row : batch.rows) EXPECT_LE(row.extend_len, 4);
  }
  engine.ExpectNoLeak();
}

TEST(Scheduler, DecodeFollowsPrefillOneTokenAtATime) {
  MiniEngine engine(64, Options(2, 16, 64, 32));
  engine.scheduler.Submit(Spec(7, Range(1, 5), 3));
  ASSERT_EQ(engine.Step(0), Batch::kPrefill);
  {
    const BatchRow& row = engine.batches.back().rows.at(0);
    EXPECT_EQ(row.prefix_len, 0);
    EXPECT_EQ(row.extend_len, 5);
    EXPECT_TRUE(row.produces_token);
  }
  const Request* req = engine.scheduler.running().at(0).get();
  EXPECT_TRUE(req->prefill_done);
  EXPECT_EQ(req->kv_len, 5);
  EXPECT_EQ(req->seq_len(), 6);
  for (int64_t step = 1; step <= 2; ++step) {
    ASSERT_EQ(engine.Step(step), Batch::kDecode);
    const BatchRow& row = engine.batches.back().rows.at(0);
    // The decode writes the KV of the token sampled last step, at its position.
    EXPECT_EQ(row.prefix_len, 4 + step);
    EXPECT_EQ(row.extend_len, 1);
    EXPECT_TRUE(row.produces_token);
  }
  ASSERT_EQ(engine.finished.size(), 1u);
  const Request& done = *engine.finished[0];
  EXPECT_EQ(done.output.size(), 3u);
  EXPECT_EQ(done.finish_step, 2);
  EXPECT_EQ(done.first_token_step, 0);
  EXPECT_EQ(done.row, 0);
  EXPECT_EQ(engine.mismatches, 0);
  // The KV of the prompt and of the first two outputs (7 positions) went to the cache.
  EXPECT_EQ(engine.cache.TotalCachedTokens(), 7);
  EXPECT_EQ(engine.table.NumFreeRows(), 2);
  EXPECT_EQ(engine.Step(3), Batch::kIdle);
  engine.ExpectNoLeak();
}

TEST(Scheduler, AFollowUpGetsAPrefixHitOnTheFinishedConversation) {
  MiniEngine engine(128, Options(2, 64, 64, 64));
  engine.scheduler.Submit(Spec(0, Range(1, 6), 3));
  engine.Run(0, 10);
  ASSERT_EQ(engine.finished.size(), 1u);
  const Request& first = *engine.finished[0];
  Ids prompt = first.tokens;  // prompt + output
  prompt.push_back(500);
  prompt.push_back(501);
  engine.scheduler.Submit(Spec(1, prompt, 2, 10));
  ASSERT_EQ(engine.Step(10), Batch::kPrefill);
  const Request* follow = engine.scheduler.running().at(0).get();
  // Cached: the 6 prompt tokens and the first 2 outputs (the last output's KV never existed).
  EXPECT_EQ(follow->cached_len, 8);
  EXPECT_EQ(engine.batches.back().rows.at(0).prefix_len, 8);
  EXPECT_EQ(engine.batches.back().rows.at(0).extend_len, 3);
  EXPECT_EQ(engine.scheduler.stats().prefix_hit_tokens, 8);
  EXPECT_NE(follow->lock_node, RadixCache::kRoot);
  EXPECT_TRUE(engine.cache.IsLocked(follow->lock_node, false));
  for (int64_t pos = 0; pos < 8; ++pos) {
    EXPECT_EQ(engine.table.Get(follow->row, pos), first.slots[pos]) << pos;
  }
  engine.Run(11, 10);
  EXPECT_EQ(engine.finished.size(), 2u);
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_GT(engine.scheduler.stats().PrefixHitRate(), 0.5);
  engine.ExpectNoLeak();
}

TEST(Scheduler, RequestsWaitForTheirArrivalStepAndTheRunningLimit) {
  MiniEngine engine(256, Options(2, 64, 256, 64));
  engine.scheduler.Submit(Spec(0, Range(1, 4), 5, 3));
  EXPECT_EQ(engine.Step(0), Batch::kIdle);
  EXPECT_EQ(engine.scheduler.waiting().size(), 1u);
  EXPECT_EQ(engine.Step(3), Batch::kPrefill);
  for (int64_t id = 1; id <= 3; ++id) engine.scheduler.Submit(Spec(id, Range(100 * id, 4), 5, 3));
  EXPECT_EQ(engine.Step(4), Batch::kPrefill);
  EXPECT_EQ(engine.scheduler.running().size(), 2u);  // one slot of max_running_reqs = 2 was left
  EXPECT_EQ(engine.scheduler.waiting().size(), 2u);
  engine.Run(5, 100);
  EXPECT_EQ(engine.finished.size(), 4u);
  EXPECT_EQ(engine.mismatches, 0);
}

TEST(Scheduler, EvictsTheCacheUnderPressureAndStaysCorrect) {
  // 41 allocatable slots; each request uses up to 11; finished ones fill the cache.
  MiniEngine engine(42, Options(3, 8, 16, 32));
  for (int64_t id = 0; id < 12; ++id) {
    engine.scheduler.Submit(Spec(id, Range(1 + 50 * id, 6 + id % 3), 4, id / 2));
  }
  engine.Run(0, 500);
  EXPECT_TRUE(engine.scheduler.Done());
  EXPECT_EQ(engine.finished.size(), 12u);
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_GT(engine.scheduler.stats().evicted_tokens, 0);
  EXPECT_EQ(engine.cache.stats().evicted_tokens, engine.scheduler.stats().evicted_tokens);
  engine.ExpectNoLeak();
  engine.cache.TEST_CheckInvariants();
}

TEST(Scheduler, APoolTooSmallForOneRequestIsReportedNotWaitedOn) {
  MiniEngine engine(10, Options(2, 8, 8, 64));       // 9 slots
  engine.scheduler.Submit(Spec(0, Range(1, 8), 4));  // needs 8 + 4 - 1 = 11
  EXPECT_EQ(engine.Run(0, 10), Batch::kPoolTooSmall);
  const std::string& reason = engine.batches.back().reason;
  EXPECT_NE(reason.find("request 0 needs 11 KV slots"), std::string::npos) << reason;
  EXPECT_NE(reason.find("9"), std::string::npos) << reason;
  // Nothing was taken: the failed admission rolled back.
  EXPECT_EQ(engine.allocator.NumFree(), 9);
  EXPECT_EQ(engine.table.NumFreeRows(), 2);
}

TEST(Scheduler, RequestsThatFitOnlyOneAtATimeRunOneAtATime) {
  MiniEngine engine(10, Options(4, 8, 8, 64));  // 9 slots, each request needs 8
  for (int64_t id = 0; id < 3; ++id) engine.scheduler.Submit(Spec(id, Range(1 + 20 * id, 5), 4));
  EXPECT_NE(engine.Run(0, 100), Batch::kPoolTooSmall);
  EXPECT_EQ(engine.finished.size(), 3u);
  EXPECT_EQ(engine.mismatches, 0);
  for (const Batch& batch : engine.batches) EXPECT_LE(batch.rows.size(), 1u);
}

TEST(Scheduler, RequestsFinishAtTheContextLength) {
  MiniEngine engine(64, Options(1, 16, 16, 8));
  engine.scheduler.Submit(Spec(0, Range(1, 5), 100));
  engine.Run(0, 20);
  ASSERT_EQ(engine.finished.size(), 1u);
  EXPECT_EQ(engine.finished[0]->seq_len(), 8);
  EXPECT_EQ(engine.finished[0]->output.size(), 3u);
  EXPECT_EQ(engine.cache.TotalCachedTokens(), 7);
}

TEST(Scheduler, SubmitAndCompleteRejectMisuse) {
  MiniEngine engine(64, Options(2, 16, 16, 8));
  EXPECT_THROW(engine.scheduler.Submit(Spec(0, {}, 1)), Error);
  EXPECT_THROW(engine.scheduler.Submit(Spec(0, Range(1, 8), 1)), Error);  // no room to decode
  EXPECT_THROW(engine.scheduler.Submit(Spec(0, Range(1, 3), 0)), Error);
  engine.scheduler.Submit(Spec(0, Range(1, 3), 2));
  const Batch batch = engine.scheduler.Schedule(0);
  ASSERT_EQ(batch.NumProducing(), 1);
  EXPECT_THROW(engine.scheduler.Complete(batch, {}), std::logic_error);
  EXPECT_THROW(Scheduler(Options(3, 16, 16, 8), engine.allocator, engine.table, engine.cache),
               Error);  // the table has 2 + 1 rows
}

// A host pool for the tier: host slot -> the slot's KV bytes.
struct HostTier {
  std::map<int64_t, std::vector<uint8_t>> store;
  int64_t next = 0;
  int64_t restored = 0;
};

TEST(Scheduler, TheHostTierRestoresEvictedPrefixesCorrectly) {
  MiniEngine engine(60, Options(2, 16, 32, 96));
  engine.cache.EnableHostTier(true);
  HostTier host;
  engine.scheduler.SetEvictCallback([&](RadixCache::NodeId, const Ids& device_slots) {
    Ids host_slots;
    for (int64_t slot : device_slots) {
      engine.pool.ReadSlotToHost(slot, host.store[host.next]);
      host_slots.push_back(host.next++);
    }
    return host_slots;
  });
  engine.scheduler.SetRestoreCallback(
      [&](RadixCache::NodeId, const Ids& host_slots, const Ids& device_slots) {
        for (size_t i = 0; i < host_slots.size(); ++i) {
          engine.pool.WriteSlotFromHost(device_slots[i], host.store.at(host_slots[i]));
          host.store.erase(host_slots[i]);
          host.restored += 1;
        }
      });
  // Conversation A, then enough unrelated traffic to push A to the host, then A's follow-up.
  engine.scheduler.Submit(Spec(0, Range(1, 20), 4));
  engine.Run(0, 50);
  ASSERT_EQ(engine.finished.size(), 1u);
  Ids follow = engine.finished[0]->tokens;
  follow.push_back(999);
  for (int64_t id = 1; id <= 4; ++id) engine.scheduler.Submit(Spec(id, Range(100 * id, 20), 4, 50));
  engine.Run(50, 200);
  ASSERT_EQ(engine.finished.size(), 5u);
  EXPECT_GT(engine.cache.HostOnlyTokens(), 0);
  engine.scheduler.Submit(Spec(9, follow, 3, 300));
  engine.Run(300, 100);
  ASSERT_EQ(engine.finished.size(), 6u);
  // The whole conversation had gone to the host: its cached prefix all came back from there.
  EXPECT_GT(engine.finished.back()->host_restored_len, 0);
  EXPECT_LE(engine.finished.back()->host_restored_len, engine.finished.back()->cached_len);
  EXPECT_GT(engine.scheduler.stats().host_hit_tokens, 0);
  EXPECT_EQ(host.restored, engine.scheduler.stats().host_hit_tokens);
  EXPECT_EQ(engine.mismatches, 0);
  // Host slots released by the cache are exactly those it no longer references.
  for (int64_t slot : engine.cache.TakeReleasedHostSlots()) host.store.erase(slot);
  EXPECT_EQ(static_cast<int64_t>(host.store.size()), engine.cache.HostOnlyTokens());
  engine.ExpectNoLeak();
  engine.cache.TEST_CheckInvariants();
}

// Per token (block size 1), and paged: blocks as the allocation unit, whole pages shared.
class MultiTurnWorkload : public ::testing::TestWithParam<int64_t> {};

TEST_P(MultiTurnWorkload, RunsToCompletionWithoutAMismatch) {
  const int64_t block_size = GetParam();
  const WorkloadOptions wo{.seed = 3,
                           .num_requests = 30,
                           .num_system_prompts = 3,
                           .system_prompt_len_min = 16,
                           .system_prompt_len_max = 40,
                           .user_len_min = 3,
                           .user_len_max = 10,
                           .max_new_tokens_min = 3,
                           .max_new_tokens_max = 12,
                           .follow_up_prob = 0.6,
                           .max_turns = 4,
                           .arrival_per_step_max = 2,
                           .vocab_size = kVocab,
                           .max_context_len = 160};
  Workload workload(wo);
  SchedulerOptions options = Options(8, 16, 48, 160);
  options.block_size = block_size;
  MiniEngine engine(BlocksSpanning(260, block_size) * block_size, options);
  for (const RequestSpec& spec : workload.initial_requests()) engine.scheduler.Submit(spec);
  int64_t submitted = 30;
  size_t seen = 0;
  int64_t step = 0;
  for (; step < 5000 && !engine.scheduler.Done(); ++step) {
    ASSERT_NE(engine.Step(step), Batch::kPoolTooSmall) << engine.batches.back().reason;
    for (; seen < engine.finished.size(); ++seen) {
      const Request& done = *engine.finished[seen];
      if (auto next = workload.FollowUp(done.spec, done.output, step + 1)) {
        engine.scheduler.Submit(*next);
        ++submitted;
      }
    }
  }
  EXPECT_TRUE(engine.scheduler.Done());
  EXPECT_EQ(static_cast<int64_t>(engine.finished.size()), submitted);
  EXPECT_GT(submitted, 30);
  EXPECT_EQ(engine.mismatches, 0);
  EXPECT_GT(engine.scheduler.stats().PrefixHitRate(), 0.3);
  EXPECT_GT(engine.scheduler.stats().evicted_tokens, 0);
  engine.ExpectNoLeak();
  engine.cache.TEST_CheckInvariants();
}

INSTANTIATE_TEST_SUITE_P(Scheduler, MultiTurnWorkload, ::testing::Values(1, 4, 16));

}  // namespace
}  // namespace kvcanary::sim
