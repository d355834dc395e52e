// The timing-jitter fuzzer on the host: the seeded draw (reproducible, probability 0 and 1, ticks
// within [1, max], log-uniform), the upload into the static device buffer, and the four points of
// a step in order, observed through the perturbation events of an eager and a replayed step. On
// the CPU the spin-wait op is a no-op, so the runtime's results do not change with jitter on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#ifdef KVC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "kvcanary/runtime/canary_manager.h"
#include "kvcanary/error.h"
#include "kvcanary/runtime/config.h"
#include "kvcanary/runtime/device_memory.h"
#include "kvcanary/spin_wait.h"
#include "runtime/fake_engine.h"
#include "runtime/jitter.h"
#include "runtime/perturbation_util.h"

namespace kvcanary::runtime {
namespace {

constexpr const char* kPointEvents[] = {"jitter_pre_head", "jitter_post_head", "jitter_post_attn",
                                        "jitter_post_tail"};

std::vector<JitterCycles> Draws(double prob, int64_t max_cycles, uint64_t seed, int steps) {
  JitterDraw draw(prob, max_cycles, seed);
  std::vector<JitterCycles> out;
  for (int i = 0; i < steps; ++i) out.push_back(draw.Next());
  return out;
}

TEST(JitterDraw, TheSeedFixesTheSequence) {
  EXPECT_EQ(Draws(0.5, 100000, 7, 64), Draws(0.5, 100000, 7, 64));
  EXPECT_NE(Draws(0.5, 100000, 7, 64), Draws(0.5, 100000, 8, 64));
}

TEST(JitterDraw, ProbabilityZeroNeverFiresAndOneAlwaysFires) {
  for (const JitterCycles& step : Draws(0.0, 100000, 3, 2000)) {
    for (int64_t ticks : step) EXPECT_EQ(ticks, 0);
  }
  for (const JitterCycles& step : Draws(1.0, 100000, 3, 2000)) {
    for (int64_t ticks : step) EXPECT_GE(ticks, 1);
  }
}

TEST(JitterDraw, TicksStayWithinOneAndTheMaximum) {
  for (const int64_t max_cycles : {int64_t{1}, int64_t{2}, int64_t{100000}, kMaxSpinWaitCycles}) {
    for (const JitterCycles& step : Draws(1.0, max_cycles, 11, 2000)) {
      for (int64_t ticks : step) {
        EXPECT_GE(ticks, 1);
        EXPECT_LE(ticks, max_cycles);
      }
    }
  }
}

// Log-uniform: half of the draws in [1, 10^6] fall below 10^3, and about half of the points fire
// at probability 0.5. The sequence is fixed by the seed, so the bounds cannot flake.
TEST(JitterDraw, FiresAtTheProbabilityWithLogUniformTicks) {
  int fired = 0;
  int below_thousand = 0;
  const int steps = 4000;
  for (const JitterCycles& step : Draws(0.5, 1000000, 5, steps)) {
    for (int64_t ticks : step) {
      fired += ticks > 0;
      below_thousand += ticks > 0 && ticks < 1000;
    }
  }
  EXPECT_NEAR(fired, 0.5 * 4 * steps, 0.03 * 4 * steps);
  EXPECT_NEAR(below_thousand, 0.5 * fired, 0.05 * fired);
}

Config JitterConfig(double prob, uint64_t seed) {
  Config config;
  config.mode = Mode::kLog;
  config.jitter_enabled = true;
  config.jitter_per_slot_fire_prob = prob;
  config.jitter_max_cycles = 5000;
  config.jitter_seed = seed;
  return config;
}

TEST(JitterFuzzer, StageStepCopiesTheDrawIntoTheDeviceBuffer) {
  JitterFuzzer fuzzer(JitterConfig(0.5, 21), Device::CPU());
  JitterDraw expected(0.5, 5000, 21);
  for (int step = 0; step < 6; ++step) {
    const JitterCycles drawn = expected.Next();
    EXPECT_EQ(fuzzer.StageStep(nullptr), drawn);
    for (int point = 0; point < kNumJitterPoints; ++point) {
      const TensorView element = fuzzer.Cycles(static_cast<JitterPoint>(point));
      ASSERT_EQ(element.ShapeString(), "(1,)");
      EXPECT_EQ(*element.data_as<const int64_t>(), drawn[point]) << "point " << point;
      fuzzer.Launch(static_cast<JitterPoint>(point), nullptr);  // the CPU no-op
      EXPECT_EQ(*element.data_as<const int64_t>(), drawn[point]);
    }
  }
  EXPECT_EQ(fuzzer.device_bytes(), 32);
}

testing::FakeEngineOptions EngineWith(const Config& config) {
  testing::FakeEngineOptions options;
  options.config = config;
  options.config.real_data = RealKvHashMode::kPartial;
  return options;
}

// The perturbation events of the fired points, in order, as (kind, ticks).
std::vector<std::pair<std::string, int64_t>> JitterEvents(const Recorder& recorder) {
  std::vector<std::pair<std::string, int64_t>> events;
  for (const PerturbationEvent& event : recorder.events) {
    if (event.kind.rfind("jitter_", 0) == 0) events.emplace_back(event.kind, event.replacement);
  }
  return events;
}

TEST(JitterRuntime, EachStepRunsTheFourPointsInOrderWithItsDraw) {
  RecordedEngine run(EngineWith(JitterConfig(1.0, 99)));
  run.engine.AddRequest(5);
  run.engine.AddRequest(3);
  JitterDraw expected(1.0, 5000, 99);
  for (int step = 0; step < 4; ++step) {
    run.recorder.events.clear();
    run.engine.Step();
    const JitterCycles drawn = expected.Next();
    std::vector<std::pair<std::string, int64_t>> wanted;
    for (int point = 0; point < kNumJitterPoints; ++point) {
      wanted.emplace_back(kPointEvents[point], drawn[point]);
    }
    EXPECT_EQ(JitterEvents(run.recorder), wanted) << "step " << step;
    for (const PerturbationEvent& event : run.recorder.events) EXPECT_EQ(event.step, step);
  }
  EXPECT_TRUE(run.recorder.rows.empty());
}

// A replayed forward runs the captured launches: the events come in the same order, with the
// ticks BeginStep drew for the step; a point that does not fire sends none.
TEST(JitterRuntime, AReplayedForwardReportsThePointsItReplays) {
  RecordedEngine run(EngineWith(JitterConfig(0.5, 4)));
  run.engine.AddRequest(4);
  JitterDraw expected(0.5, 5000, 4);
  for (int step = 0; step < 8; ++step) {
    run.recorder.events.clear();
    const testing::PreparedStep prepared = run.engine.PrepareStep();
    run.engine.canary->BeginStep(prepared.input);
    run.engine.canary->ReplayedForward(0);
    run.engine.canary->EndStep();
    std::vector<std::pair<std::string, int64_t>> wanted;
    const JitterCycles drawn = expected.Next();
    for (int point = 0; point < kNumJitterPoints; ++point) {
      if (drawn[point] > 0) wanted.emplace_back(kPointEvents[point], drawn[point]);
    }
    EXPECT_EQ(JitterEvents(run.recorder), wanted) << "step " << step;
  }
}

// A refused step draws nothing: the next accepted step gets the sequence's first values.
TEST(JitterRuntime, ARejectedStepDoesNotAdvanceTheDraw) {
  RecordedEngine run(EngineWith(JitterConfig(1.0, 12)));
  run.engine.AddRequest(3);
  EXPECT_THROW(run.engine.canary->BeginStep(StepInput{}), Error);
  run.engine.Step();
  const JitterCycles first = JitterDraw(1.0, 5000, 12).Next();
  ASSERT_EQ(JitterEvents(run.recorder).size(), 4u);
  EXPECT_EQ(JitterEvents(run.recorder)[0].second, first[0]);
  EXPECT_EQ(JitterEvents(run.recorder)[3].second, first[3]);
}

// On the CPU the spin is a no-op: the same steps and the same KV flip report the same rows with
// jitter on and off, and jitter adds only its 32-byte buffer.
TEST(JitterRuntime, CpuResultsDoNotChangeWithJitterOn) {
  Config off = JitterConfig(1.0, 1);
  off.jitter_enabled = false;
  std::vector<std::vector<int64_t>> rows[2];
  int64_t device_bytes[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    RecordedEngine run(EngineWith(on ? JitterConfig(1.0, 1) : off));
    const int64_t row = run.engine.AddRequest(6);
    run.engine.Step();
    run.engine.FlipKByte(run.engine.SlotOf(row, 2), 0);
    for (int step = 0; step < 3; ++step) run.engine.Step();
    for (const ViolationRow& v : run.recorder.rows) {
      rows[on].push_back({v.kernel_kind, v.slot_idx, v.position, v.fail_reason_bits});
    }
    device_bytes[on] = run.engine.canary->device_bytes();
  }
  EXPECT_FALSE(rows[0].empty());
  EXPECT_EQ(rows[0], rows[1]);
  EXPECT_EQ(device_bytes[1] - device_bytes[0], 32);
}

#ifdef KVC_HAVE_CUDA
// On CUDA the four launches are real spins: a step (its four points, the verify and write
// launches) takes at least the ticks its draw gave them, at the device's peak clock, and the
// points still come in order. Skips without a device.
TEST(JitterRuntime, OnCudaEachStepSpinsForItsDraw) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  int khz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), cudaSuccess);
  Config config = JitterConfig(1.0, 31);
  config.jitter_max_cycles = 4'000'000;
  testing::FakeEngineOptions options = EngineWith(config);
  options.device = Device::CUDA(0);
  RecordedEngine run(options);
  run.engine.AddRequest(5);
  run.engine.Step();  // warm-up: module loads
  JitterDraw expected(1.0, 4'000'000, 31);
  expected.Next();
  for (int step = 1; step < 5; ++step) {
    run.recorder.events.clear();
    const JitterCycles drawn = expected.Next();
    const auto start = std::chrono::steady_clock::now();
    run.engine.Step();
    run.engine.Synchronize();
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    int64_t total = 0;
    std::vector<std::pair<std::string, int64_t>> wanted;
    for (int point = 0; point < kNumJitterPoints; ++point) {
      total += drawn[point];
      wanted.emplace_back(kPointEvents[point], drawn[point]);
    }
    EXPECT_EQ(JitterEvents(run.recorder), wanted) << "step " << step;
    EXPECT_GE(ms.count(), 0.98 * static_cast<double>(total) / khz) << "step " << step;
  }
  EXPECT_TRUE(run.recorder.rows.empty());
}
#endif

TEST(JitterRuntime, JitterOffSendsNoEvent) {
  Config off = JitterConfig(1.0, 1);
  off.jitter_enabled = false;
  RecordedEngine run(EngineWith(off));
  run.engine.AddRequest(3);
  run.engine.Step();
  EXPECT_TRUE(JitterEvents(run.recorder).empty());
}

}  // namespace
}  // namespace kvcanary::runtime
