// The scheduler inside a minimal engine, for the scheduler tests: KV writes and the oracle
// forward, no canary. Every produced token is checked against the ground truth, so a
// slot-management bug (a slot freed while in use, a wrong req_to_token or block table entry, a bad
// cache match) shows as a mismatch. With options.block_size > 1 it is paged: the allocator hands
// out blocks, the cache shares whole pages, and attention reads through the block table.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "sim/block_table.h"
#include "sim/kv_pool.h"
#include "sim/oracle_model.h"
#include "sim/scheduler.h"

namespace kvcanary::sim {

using Ids = std::vector<int64_t>;

constexpr int kLayers = 2;
constexpr int64_t kBytes = 32;
constexpr int64_t kVocab = 1000;

inline RequestSpec Spec(int64_t id, Ids prompt, int64_t max_new, int64_t arrival = 0) {
  RequestSpec spec;
  spec.id = id;
  spec.prompt = std::move(prompt);
  spec.max_new_tokens = max_new;
  spec.arrival_step = arrival;
  return spec;
}

inline Ids Range(int64_t first, int64_t n) {
  Ids v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

struct MiniEngine {
  KvPool pool;
  SlotAllocator allocator;  // slots, or blocks when paged
  ReqToTokenTable table;
  RadixCache cache;
  BlockTable blocks;  // read only when paged
  Scheduler scheduler;
  OracleModel model{kLayers, kBytes, kVocab};
  std::vector<std::unique_ptr<Request>> finished;
  std::vector<Batch> batches;
  int64_t produced = 0;
  int64_t mismatches = 0;

  MiniEngine(int64_t num_slots, const SchedulerOptions& options)
      : pool(Device::CPU(), num_slots, kLayers, kBytes, nullptr),
        allocator(num_slots / options.block_size),
        table(Device::CPU(), options.max_running_reqs, options.max_context_len, nullptr),
        cache(options.block_size),
        blocks(Device::CPU(), options.max_running_reqs + 1,
               BlocksSpanning(options.max_context_len, options.block_size), options.block_size,
               nullptr),
        scheduler(options, allocator, table, cache) {
    if (paged()) scheduler.SetBlockTable(&blocks);
  }

  bool paged() const { return scheduler.options().block_size > 1; }

  // The slots attention reads for positions [0, len) of a row.
  std::vector<int32_t> AttentionRow(int64_t row, int64_t len) const {
    if (paged()) return blocks.SlotRow(row, len);
    const int32_t* slots = table.HostRow(row);
    return std::vector<int32_t>(slots, slots + len);
  }

  // One step; returns the batch's kind. Keeps the batch (its rows point at live requests only
  // until the next Complete, so tests read them right away).
  Batch::Kind Step(int64_t step) {
    Batch batch = scheduler.Schedule(step);
    if (batch.kind == Batch::kPrefill || batch.kind == Batch::kDecode) {
      table.Upload();
      Ids sampled;
      for (const BatchRow& row : batch.rows) {
        const Request& req = *row.req;
        for (int64_t i = 0; i < row.extend_len; ++i) {
          const int64_t pos = row.prefix_len + i;
          EXPECT_EQ(table.Get(row.row, pos), row.new_slots[i]);
          if (paged()) {
            EXPECT_EQ(blocks.SlotAt(row.row, pos), row.new_slots[i]);
          }
          pool.WriteToken(row.new_slots[i], req.tokens[pos], pos);
        }
        if (!row.produces_token) continue;
        const int64_t len = row.prefix_len + row.extend_len;
        EXPECT_EQ(len, req.seq_len());
        const int64_t query = req.tokens[len - 1];
        const std::vector<int32_t> slots = AttentionRow(row.row, len);
        const int64_t actual = model.NextTokenFromPool(pool, slots.data(), len, query);
        mismatches += actual != model.ExpectedNextToken(req.tokens, query);
        produced += 1;
        sampled.push_back(actual);
      }
      auto done = scheduler.Complete(batch, sampled);
      for (auto& req : done) finished.push_back(std::move(req));
    }
    const Batch::Kind kind = batch.kind;
    batches.push_back(std::move(batch));
    return kind;
  }

  // Steps until every request is done or the scheduler reports a stall; returns the last kind.
  Batch::Kind Run(int64_t first_step, int64_t max_steps) {
    Batch::Kind kind = Batch::kIdle;
    for (int64_t step = first_step; step < first_step + max_steps && !scheduler.Done(); ++step) {
      kind = Step(step);
      if (kind == Batch::kPoolTooSmall) break;
    }
    return kind;
  }

  // Every allocatable slot is either free, cached or held by a running request (whole blocks
  // when paged: a running request holds the rest of its last block too), and the cache's
  // counters match its tree.
  void ExpectNoLeak() const {
    cache.TEST_CheckInvariants();
    const int64_t bs = scheduler.options().block_size;
    int64_t held = 0;
    for (const auto& req : scheduler.running()) {
      held += BlocksSpanning(static_cast<int64_t>(req->slots.size()), bs) * bs - req->cached_len;
    }
    EXPECT_EQ(allocator.NumFree() * bs + cache.TotalCachedTokens() + held,
              pool.num_slots() - bs);
  }
};

inline SchedulerOptions Options(int64_t max_running, int64_t chunk, int64_t budget,
                                int64_t context) {
  return SchedulerOptions{.max_running_reqs = max_running,
                          .chunk_size = chunk,
                          .prefill_token_budget = budget,
                          .max_context_len = context};
}

}  // namespace kvcanary::sim
