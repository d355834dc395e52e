// Two ranks of one job, each a fake engine on its own thread with the all-reduced violation signal
// on: rank 1 breaks its engine before step kBreakAtStep (by default its table), rank 0's records
// stay clean. Used with an
// in-process collective on the CPU (test_rank_signal.cpp) and with NCCL over two GPUs
// (test_rank_signal_nccl.cpp). A rank that waits in a collective its peer never joins is a hang;
// the runner gives up after a time limit and reports it instead of hanging the test.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "kvcanary/error.h"
#include "kvcanary/runtime/rank_signal.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime::testing {

inline constexpr int kRanks = 2;
inline constexpr int kRankSteps = 8;
inline constexpr int kBreakAtStep = 3;

// How one rank's run ended: the step it raised at (kRankSteps when it never did) and its log.
struct RankOutcome {
  int stopped_at = kRankSteps;
  std::string error;
  std::vector<std::string> log;
};

using RankOutcomes = std::array<RankOutcome, kRanks>;

// Rank 1's default fault: position 4 of its first request now points at its position 6's slot.
inline void BreakTable(FakeEngine& engine, int64_t row) {
  engine.SetSlot(row, 4, engine.SlotOf(row, 6));
}

// What a rank runs: its engine's options (RunRank sets the device, the mode and the signal) and
// what rank 1 does to its engine before step kBreakAtStep (`row` is its first request).
struct RankPlan {
  FakeEngineOptions options;
  std::function<void(FakeEngine&, int64_t row)> break_rank = BreakTable;
};

// Runs one rank on `device` with `reducer` for kRankSteps steps or until it raises.
inline void RunRank(int rank, Mode mode, Device device, ViolationSignalReducer* reducer,
                    RankOutcome* outcome, const RankPlan& plan = {}) {
  FakeEngineOptions options = plan.options;
  options.device = device;
  options.config.mode = mode;
  options.config.allreduce_violation_signal = true;
  options.signal_reducer = reducer;
  FakeEngine engine(options);
  const int64_t row = engine.AddRequest(12);
  engine.AddRequest(9);
  for (int step = 0; step < kRankSteps; ++step) {
    if (rank == 1 && step == kBreakAtStep) plan.break_rank(engine, row);
    try {
      engine.Step();
    } catch (const ViolationError& error) {
      outcome->stopped_at = step;
      outcome->error = error.what();
      break;
    }
  }
  engine.Synchronize();
  outcome->log = engine.log.lines;
}

// Runs run_rank(rank) for both ranks on their own threads; false when they did not all finish
// within `limit` (on_timeout is then called first, e.g. to abort a communicator, and the threads
// are joined after it).
inline bool RunBothRanks(const std::function<void(int)>& run_rank, std::chrono::seconds limit,
                         const std::function<void()>& on_timeout) {
  std::array<std::future<void>, kRanks> done;
  for (int rank = 0; rank < kRanks; ++rank) {
    done[rank] = std::async(std::launch::async, run_rank, rank);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool finished = true;
  for (auto& future : done) {
    if (future.wait_until(deadline) != std::future_status::ready) finished = false;
  }
  if (!finished) on_timeout();
  for (auto& future : done) future.get();
  return finished;
}

// What both backends' tests expect in raise mode: both ranks raise at the same step, rank 1 with
// its own violation and rank 0 with the signal.
inline void ExpectBothRaisedTogether(const RankOutcomes& outcomes) {
  EXPECT_LT(outcomes[1].stopped_at, kRankSteps) << "rank 1 never raised";
  EXPECT_EQ(outcomes[0].stopped_at, outcomes[1].stopped_at);
  EXPECT_EQ(outcomes[1].error.find("another rank"), std::string::npos) << outcomes[1].error;
  EXPECT_NE(outcomes[0].error.find("violation reported by another rank"), std::string::npos)
      << outcomes[0].error;
}

// In log mode: the clean rank warns once, and both ranks serve every step.
inline void ExpectBothKeptServing(const RankOutcomes& outcomes) {
  int warnings = 0;
  for (const std::string& line : outcomes[0].log) {
    if (line.find("violation reported by another rank") != std::string::npos) warnings += 1;
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(outcomes[0].stopped_at, kRankSteps);
  EXPECT_EQ(outcomes[1].stopped_at, kRankSteps);
}

}  // namespace kvcanary::runtime::testing
