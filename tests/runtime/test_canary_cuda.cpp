// The step protocol on CUDA tensors (the GPU half of test_canary_manager.cpp): the fake engine's
// pool, req_to_token and batch live on the device and every canary launch runs on the engine's
// stream. Each corruption scenario runs on the CPU and on CUDA and must report the same violation
// rows. Graph capture and replay are in test_canary_cuda_graph.cpp. Every test skips without a
// device.
#include <gtest/gtest.h>

#include <string>

#include "kvcanary/error.h"
#include "kvcanary/runtime/canary_manager.h"
#include "runtime/canary_cuda_util.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {
namespace {

using testing::FakeEngine;
using testing::FakeEngineOptions;

// Runs the scenario on the CPU and on CUDA; the CUDA run must report exactly the CPU's rows,
// log lines and counters. Returns the CUDA report.
Report RunBothAndCompare(const FakeEngineOptions& options, const Scenario& scenario) {
  const Report cpu = Run(Device::CPU(), options, scenario);
  const Report cuda = Run(Device::CUDA(0), options, scenario);
  EXPECT_EQ(cuda.rows, cpu.rows) << "CUDA rows:" << ToString(cuda.rows)
                                 << "\nCPU rows:" << ToString(cpu.rows);
  EXPECT_EQ(cuda.violation_lines, cpu.violation_lines);
  EXPECT_EQ(cuda.metrics.kernel_runs, cpu.metrics.kernel_runs);
  EXPECT_EQ(cuda.metrics.protected_tokens, cpu.metrics.protected_tokens);
  EXPECT_EQ(cuda.metrics.violations_total, cpu.metrics.violations_total);
  EXPECT_EQ(cuda.split_steps, cpu.split_steps);
  return cuda;
}

TEST(CanaryCuda, CleanRunReportsNothingAndCountsLikeTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(), [](FakeEngine& engine) {
    engine.AddRequest(20);
    engine.AddRequest(7);
    for (int i = 0; i < 30; ++i) engine.Step();
    EXPECT_EQ(engine.canary->outer_step(), 30);
  });
  EXPECT_TRUE(cuda.rows.empty()) << ToString(cuda.rows);
  int64_t protected_tokens = 0;
  for (int64_t count : cuda.metrics.protected_tokens) protected_tokens += count;
  EXPECT_GT(protected_tokens, 0);
  EXPECT_EQ(cuda.metrics.kernel_runs[Tag(CanaryLaunchTag::kTailVFull)], 2 * 29);
  EXPECT_EQ(cuda.metrics.violations_total, 0);
}

TEST(CanaryCuda, RemappedPrefixEntryMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(), RunIntoARemappedPrefixEntry);
  ASSERT_FALSE(cuda.rows.empty());
  EXPECT_EQ(cuda.rows.front()[0], 5) << "reported one step late";
  EXPECT_TRUE(HasRow(cuda, Tag(CanaryLaunchTag::kHeadKFull), FailReason::kVerifyPositionMismatch));
}

class CanaryCudaRealData : public ::testing::TestWithParam<RealKvHashMode> {};

TEST_P(CanaryCudaRealData, FlippedKvByteMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  int64_t slot = -1;
  const Report cuda = RunBothAndCompare(LogOptions(GetParam()), [&slot](FakeEngine& engine) {
    engine.AddRequest(12);
    for (int i = 0; i < 3; ++i) engine.Step();
    slot = engine.SlotOf(1, 5);
    engine.FlipKByte(slot, 3);
    engine.Step();
    engine.Step();
  });
  ASSERT_FALSE(cuda.rows.empty());
  EXPECT_TRUE(
      HasRow(cuda, Tag(CanaryLaunchTag::kTailKFull), FailReason::kVerifyRealKvHashMismatch, slot));
  for (const RowKey& key : cuda.rows) {
    EXPECT_NE(key[1], Tag(CanaryLaunchTag::kHeadKFull)) << "HEAD records carry no fingerprint";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CanaryCudaRealData,
                         ::testing::Values(RealKvHashMode::kPartial, RealKvHashMode::kAll));

TEST(CanaryCuda, FlippedKvByteIsInvisibleWithoutRealData) {
  KVC_SKIP_WITHOUT_CUDA();
  const Report cuda = RunBothAndCompare(LogOptions(RealKvHashMode::kNone), [](FakeEngine& engine) {
    engine.AddRequest(12);
    for (int i = 0; i < 3; ++i) engine.Step();
    engine.FlipKByte(engine.SlotOf(1, 5), 3);
    for (int i = 0; i < 3; ++i) engine.Step();
  });
  EXPECT_TRUE(cuda.rows.empty()) << ToString(cuda.rows);
}

TEST(CanaryCuda, SplitVerificationMatchesTheCpu) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = SmallPlanOptions();
  options.config.fused_verify = false;  // SGLang's plan arrays, which can overflow
  const Report cuda = RunBothAndCompare(options, [](FakeEngine& engine) {
    FillPastThePlanCapacity(engine);
    EXPECT_TRUE(engine.log.Contains("verified outside the graph in"));
    EXPECT_FALSE(engine.log.Contains("verify skipped this step"));
    RemapAcrossRequestsAndReport(engine);
  });
  ASSERT_FALSE(cuda.rows.empty()) << "a step over capacity was not verified on CUDA";
  EXPECT_GT(cuda.split_steps, 0);
  EXPECT_TRUE(HasRow(cuda, Tag(CanaryLaunchTag::kHeadKFull), FailReason::kVerifyPositionMismatch));
}

TEST(CanaryCuda, RaiseModeThrowsOnCuda) {
  KVC_SKIP_WITHOUT_CUDA();
  FakeEngineOptions options = LogOptions();
  options.config.mode = Mode::kRaise;
  options.device = Device::CUDA(0);
  FakeEngine engine(options);
  const std::string message = RaiseOnARemappedPosition(engine);
  EXPECT_NE(message.find("kv_canary violation: launch_tag=HEAD_K_FULL"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace kvcanary::runtime
