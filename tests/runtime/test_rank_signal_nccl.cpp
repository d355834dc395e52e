// The all-reduced violation signal over a real NCCL communicator: two ranks, one GPU each, in one
// process (one thread per rank, ncclCommInitAll), driven as in two_ranks.h. In raise mode both
// ranks must raise at the same step and neither may hang in a collective the other never joins;
// in log mode both keep serving. Skips without two CUDA devices or without NCCL; the same
// protocol runs on the CPU with an in-process collective in test_rank_signal.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <memory>

#include "kvcanary/runtime/rank_signal.h"
#include "runtime/two_ranks.h"

namespace kvcanary::runtime {
namespace {

using testing::kRanks;
using testing::RankOutcomes;

bool TwoGpusWithNccl() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count >= kRanks && NcclReducerAvailable();
}

// Runs both ranks over NCCL; false when a rank hung (the communicators are then aborted, which
// frees a rank blocked in a collective).
bool RunOverNccl(Mode mode, RankOutcomes* outcomes) {
  std::array<ncclComm_t, kRanks> comms{};
  const std::array<int, kRanks> devices{0, 1};
  if (ncclCommInitAll(comms.data(), kRanks, devices.data()) != ncclSuccess) {
    ADD_FAILURE() << "ncclCommInitAll failed";
    return false;
  }
  const bool finished = testing::RunBothRanks(
      [&](int rank) {
        cudaSetDevice(rank);
        std::unique_ptr<ViolationSignalReducer> reducer = MakeNcclReducer(comms[rank]);
        testing::RunRank(rank, mode, Device::CUDA(rank), reducer.get(), &(*outcomes)[rank]);
      },
      std::chrono::seconds(120),
      [&] {
        for (ncclComm_t comm : comms) ncclCommAbort(comm);
      });
  if (finished) {
    for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  }
  return finished;
}

TEST(RankSignalNccl, RaiseModeStopsBothRanksAtTheSameStep) {
  if (!TwoGpusWithNccl()) GTEST_SKIP() << "needs two CUDA devices and NCCL";
  RankOutcomes outcomes;
  ASSERT_TRUE(RunOverNccl(Mode::kRaise, &outcomes)) << "a rank hung in a collective";
  testing::ExpectBothRaisedTogether(outcomes);
}

TEST(RankSignalNccl, LogModeWarnsTheCleanRankAndBothKeepServing) {
  if (!TwoGpusWithNccl()) GTEST_SKIP() << "needs two CUDA devices and NCCL";
  RankOutcomes outcomes;
  ASSERT_TRUE(RunOverNccl(Mode::kLog, &outcomes)) << "a rank hung in a collective";
  testing::ExpectBothKeptServing(outcomes);
}

}  // namespace
}  // namespace kvcanary::runtime
