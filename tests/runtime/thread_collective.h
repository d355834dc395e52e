// An in-process stand-in for a collective of kRanks ranks on threads: the all-reduce (MAX) of the
// violation signal blocks like a real collective, so two ranks' tests show they meet every step
// and stop together (test_rank_signal.cpp, test_pipeline_parallel.cpp); and the runner of two
// CPU ranks through it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>

#include "kvcanary/runtime/rank_signal.h"
#include "runtime/two_ranks.h"

namespace kvcanary::runtime::testing {

// An in-process all-reduce (MAX) across kRanks threads, blocking like a real collective: each
// call waits for the peer's call of the same round. A round the peer never joins gives up after a
// time limit and marks the run hung (NCCL would block for ever).
class ThreadCollective {
 public:
  class Reducer final : public ViolationSignalReducer {
   public:
    Reducer(ThreadCollective* collective) : collective_(collective) {}
    void AllReduceMax(const TensorView& value, StreamHandle) override {
      collective_->Reduce(value.data_as<int32_t>());  // CPU engine: host memory
    }

   private:
    ThreadCollective* collective_;
  };

  void Reduce(int32_t* value) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (hung_) return;
    running_max_ = std::max(running_max_, *value);
    if (++arrived_ == kRanks) {
      result_ = running_max_;
      running_max_ = std::numeric_limits<int32_t>::min();
      arrived_ = 0;
      ++round_;
      joined_.notify_all();
    } else {
      const int64_t round = round_;
      if (!joined_.wait_for(lock, std::chrono::seconds(20), [&] { return round_ != round; })) {
        hung_ = true;
        return;
      }
    }
    *value = result_;  // stays valid: the next round cannot complete before this rank arrives
  }
  bool hung() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return hung_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable joined_;
  int arrived_ = 0;
  int64_t round_ = 0;
  int32_t running_max_ = std::numeric_limits<int32_t>::min();
  int32_t result_ = 0;
  bool hung_ = false;
};

// Runs both ranks on the CPU, on their own threads, through one ThreadCollective: what `plan`
// describes (RunRank), with the signal on. Expects that both finished and neither hung.
inline RankOutcomes RunTwoCpuRanks(Mode mode, const RankPlan& plan = {}) {
  ThreadCollective collective;
  RankOutcomes outcomes;
  const bool finished = RunBothRanks(
      [&](int rank) {
        ThreadCollective::Reducer reducer(&collective);
        RunRank(rank, mode, Device::CPU(), &reducer, &outcomes[rank], plan);
      },
      std::chrono::seconds(120), [] {});
  EXPECT_TRUE(finished);
  EXPECT_FALSE(collective.hung()) << "a rank waited in a collective its peer never joined";
  return outcomes;
}

}  // namespace kvcanary::runtime::testing
