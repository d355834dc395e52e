// The timing-jitter fuzzer on the host: the seeded draw (reproducible, probability 0 and 1, ticks
// within [1, max], log-uniform), the upload into the static device buffer, and the four points of
// a step in order, observed through the perturbation events of an eager, a replayed and a split
// step; a refused step draws nothing. On the CPU the spin-wait op is a no-op, so the runtime's
// results do not change with jitter on; on CUDA a step spins for its draw.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
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
#include "runtime/error_message.h"
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

using JitterEventList = std::vector<std::pair<std::string, int64_t>>;

// The perturbation events of the fired points, in order, as (kind, ticks).
JitterEventList JitterEvents(const Recorder& recorder) {
  JitterEventList events;
  for (const PerturbationEvent& event : recorder.events) {
    if (event.kind.rfind("jitter_", 0) == 0) events.emplace_back(event.kind, event.replacement);
  }
  return events;
}

// The events a step with draw `drawn` sends at its four points: the points that fire, in order.
JitterEventList PointEvents(const JitterCycles& drawn) {
  JitterEventList events;
  for (int point = 0; point < kNumJitterPoints; ++point) {
    if (drawn[point] > 0) events.emplace_back(kPointEvents[point], drawn[point]);
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
    EXPECT_EQ(JitterEvents(run.recorder), PointEvents(expected.Next())) << "step " << step;
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
    EXPECT_EQ(JitterEvents(run.recorder), PointEvents(expected.Next())) << "step " << step;
  }
}

// A step whose HEAD verify is split into row ranges (plan arrays past their capacity) spins at
// PRE_HEAD once more, in BeginStep before the ranges' verifies, then at the four points in order.
// A record corrupted when that first PRE_HEAD event comes is caught by the same step's split
// verify (its rows reach the host with the next step), not by the next step's.
TEST(JitterRuntime, ASplitStepSpinsAtPreHeadBeforeItsSplitVerify) {
  Config config = JitterConfig(1.0, 99);
  config.fused_verify = false;  // plan arrays, which the batch overflows
  testing::FakeEngineOptions options = EngineWith(config);
  options.capacities = Capacities{/*verify=*/16, /*write_req=*/8, /*write_entry=*/256};
  RecordedEngine run(options);
  const int64_t row = run.engine.AddRequest(12);
  for (int r = 0; r < 3; ++r) run.engine.AddRequest(12);
  bool corrupt_at_pre_head = false;
  run.engine.canary->SetPerturbationListener([&](const PerturbationEvent& event) {
    run.recorder.events.push_back(event);
    if (!corrupt_at_pre_head || event.kind != "jitter_pre_head") return;
    corrupt_at_pre_head = false;
    const TensorView head = run.engine.canary->CanaryBuffer(GroupKind::kFull, false, false);
    head.data_as<uint8_t>()[kCanarySlotBytes * run.engine.SlotOf(row, 2) + 8] ^= 1;  // position
  });
  JitterDraw expected(1.0, 5000, 99);
  for (int step = 0; step < 3; ++step) {  // a prefill, then two decodes past the plan capacity
    run.recorder.events.clear();
    const int64_t split_steps = run.engine.canary->split_steps();
    corrupt_at_pre_head = step == 1;
    run.engine.Step();
    const bool split = run.engine.canary->split_steps() > split_steps;
    EXPECT_EQ(split, step > 0) << "step " << step;
    const JitterCycles drawn = expected.Next();
    JitterEventList wanted;
    if (split) wanted.emplace_back(kPointEvents[0], drawn[0]);
    for (const auto& event : PointEvents(drawn)) wanted.push_back(event);
    EXPECT_EQ(JitterEvents(run.recorder), wanted) << "step " << step;
  }
  EXPECT_TRUE(Caught(run.recorder, kHeadK, ~int64_t{0}, run.engine.SlotOf(row, 2)));
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

// The same for the last check of a step (its request token lists must fit the staging buffer,
// 3 x 16 ids here): the refused step changes no phase and the same step, accepted without the
// lists, gets the draw the refused one would have had.
TEST(JitterRuntime, AStepRefusedByItsLastCheckDoesNotAdvanceTheDraw) {
  Config config = JitterConfig(1.0, 12);
  config.enable_verify_token_assert = true;
  testing::FakeEngineOptions options = EngineWith(config);
  options.capacities = Capacities{/*verify=*/16, /*write_req=*/8, /*write_entry=*/256};
  RecordedEngine run(options);
  run.engine.AddRequest(3);
  const testing::PreparedStep prepared = run.engine.PrepareStep();
  StepInput refused = prepared.input;
  refused.host[0].req_all_ids_lens = {46};
  refused.host[0].req_all_ids_flat.assign(46, 7);
  EXPECT_EQ(ErrorMessage([&] { run.engine.canary->BeginStep(refused); }),
            "kv-canary: the step's request token lists (46 ids) exceed the staging capacity 48");
  run.engine.canary->BeginStep(prepared.input);
  run.engine.canary->PreForward(0);
  run.engine.WriteKv(prepared);
  run.engine.UploadKvRows(prepared);
  run.engine.canary->PostForward(0);
  run.engine.canary->EndStep();
  EXPECT_EQ(JitterEvents(run.recorder), PointEvents(JitterDraw(1.0, 5000, 12).Next()));
  EXPECT_TRUE(run.recorder.rows.empty());
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
testing::FakeEngineOptions CudaEngineWith(const Config& config) {
  testing::FakeEngineOptions options = EngineWith(config);
  options.device = Device::CUDA(0);
  return options;
}

// The wall-clock milliseconds of one eager step, its device work included.
double StepMs(RecordedEngine& run) {
  const auto start = std::chrono::steady_clock::now();
  run.engine.Step();
  run.engine.Synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// On CUDA the four launches are real spins: a step takes longer than the fastest step with jitter
// off by at least 0.9 of the ticks its draw gave them at the device's peak clock (a lower clock
// only lengthens a spin; the tenth covers host work the spins overlap), and the points still come
// in order. Seed 114 draws step sums of 71.6M to 82.7M ticks (at least 36 ms at 2 GHz), so a step
// that did not spin falls far short. Skips without a device.
TEST(JitterRuntime, OnCudaEachStepSpinsForItsDraw) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  int khz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), cudaSuccess);
  Config config = JitterConfig(1.0, 114);
  config.jitter_max_cycles = kMaxSpinWaitCycles;
  Config off = config;
  off.jitter_enabled = false;
  double baseline_ms = std::numeric_limits<double>::infinity();
  {
    RecordedEngine quiet(CudaEngineWith(off));
    quiet.engine.AddRequest(5);
    quiet.engine.Step();  // warm-up: module loads
    for (int step = 1; step < 5; ++step) baseline_ms = std::min(baseline_ms, StepMs(quiet));
  }
  RecordedEngine run(CudaEngineWith(config));
  run.engine.AddRequest(5);
  run.engine.Step();  // warm-up
  JitterDraw expected(1.0, kMaxSpinWaitCycles, 114);
  expected.Next();
  for (int step = 1; step < 5; ++step) {
    run.recorder.events.clear();
    const JitterCycles drawn = expected.Next();
    const double ms = StepMs(run);
    const int64_t total = drawn[0] + drawn[1] + drawn[2] + drawn[3];
    ASSERT_GE(total, 70'000'000) << "step " << step;  // the premise: long spins
    EXPECT_EQ(JitterEvents(run.recorder), PointEvents(drawn)) << "step " << step;
    EXPECT_GE(ms - baseline_ms, 0.9 * static_cast<double>(total) / khz)
        << "step " << step << ": " << ms << " ms, " << baseline_ms << " ms with jitter off";
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
