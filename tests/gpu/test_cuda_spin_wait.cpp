// The spin-wait op and the timing-jitter fuzzer on a GPU: the op spins at least the ticks asked
// (bounded by kMaxSpinWaitCycles and the kMaxSpinWaitNanoseconds wall-clock limit) and returns at
// once for <= 0; a captured graph spins for the
// value the buffer holds at each replay; and the fuzzer widens a race window so that a stray
// record write on a side stream, landing after the verify that should have seen it, is caught
// with jitter on and never with it off. Times come from CUDA events; a tick count becomes a lower
// bound in milliseconds through the device's peak clock (no SM runs faster than its peak).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>

#include "device_buffer.h"
#include "device_state.h"
#include "kvcanary/kvcanary.h"
#include "kvcanary/runtime/device_memory.h"
#include "owned_graph.h"
#include "runtime/jitter.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::DeviceTensor;
using testing::HostTensor;

struct Event {
  Event() { KVC_CUDA_CHECK(cudaEventCreate(&handle)); }
  ~Event() { cudaEventDestroy(handle); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t handle = nullptr;
};

class CudaSpinWait : public testing::DeviceTest {
 protected:
  // The stream and the tick buffer exist only on a machine with a device.
  void SetUp() override {
    testing::DeviceTest::SetUp();
    if (IsSkipped()) return;
    stream_ = std::make_unique<runtime::OwnedStream>(Device::CUDA(0));
    cycles_ = DeviceTensor<int64_t>(HostTensor<int64_t>::Of({0}));
  }
  void TearDown() override {
    if (stream_ != nullptr) runtime::SynchronizeStream(Device::CUDA(0), stream_->handle());
  }

  // The fewest milliseconds `ticks` clock ticks can take: at the device's peak clock.
  static double LeastMs(int64_t ticks) {
    int khz = 0;
    KVC_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    return static_cast<double>(ticks) / khz;
  }

  // Milliseconds between two events around `enqueue(stream)`, after it completed.
  template <typename Enqueue>
  double TimeMs(cudaStream_t stream, Enqueue enqueue) {
    Event start, end;
    KVC_CUDA_CHECK(cudaEventRecord(start.handle, stream));
    enqueue(stream);
    KVC_CUDA_CHECK(cudaEventRecord(end.handle, stream));
    KVC_CUDA_CHECK(cudaEventSynchronize(end.handle));
    float ms = 0;
    KVC_CUDA_CHECK(cudaEventElapsedTime(&ms, start.handle, end.handle));
    return ms;
  }

  double SpinMs(int64_t ticks) {
    cycles_.CopyFrom(HostTensor<int64_t>::Of({ticks}));
    return TimeMs(stream(), [&](cudaStream_t s) { SpinWait({cycles_.view()}, s); });
  }

  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_->handle()); }

  std::unique_ptr<runtime::OwnedStream> stream_;
  DeviceTensor<int64_t> cycles_;
};

TEST_F(CudaSpinWait, SpinsAtLeastTheRequestedTicks) {
  SpinMs(1000);  // warm-up: module load
  for (const int64_t ticks : {int64_t{2'000'000}, int64_t{20'000'000}}) {
    const double ms = SpinMs(ticks);
    EXPECT_GE(ms, 0.98 * LeastMs(ticks)) << ticks << " ticks";
    EXPECT_LT(ms, 20 * LeastMs(ticks) + 5) << ticks << " ticks";
  }
}

TEST_F(CudaSpinWait, ReturnsAtOnceForZeroOrNegativeTicks) {
  SpinMs(1000);
  const double spin = SpinMs(4'000'000);
  for (const int64_t ticks : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    const double ms = SpinMs(ticks);
    EXPECT_LT(ms, 0.5) << ticks << " ticks";
    EXPECT_LT(ms, spin / 10) << ticks << " ticks";
  }
}

// No value can hang the stream: the largest int64 spins kMaxSpinWaitCycles ticks (at least ~50 ms
// at a 2 GHz peak clock), and never past the wall-clock limit, whatever the clock.
TEST_F(CudaSpinWait, TheSpinIsBoundedWhateverTheValue) {
  SpinMs(1000);
  const double ms = SpinMs(std::numeric_limits<int64_t>::max());
  const double limit_ms = 1e-6 * static_cast<double>(kMaxSpinWaitNanoseconds);
  EXPECT_GE(ms, 0.98 * std::min(LeastMs(kMaxSpinWaitCycles), limit_ms));
  EXPECT_LT(ms, limit_ms + 20);  // the kernel checks the limit every few hundred nanoseconds
}

TEST_F(CudaSpinWait, AGraphReplaySpinsForTheValueAtReplay) {
  testing::OwnedGraph graph;
  KVC_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
  SpinWait({cycles_.view()}, stream());
  KVC_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph.graph));
  KVC_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
  const auto replay_ms = [&](int64_t ticks) {
    cycles_.CopyFrom(HostTensor<int64_t>::Of({ticks}));
    return TimeMs(stream(),
                  [&](cudaStream_t s) { KVC_CUDA_CHECK(cudaGraphLaunch(graph.exec, s)); });
  };
  replay_ms(0);
  // A first long spin brings the SM clock up from idle: shorter and longer then run at one clock
  // and their ratio is the ratio of their ticks.
  replay_ms(40'000'000);
  const double idle = replay_ms(0);
  const double shorter = replay_ms(4'000'000);
  const double longer = replay_ms(16'000'000);
  EXPECT_LT(idle, 0.5);
  EXPECT_GE(shorter, 0.98 * LeastMs(4'000'000));
  EXPECT_GE(longer, 0.98 * LeastMs(16'000'000));
  EXPECT_GT(longer, 2 * shorter);
  EXPECT_LT(replay_ms(-3), 0.5);
}

// The fuzzer's four launches captured once: each replay spins at least the sum of the ticks the
// preceding StageStep drew and copied in (through its pinned slots, on the same stream). Seed 1220
// draws step sums of 2.3M, 5.4M, 12.5M, 29.4M and 78.7M ticks: each at least twice any earlier
// one (and the first far above a replay without spin), so a replay that spun for a stale value
// (an earlier step's, or the buffer's initial zeros) falls short of its bound at every step.
TEST_F(CudaSpinWait, TheFuzzersCapturedPointsSpinForEachStepsDraw) {
  runtime::Config config;
  config.mode = runtime::Mode::kLog;
  config.jitter_enabled = true;
  config.jitter_per_slot_fire_prob = 1.0;
  config.jitter_max_cycles = kMaxSpinWaitCycles;
  config.jitter_seed = 1220;
  runtime::JitterFuzzer fuzzer(config, Device::CUDA(0));
  SpinMs(40'000'000);  // brings the SM clock up from idle
  testing::OwnedGraph graph;
  KVC_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
  for (int point = 0; point < runtime::kNumJitterPoints; ++point) {
    fuzzer.Launch(static_cast<runtime::JitterPoint>(point), stream());
  }
  KVC_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph.graph));
  KVC_CUDA_CHECK(cudaGraphInstantiate(&graph.exec, graph.graph, 0));
  int64_t previous_total = 0;
  for (int step = 0; step < 5; ++step) {
    const runtime::JitterCycles& drawn = fuzzer.StageStep(stream());
    int64_t total = 0;
    for (int64_t ticks : drawn) total += ticks;
    // The premise: a stale value would be at most half of this step's.
    ASSERT_GE(total, std::max<int64_t>(2 * previous_total, 2'000'000)) << "step " << step;
    previous_total = total;
    const double ms = TimeMs(stream(), [&](cudaStream_t s) {
      KVC_CUDA_CHECK(cudaGraphLaunch(graph.exec, s));
    });
    EXPECT_GE(ms, 0.98 * LeastMs(total)) << "step " << step << ", " << total << " ticks";
  }
}

}  // namespace
}  // namespace kvcanary
