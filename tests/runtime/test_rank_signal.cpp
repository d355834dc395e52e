// The all-reduced violation signal: a rank whose own records are clean
// learns, one step late, that another rank saw a violation, and raises with it in raise mode.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/runtime/rank_signal.h"
#include "runtime/fake_engine.h"
#include "runtime/thread_collective.h"
#include "runtime/two_ranks.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

// Stands in for the other ranks: from step `from_call` on, some peer has `peer_count` rows.
class FakePeers : public ViolationSignalReducer {
 public:
  void AllReduceMax(const TensorView& value, StreamHandle) override {
    calls += 1;
    int32_t* local = value.data_as<int32_t>();  // CPU engine: host memory
    if (calls >= from_call) *local = std::max(*local, peer_count);
  }
  int calls = 0;
  int from_call = 1 << 30;
  int32_t peer_count = 3;
};

FakeEngineOptions SignalOptions(Mode mode, FakePeers* peers) {
  FakeEngineOptions options;
  options.config.mode = mode;
  options.config.allreduce_violation_signal = true;
  options.signal_reducer = peers;
  return options;
}

TEST(RankSignal, QuietPeersChangeNothing) {
  FakePeers peers;
  FakeEngine engine(SignalOptions(Mode::kRaise, &peers));
  engine.AddRequest(8);
  for (int i = 0; i < 6; ++i) engine.Step();
  EXPECT_EQ(peers.calls, 6);  // once per step
  EXPECT_FALSE(engine.log.Contains("another rank"));
}

TEST(RankSignal, RaiseModeRaisesOneStepAfterAPeerSawAViolation) {
  FakePeers peers;
  peers.from_call = 3;  // the value reduced in step 2 carries the peer's rows
  FakeEngine engine(SignalOptions(Mode::kRaise, &peers));
  engine.AddRequest(8);
  for (int i = 0; i < 3; ++i) engine.Step();  // steps 0-2: staged, not yet read
  try {
    engine.Step();  // step 3 reads what step 2 staged
    FAIL() << "no error";
  } catch (const ViolationError& error) {
    EXPECT_STREQ(error.what(),
                 "kv-canary: violation reported by another rank (all-reduced violation signal) "
                 "at step=4");
  }
}

TEST(RankSignal, LogModeWarnsOnceAndKeepsServing) {
  FakePeers peers;
  peers.from_call = 2;
  FakeEngine engine(SignalOptions(Mode::kLog, &peers));
  engine.AddRequest(8);
  for (int i = 0; i < 6; ++i) engine.Step();
  int warnings = 0;
  for (const std::string& line : engine.log.lines) {
    if (line.find("violation reported by another rank") != std::string::npos) warnings += 1;
  }
  EXPECT_EQ(warnings, 1);
}

TEST(RankSignal, OffByDefault) {
  FakePeers peers;
  peers.from_call = 1;
  FakeEngineOptions options = SignalOptions(Mode::kRaise, &peers);
  options.config.allreduce_violation_signal = false;
  FakeEngine engine(options);
  engine.AddRequest(8);
  for (int i = 0; i < 4; ++i) engine.Step();
  EXPECT_EQ(peers.calls, 0);
}

TEST(RankSignal, TwoRanksInRaiseModeStopAtTheSameStepWithoutAHang) {
  testing::ExpectBothRaisedTogether(testing::RunTwoCpuRanks(Mode::kRaise));
}

TEST(RankSignal, TwoRanksInLogModeBothKeepServing) {
  testing::ExpectBothKeptServing(testing::RunTwoCpuRanks(Mode::kLog));
}

TEST(RankSignal, NcclReducerNeedsACommunicator) {
  if (!NcclReducerAvailable()) {
    EXPECT_THROW(MakeNcclReducer(nullptr), Error);
    GTEST_SKIP() << "built without NCCL";
  }
  EXPECT_THROW(MakeNcclReducer(nullptr), Error);
}

}  // namespace
}  // namespace kvcanary::runtime
