// The timing-jitter fuzzer widens a race window until a race is seen.
//
// The race: an engine writes a canary record (or KV) on a side stream without making the compute
// stream wait for it, so the write may land after the verify that should have seen it. The test
// stages it deterministically, once per trial:
//   compute stream: host gate -> event E -> jitter PRE_HEAD spin -> verify of slot 1
//   side stream:    wait E -> spin kDelay ticks -> copy a bad record over slot 1
// The gate (host_gate.h) is a device-side wait on a mapped pinned flag that the host sets only
// after every launch of both streams is enqueued, so however long the host takes between the
// enqueues, both streams start from E together; from E the side write lands after kDelay ticks.
// The gate gives up after kGateLimitNs of wall-clock time, and the trial then fails. With jitter
// off the verify runs right after E, kDelay ticks (half a millisecond at 2 GHz) before the write:
// never caught. With jitter on, the
// fuzzer draws the PRE_HEAD ticks (seeded, so known before the trial): a trial whose spin is at
// least 4 x kDelay runs the verify well after the write and must catch it; one below kDelay / 4
// must not; the trials in between may go either way and are only counted.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "device_buffer.h"
#include "device_state.h"
#include "host_gate.h"
#include "kvcanary/kvcanary.h"
#include "runtime/jitter.h"
#include "testutil.h"

namespace kvcanary {
namespace {

using testing::CanaryState;
using testing::DeviceTensor;
using testing::HostTensor;

constexpr int64_t kGateLimitNs = 1'000'000'000;  // 1 s: the host enqueues in far less
constexpr int64_t kDelay = 1'000'000;
constexpr int kTrials = 48;

class CudaJitterRace : public testing::DeviceTest {
 protected:
  void SetUp() override {
    testing::DeviceTest::SetUp();
    if (IsSkipped()) return;
    KVC_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    KVC_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    KVC_CUDA_CHECK(cudaEventCreateWithFlags(&gate_open_, cudaEventDisableTiming));
    gate_ = std::make_unique<testing::HostGate>();
    good_.set_record(1, Record{.token = 7, .position = 5, .prev_hash = 11, .real_kv_hash = 0});
    bad_.set_record(1, Record{.token = 7, .position = 6, .prev_hash = 11, .real_kv_hash = 0});
    // One verify entry: slot 1 at position 5; predecessor 0 leaves the chain unchecked.
    plan_.slots.values() = {1};
    plan_.positions.values() = {5};
    plan_.prevs.values() = {0};
    plan_.num_valid[0] = 1;
  }
  void TearDown() override {
    if (compute_ != nullptr) cudaStreamDestroy(compute_);
    if (side_ != nullptr) cudaStreamDestroy(side_);
    if (gate_open_ != nullptr) cudaEventDestroy(gate_open_);
  }

  // One trial; `jitter` launches the PRE_HEAD spin (its ticks staged before). Whether the verify
  // reported the late write. `open_first` opens the gate before anything is enqueued: a warm-up
  // that loads the trial's kernels (a lazily loaded kernel's first launch may wait for the device
  // to go idle, which a closed gate holds off until its limit).
  bool Caught(const runtime::JitterFuzzer* jitter, bool open_first = false) {
    testing::DeviceCanaryState state(good_);
    const testing::DevicePlanBuffers plan(plan_);
    const DeviceTensor<uint8_t> bad_record(bad_.canary);
    const DeviceTensor<int64_t> delay(HostTensor<int64_t>::Of({kDelay}));
    gate_->Close();
    if (open_first) gate_->Open();
    gate_->Enqueue(compute_, kGateLimitNs);
    KVC_CUDA_CHECK(cudaEventRecord(gate_open_, compute_));
    if (jitter != nullptr) jitter->Launch(runtime::JitterPoint::kPreHead, compute_);
    VerifyArgs verify;
    verify.context = state.Context();
    verify.plan = plan.verify();
    Verify(verify, compute_);
    KVC_CUDA_CHECK(cudaStreamWaitEvent(side_, gate_open_, 0));
    SpinWait({delay.view()}, side_);
    KVC_CUDA_CHECK(cudaMemcpyAsync(state.canary.data() + 32, bad_record.data() + 32, 32,
                                   cudaMemcpyDeviceToDevice, side_));
    gate_->Open();  // everything is enqueued: both streams start from E
    KVC_CUDA_CHECK(cudaStreamSynchronize(side_));
    KVC_CUDA_CHECK(cudaStreamSynchronize(compute_));
    EXPECT_FALSE(gate_->timed_out()) << "the gate waited " << kGateLimitNs << " ns for the host";
    return state.write_index.ToHost()[0] > 0;
  }

  cudaStream_t compute_ = nullptr;
  cudaStream_t side_ = nullptr;
  cudaEvent_t gate_open_ = nullptr;
  std::unique_ptr<testing::HostGate> gate_;  // mapped pinned memory: only with a device
  CanaryState good_{4};
  CanaryState bad_{4};
  testing::PlanBuffers plan_{1, 1};
};

TEST_F(CudaJitterRace, ALateSideStreamWriteIsCaughtOnlyWithJitterOn) {
  Caught(nullptr, /*open_first=*/true);
  int caught_off = 0;
  for (int trial = 0; trial < kTrials; ++trial) caught_off += Caught(nullptr);

  runtime::Config config;
  config.mode = runtime::Mode::kLog;
  config.jitter_enabled = true;
  config.jitter_per_slot_fire_prob = 0.5;
  // Seed 2 draws 7 PRE_HEAD spins of at least 4 x kDelay and 17 fired ones below kDelay / 4 in
  // the 48 trials (the draw is the same on every platform).
  config.jitter_max_cycles = 64 * kDelay;
  config.jitter_seed = 2;
  runtime::JitterFuzzer fuzzer(config, Device::CUDA(0));
  int caught_on = 0, surely_caught = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int64_t ticks = fuzzer.StageStep(compute_)[0];
    const bool caught = Caught(&fuzzer);
    caught_on += caught;
    if (ticks >= 4 * kDelay) {
      ++surely_caught;
      EXPECT_TRUE(caught) << "trial " << trial << ": " << ticks << " ticks";
    } else if (ticks <= kDelay / 4) {
      EXPECT_FALSE(caught) << "trial " << trial << ": " << ticks << " ticks";
    }
  }
  EXPECT_EQ(caught_off, 0);
  ASSERT_GT(surely_caught, 0) << "the seed drew no long spin";  // the design's premise
  EXPECT_GE(caught_on, surely_caught);
  EXPECT_GT(caught_on, caught_off);
}

}  // namespace
}  // namespace kvcanary
