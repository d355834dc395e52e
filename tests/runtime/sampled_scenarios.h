// Sampled verify (Config::verify_sample) scenarios that the CPU tests
// (test_sampled_verify_runtime.cpp) and the CUDA graph test (test_canary_cuda_graph.cpp) both
// run: a remapped prefix position must be reported within K + 1 steps (K steps to be sampled, one
// to reach the host), and a clean run must report nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kvcanary/runtime/canary_manager.h"
#include "runtime/engine_scenarios.h"
#include "runtime/fake_engine.h"

namespace kvcanary::runtime {

inline testing::FakeEngineOptions SampledOptions(int64_t sample, Device device = Device::CPU()) {
  testing::FakeEngineOptions options = LogOptions();
  options.config.verify_sample = sample;
  options.device = device;
  return options;
}

// Counts the violation rows the listener sees.
inline void CountRows(testing::FakeEngine& engine, int64_t& rows) {
  engine.canary->SetViolationListener([&rows](const ViolationRow&, int64_t) { rows += 1; });
}

// Steps after `position` of a 16-token request (beside a second one) was pointed at a slot of the
// other request until the first row reached the listener; -1 when none did in `limit` steps. The
// prefill is an eager step, then every step is `make_step()`'s (made after the engine, so a
// captured graph it owns is destroyed first); the first two of them are clean.
template <typename MakeStep>
int64_t StepsToReport(const testing::FakeEngineOptions& options, int64_t position, int64_t limit,
                      MakeStep&& make_step) {
  testing::FakeEngine engine(options);
  auto step = make_step();
  int64_t rows = 0;
  CountRows(engine, rows);
  const int64_t row = engine.AddRequest(16);
  const int64_t other = engine.AddRequest(16);
  engine.Step();
  step(engine);
  step(engine);
  if (rows != 0) return -1;
  engine.SetSlot(row, position, engine.SlotOf(other, 12));
  for (int64_t steps = 1; steps <= limit; ++steps) {
    step(engine);
    if (rows > 0) return steps;
  }
  return -1;
}

// The latency of every position of the prefix [0, 16): each within K + 1 steps. Returns the
// largest.
template <typename MakeStep>
int64_t ExpectEveryPositionReportedWithinKSteps(const testing::FakeEngineOptions& options,
                                                MakeStep&& make_step) {
  const int64_t sample = options.config.verify_sample;
  int64_t largest = 0;
  for (int64_t position = 0; position < 16; ++position) {
    const int64_t steps = StepsToReport(options, position, 3 * sample + 3, make_step);
    EXPECT_GE(steps, 1) << "position " << position << " never reported";
    EXPECT_LE(steps, sample + 1) << "position " << position;
    largest = std::max(largest, steps);
  }
  return largest;
}

}  // namespace kvcanary::runtime
